// The command line's last word: user errors exit 2, broken invariants 70, in one line each.
#include "tools/error_report.h"

#include <stdexcept>

#include <gtest/gtest.h>

#include "pipebal/common/error_text.h"

namespace pipebal::tools {
namespace {

TEST(ErrorReport, BadInputAndFailedRunsAreUserErrors) {
  const ErrorReport bad = report_error(std::invalid_argument("balance 2,2 sums to 4"));
  EXPECT_EQ(bad.status, kUserErrorStatus);
  EXPECT_EQ(bad.line, "pipebal: error: balance 2,2 sums to 4");
  const ErrorReport failed =
      report_error(std::runtime_error("stage 1: boom\nbacktrace..."), "rank 1: ");
  EXPECT_EQ(failed.status, kUserErrorStatus);
  EXPECT_EQ(failed.line, "pipebal: error: rank 1: stage 1: boom");
}

TEST(ErrorReport, ControlCharactersAreWrittenAsEscapes) {
  EXPECT_EQ(printable("a\nb\r\tc\x1b[31md\x7f"), "a\\nb\\r\\tc\\x1b[31md\\x7f");
  EXPECT_EQ(printable("plain 'text' ü"), "plain 'text' ü");
}

TEST(ErrorReport, BrokenInvariantsAreBugs) {
  for (const std::logic_error& error :
       {std::logic_error("simulate: schedule deadlocks"), std::logic_error("x")}) {
    const ErrorReport report = report_error(error);
    EXPECT_EQ(report.status, kInternalErrorStatus) << error.what();
    EXPECT_EQ(report.line.rfind("pipebal: internal error (a bug in pipebal; please report it", 0),
              0u)
        << report.line;
  }
  // std::out_of_range thrown as itself is a logic_error too.
  try {
    throw std::out_of_range("vector::_M_range_check");
  } catch (const std::exception& error) {
    EXPECT_EQ(report_error(error).status, kInternalErrorStatus);
  }
}

}  // namespace
}  // namespace pipebal::tools
