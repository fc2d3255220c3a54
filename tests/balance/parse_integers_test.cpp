// The integers users type: whole numbers only, and comma lists without empty items.
#include "pipebal/common/parse_integers.h"

#include <gtest/gtest.h>

namespace pipebal {
namespace {

TEST(ParseIntegers, WholeNumbersOnly) {
  EXPECT_EQ(parse_integer("8"), 8);
  EXPECT_EQ(parse_integer("-3"), -3);
  EXPECT_EQ(parse_integer("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", " 8", "8 ", "8x", "0x10", "2.5", "1e3", "9223372036854775808", "-"}) {
    EXPECT_FALSE(parse_integer(bad).has_value()) << bad;
  }
}

TEST(ParseIntegers, CommaListsWithoutEmptyItems) {
  EXPECT_EQ(parse_integer_list("3,3,2"), (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(parse_integer_list("7"), (std::vector<int64_t>{7}));
  for (const char* bad : {"", ",", "3,", ",3", "3,,2", "3;2", "3, 2", "a,b"}) {
    EXPECT_FALSE(parse_integer_list(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace pipebal
