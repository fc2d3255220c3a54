// The command line's last word: user errors exit 2, broken invariants 70, in one line each.
#include "tools/error_report.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>
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

// A huge echoed value is cut in the middle, its start and its end (the advice) kept, and what was
// left out said; never inside a UTF-8 character.
TEST(ErrorReport, LongLinesAreShortenedInTheMiddle) {
  const std::string line =
      "pipebal: error: unknown model '" + std::string(100000, 'x') + "' (valid: mlp, gpt)";
  const std::string cut = shortened(line, 2000);
  EXPECT_LE(cut.size(), 2000u);
  EXPECT_GT(cut.size(), 1900u);
  EXPECT_EQ(cut.rfind("pipebal: error: unknown model 'xxx", 0), 0u) << cut;
  EXPECT_EQ(cut.substr(cut.size() - 19), "' (valid: mlp, gpt)") << cut;
  const size_t note = cut.find(" [... ");
  ASSERT_NE(note, std::string::npos);
  const size_t left_out = std::stoul(cut.substr(note + 6));
  EXPECT_EQ(cut.find(fmt::format(" [... {} bytes left out ...] ", left_out)), note);
  EXPECT_EQ(cut.size() - fmt::format(" [... {} bytes left out ...] ", left_out).size() + left_out,
            line.size())
      << "what is kept and what is left out make the whole";
  EXPECT_EQ(shortened("short", 2000), "short");
  EXPECT_EQ(shortened(std::string(2000, 'y'), 2000), std::string(2000, 'y'));

  std::string accents;
  for (int i = 0; i < 1000; ++i) accents += "\xc3\xa9";  // é, two bytes each
  for (size_t most : {100u, 101u, 102u, 103u}) {
    const std::string kept = shortened(accents, most);
    const size_t cut_at = kept.find(" [");
    ASSERT_NE(cut_at, std::string::npos);
    EXPECT_EQ(cut_at % 2, 0u) << "cut inside a character at " << most;
    EXPECT_EQ((kept.size() - kept.find("] ") - 2) % 2, 0u) << most;
  }
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
