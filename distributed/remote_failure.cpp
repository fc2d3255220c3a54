// See remote_failure.h.
#include "pipebal/distributed/remote_failure.h"

#include <limits>
#include <optional>

#include "pipebal/common/parse_integers.h"

namespace pipebal::distributed {
namespace {

// N of a failure that begins "rank N" and a blank or an apostrophe; -1 otherwise.
int rank_named_first(const std::string& failure) {
  const std::string prefix = "rank ";
  if (failure.rfind(prefix, 0) != 0) return -1;
  const size_t end = failure.find_first_of(" '", prefix.size());
  if (end == std::string::npos) return -1;
  const std::optional<int64_t> rank =
      parse_integer(failure.substr(prefix.size(), end - prefix.size()));
  if (!rank || *rank < 0 || *rank > std::numeric_limits<int>::max()) return -1;
  return static_cast<int>(*rank);
}

}  // namespace

PeerFailed::PeerFailed(const std::string& failure)
    : RemoteFailure("stopped: " + failure), failed_rank_(rank_named_first(failure)) {}

}  // namespace pipebal::distributed
