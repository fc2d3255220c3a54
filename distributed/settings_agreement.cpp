// See settings_agreement.h.
#include "pipebal/distributed/settings_agreement.h"

#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipebal/common/env_flag.h"
#include "pipebal/distributed/group.h"

namespace pipebal::distributed {
namespace {

constexpr const char* kWhy = "every process of a run must be given the same settings";

std::string encode(const SharedSettings& settings) {
  nlohmann::json list = nlohmann::json::array();
  for (const SharedSetting& s : settings) list.push_back({s.name, s.value, s.digest});
  // A value need not be UTF-8 (a mistyped flag is refused only later): replace what is not.
  return list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A rank's settings as it posted them; what cannot be read (another pipebal's) decodes empty
// and so differs from any settings that are not.
SharedSettings decode(const std::string& text) {
  SharedSettings settings;
  try {
    for (const auto& entry : nlohmann::json::parse(text)) {
      settings.push_back({entry.at(0).get<std::string>(), entry.at(1).get<std::string>(),
                          entry.at(2).get<bool>()});
    }
  } catch (const nlohmann::json::exception&) {
    return {};
  }
  return settings;
}

// How rank `rank`'s settings differ from rank 0's, or nullopt when they do not.
std::optional<std::string> difference(int rank, const SharedSettings& theirs,
                                      const SharedSettings& ours) {
  size_t i = 0;
  for (; i < theirs.size() && i < ours.size() && theirs[i].name == ours[i].name; ++i) {
    const SharedSetting& t = theirs[i];
    if (t.value == ours[i].value) continue;
    if (t.digest) return fmt::format("rank {}'s {} differ from rank 0's: {}", rank, t.name, kWhy);
    return fmt::format("rank {}'s {} is {}, rank 0's is {}: {}", rank, t.name, t.value,
                       ours[i].value, kWhy);
  }
  if (i == theirs.size() && i == ours.size()) return std::nullopt;
  return fmt::format("rank {} was started with other settings than rank 0 (another pipebal?): {}",
                     rank, kWhy);
}

// The value of `key` once posted. A process that never posts it (a pipebal from before this
// agreement goes straight on to its messages) is named at the timeout: "`missing` (...)".
std::string await_posted(Group& group, const std::string& key, const std::string& missing) {
  try {
    return group.await(key);
  } catch (const PeerFailed&) {
    throw;
  } catch (const RemoteFailure& error) {
    throw RemoteFailure(
        fmt::format("{} ({}): does it run another pipebal? {}", missing, error.what(), kWhy));
  }
}

}  // namespace

std::optional<std::string> settings_difference(const std::vector<SharedSettings>& by_rank) {
  for (size_t r = 1; r < by_rank.size(); ++r) {
    if (auto found = difference(static_cast<int>(r), by_rank[r], by_rank[0])) return found;
  }
  return std::nullopt;
}

void require_same_settings(Group& group, const SharedSettings& given) {
  const std::string kVerdict = "settings/verdict";
  // How messages through Gloo are framed: ranks that frame them differently would wait for each
  // other's until the timeout.
  SharedSettings mine = given;
  mine.push_back({kTensorChannelVariable, env_flag(kTensorChannelVariable) ? "1" : "0"});
  if (group.rank() != 0) {
    group.publish(fmt::format("settings/{}", group.rank()), encode(mine));
    const std::string verdict =
        await_posted(group, kVerdict, "rank 0 gave no verdict on the settings");
    if (!verdict.empty()) throw PeerFailed("rank 0 failed: " + verdict);
    return;
  }
  std::vector<SharedSettings> by_rank{mine};
  for (int r = 1; r < group.size(); ++r) {
    by_rank.push_back(decode(await_posted(group, fmt::format("settings/{}", r),
                                          fmt::format("rank {} posted no settings", r))));
  }
  const std::optional<std::string> difference = settings_difference(by_rank);
  group.publish(kVerdict, difference.value_or(""));
  if (difference) {
    group.report_failure(*difference);
    throw std::invalid_argument(*difference);
  }
}

}  // namespace pipebal::distributed
