// Numbers on the command line: base-10 integers that fit their type, finite decimal floats, the
// same in every option of every command.
#include "tools/value_syntax.h"

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace pipebal::tools {
namespace {

// The value as the option stores it, or the error CLI11 reports for it.
template <typename T>
std::string parsed(const std::string& text) {
  CLI::App app;
  CLI::App* sub = app.add_subcommand("sub");
  T value{};
  sub->add_option("--n", value);
  enforce_value_syntax(app);
  try {
    app.parse(std::vector<std::string>{text, "--n", "sub"});
  } catch (const CLI::ParseError& error) {
    return std::string("error: ") + error.what();
  }
  return std::to_string(value);
}

TEST(ValueSyntax, IntegersAreBaseTenInEveryCommand) {
  EXPECT_EQ(parsed<int>("010"), "10");  // CLI11 alone: 8
  EXPECT_EQ(parsed<int>("08"), "8");    // CLI11 alone: not a number
  EXPECT_EQ(parsed<int>("+7"), "7");
  EXPECT_EQ(parsed<int>("-7"), "-7");
  EXPECT_EQ(parsed<int>("0x10"), "error: --n: expected a whole number in base 10, got '0x10'");
  EXPECT_EQ(parsed<int>("1e3"), "error: --n: expected a whole number in base 10, got '1e3'");
  EXPECT_EQ(parsed<int>(" 5"), "error: --n: expected a whole number in base 10, got ' 5'");
  EXPECT_EQ(parsed<int>("-"), "error: --n: expected a whole number in base 10, got '-'");
}

TEST(ValueSyntax, IntegersFitTheirTypeWithoutWrapping) {
  EXPECT_EQ(parsed<uint64_t>("18446744073709551615"), "18446744073709551615");
  EXPECT_EQ(parsed<uint64_t>("-0"), "0");
  EXPECT_EQ(parsed<uint64_t>("-1"), "error: --n: must not be negative, got -1");  // alone: 2^64-1
  EXPECT_EQ(parsed<uint64_t>("18446744073709551616"),
            "error: --n: 18446744073709551616 is too large");
  EXPECT_EQ(parsed<int64_t>("9223372036854775807"), "9223372036854775807");
  // CLI11 alone saturates this to 2^63-1.
  EXPECT_EQ(parsed<int64_t>("99999999999999999999"),
            "error: --n: 99999999999999999999 is out of range");
  EXPECT_EQ(parsed<int>("2147483648").rfind("error: ", 0), 0u);  // past int: CLI11's own check
}

TEST(ValueSyntax, FloatsAreFiniteDecimals) {
  EXPECT_EQ(parsed<double>("2.5e-3"), std::to_string(2.5e-3));
  EXPECT_EQ(parsed<double>("-4"), std::to_string(-4.0));
  for (const char* text : {"nan", "NaN", "inf", "-inf", "infinity", "0x1p3", "1.5.2", ""}) {
    EXPECT_EQ(parsed<double>(text).rfind("error: --n: expected a decimal number", 0), 0u)
        << text << ": " << parsed<double>(text);
  }
  EXPECT_EQ(parsed<double>("1e400"), "error: --n: 1e400 is too large");
}

TEST(ValueSyntax, AnOptionsValueIsNeverEmptyButAWordAfterTheDashesMayBe) {
  CLI::App app;
  std::string output;
  std::vector<std::string> command;
  app.add_option("-o,--output", output);
  app.add_option("command", command);
  enforce_value_syntax(app);
  EXPECT_THROW(app.parse(std::vector<std::string>{"", "-o"}), CLI::ValidationError);
  app.parse(std::vector<std::string>{"", "-c", "sh", "--"});
  EXPECT_EQ(command, (std::vector<std::string>{"sh", "-c", ""}));
}

// Paths and names go into JSON documents, which hold UTF-8 only: a Latin-1 file name trained
// a whole run and then failed to write run.json.
TEST(ValueSyntax, TextIsValidUtf8ButAWordAfterTheDashesMayBeAnything) {
  EXPECT_EQ(check_utf8_text("models/m\xc3\xa9le.pt"), "");          // é
  EXPECT_EQ(check_utf8_text("\xe2\x82\xac \xf0\x9f\x98\x80"), "");  // U+20AC, U+1F600
  for (const std::string& bad :
       {std::string("bad\xffname.pt"), std::string("m\xe9le.pt"),  // Latin-1
        std::string("\xc0\xaf"),                                   // overlong '/'
        std::string("\xed\xa0\x80"),                               // a UTF-16 surrogate
        std::string("\xf4\x90\x80\x80"),                           // past U+10FFFF
        std::string("cut\xe2\x82")}) {                             // truncated
    EXPECT_NE(check_utf8_text(bad).find("not valid UTF-8"), std::string::npos) << bad;
  }
  EXPECT_EQ(check_utf8_text("bad\xffname.pt"),
            "not valid UTF-8 (at byte 3), which the JSON documents pipebal writes cannot hold");

  CLI::App app;
  std::string model;
  std::vector<std::string> command;
  app.add_option("--model", model);
  app.add_option("command", command);
  enforce_value_syntax(app);
  EXPECT_THROW(app.parse(std::vector<std::string>{"m\xe9le.pt", "--model"}), CLI::ValidationError);
  app.parse(std::vector<std::string>{"\xff", "--"});
  EXPECT_EQ(command, (std::vector<std::string>{"\xff"}));
}

TEST(ValueSyntax, LeavesOtherOptionsAlone) {
  CLI::App app;
  std::string text;
  std::vector<int> list;
  app.add_option("--text", text);
  app.add_option("--list", list)->delimiter(',');
  enforce_value_syntax(app);
  app.parse(std::vector<std::string>{"010,011", "--list", "0x10", "--text"});
  EXPECT_EQ(text, "0x10");
  EXPECT_EQ(list, (std::vector<int>{10, 11}));
}

}  // namespace
}  // namespace pipebal::tools
