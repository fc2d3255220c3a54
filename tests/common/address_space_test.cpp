// The room check against a real address-space limit, set in a child process (the limit would
// hold for the whole test binary otherwise).
#include "pipebal/common/address_space.h"

#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace pipebal {
namespace {

// In a child under a limit of what it maps now plus `room`: 0 when the check passes, 1 when it
// refuses in the words expected, 2 otherwise.
int check_under_limit(int64_t room, int threads) {
  const pid_t child = ::fork();
  if (child == 0) {
    const auto bytes = static_cast<rlim_t>(mapped_bytes() + room);
    const rlimit limit{bytes, bytes};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(3);
    try {
      check_address_space_room(threads);
      ::_exit(0);
    } catch (const std::invalid_argument& error) {
      const std::string what = error.what();
      ::_exit(what.find("the address-space limit (ulimit -v) of ") == 0 &&
                      what.find("OpenBLAS maps for 2 threads") != std::string::npos
                  ? 1
                  : 2);
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(AddressSpace, ALimitThatLeavesTooLittleRoomIsRefused) {
  // What is checked for: LibTorch loads it here, this test binary does not.
  if (::dlopen("libopenblas.so.0", RTLD_NOW) == nullptr) GTEST_SKIP() << "no OpenBLAS";
  const int64_t needed = blas_buffer_bytes(2);
  EXPECT_EQ(needed, int64_t{256} << 20);
  EXPECT_EQ(check_under_limit(needed / 2, 2), 1);
  EXPECT_EQ(check_under_limit(2 * needed, 2), 0);
}

TEST(AddressSpace, NoLimitNeedsNoRoom) {
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &limit), 0);
  if (limit.rlim_cur != RLIM_INFINITY) GTEST_SKIP() << "this test runs under an address limit";
  EXPECT_NO_THROW(check_address_space_room(1 << 20));  // 128 TiB: more than any machine maps
}

}  // namespace
}  // namespace pipebal
