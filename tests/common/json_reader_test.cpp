// JsonReader: every value read names its file and path when it is missing, mistyped or out of
// range, so each document's reader reports a bad hand-edited field in one line.
#include "pipebal/common/json_reader.h"
#include "pipebal/common/schema.h"

#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace pipebal {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "(no error)";
}

const json kDoc = json::parse(R"({
  "name": "mlp", "chunks": 4, "ratio": 0.5, "as_float": 3.0, "none": null,
  "stages": [{"ms": 1.5, "bytes": [10, null]}, {"ms": "slow"}]
})");

TEST(JsonReader, ReadsValuesAndNamesThePathOfABadOne) {
  const JsonReader doc(kDoc, "plan.json");
  EXPECT_EQ(doc.get<std::string>("name"), "mlp");
  EXPECT_EQ(doc.at("chunks").integer(1, 8), 4);
  EXPECT_EQ(doc.at("as_float").integer(), 3);  // another tool may write 3.0
  EXPECT_EQ(doc.get_or<int>("absent", 7), 7);
  EXPECT_FALSE(doc.has("none"));
  EXPECT_TRUE(std::isnan(doc.number_or_nan("none")));
  const std::vector<JsonReader> stages = doc.at("stages").elements();
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].get<double>("ms"), 1.5);
  const std::vector<double> bytes = stages[0].numbers_or_empty("bytes");
  ASSERT_EQ(bytes.size(), 2u);
  EXPECT_EQ(bytes[0], 10);
  EXPECT_TRUE(std::isnan(bytes[1]));

  EXPECT_EQ(error_of([&] { stages[1].get<double>("ms"); }),
            "plan.json: stages[1].ms has the wrong type (string)");
  EXPECT_EQ(error_of([&] { stages[1].at("bytes"); }), "plan.json: missing \"stages[1].bytes\"");
  EXPECT_EQ(error_of([&] { doc.at("chunks").integer(1, 2); }),
            "plan.json: chunks is 4, expected 1 to 2");
  EXPECT_EQ(error_of([&] { doc.at("ratio").integer(); }),
            "plan.json: ratio must be an integer, not 0.5");
  EXPECT_EQ(error_of([&] { doc.at("ratio").number(1); }),
            "plan.json: ratio is 0.5, expected a finite number >= 1");
  EXPECT_EQ(error_of([&] { doc.at("name").elements(); }),
            "plan.json: name must be an array, not string");
  EXPECT_EQ(error_of([&] { doc.at("name").at("x"); }), "plan.json: name is not an object (string)");
  EXPECT_EQ(error_of([&] { doc.fail("is empty"); }), "plan.json: document is empty");
}

// A NUL character would end the C string of every message quoting the text (a layer's name
// cut at it, the reason lost): refused where it is read, in a string or a list of strings.
TEST(JsonReader, TextWithANulCharacterIsRefused) {
  const json doc = json::parse(R"({"name": "a\u0000b", "names": ["ok", "x\u0000"], "n": 1})");
  const JsonReader reader(doc, "plan.json");
  EXPECT_EQ(error_of([&] { reader.get<std::string>("name"); }),
            "plan.json: name holds a NUL character (\\u0000), which no name or value may");
  EXPECT_EQ(error_of([&] { reader.get<std::vector<std::string>>("names"); }),
            "plan.json: names[1] holds a NUL character (\\u0000), which no name or value may");
  EXPECT_EQ(error_of([&] { reader.get<std::string>("n"); }),
            "plan.json: n has the wrong type (number)");
  EXPECT_EQ(error_of([&] { reader.get<std::vector<std::string>>("n"); }),
            "plan.json: n must be an array, not number");
}

TEST(JsonReader, AnUnsignedBeyondTheRangeIsRefused) {
  const json big = json::parse("18446744073709551615");
  EXPECT_EQ(error_of([&] { JsonReader(big, "f").integer(0, 100); }),
            "f: document is 18446744073709551615, expected 0 to 100");
}

TEST(ParseJson, RefusesNestingPastTheLimitWithoutWalkingIt) {
  const auto nested = [](int depth) {
    return std::string(depth, '[') + "1" + std::string(depth, ']');
  };
  EXPECT_EQ(parse_json(nested(kMaxJsonDepth), "f").dump().size(), nested(kMaxJsonDepth).size());
  EXPECT_EQ(error_of([&] { parse_json(nested(kMaxJsonDepth + 1), "f"); }),
            "f: JSON nested deeper than 100 levels");
  // Deep enough that a recursive walk of it would overflow the stack.
  EXPECT_EQ(error_of([&] { parse_json("{\"a\":" + nested(10'000'000), "f"); }),
            "f: JSON nested deeper than 100 levels");
  EXPECT_EQ(error_of([&] { parse_json("[1,", "f"); }), "f: malformed JSON at byte 4");
  // Brackets inside strings (an escaped quote does not end one) are text, not nesting.
  const std::string brackets(kMaxJsonDepth + 1, '[');
  EXPECT_EQ(parse_json("{\"a\": \"\\\"" + brackets + "\"}", "f").at("a"), "\"" + brackets);
  EXPECT_EQ(error_of([&] { parse_json("]]" + nested(3), "f"); }), "f: malformed JSON at byte 1");
  EXPECT_EQ(error_of([&] { parse_json("[1, 1e999]", "f"); }),
            "f: malformed JSON at byte 9 (a number out of range: 1e999)");
}

TEST(ParseJson, RefusesAKeyGivenTwiceInOneObjectNamingWhere) {
  EXPECT_EQ(error_of([&] { parse_json(R"({"balance": [1, 2], "balance": [2, 1]})", "plan.json"); }),
            "plan.json: \"balance\" given twice in the document");
  EXPECT_EQ(error_of([&] {
              parse_json(R"({"layers": [{"name": "a"}, {"name": "b", "x": [{}], "name": "c"}]})",
                         "p.json");
            }),
            "p.json: \"name\" given twice in layers[1]");
  EXPECT_EQ(error_of([&] { parse_json(R"([[1, {"a": {"b": 1, "b": 2}}]])", "f"); }),
            "f: \"b\" given twice in [0][1].a");
  // A key printed as JSON writes it, on one line.
  EXPECT_EQ(error_of([&] { parse_json("{\"a\\nb\": {\"c\\\"\": 1, \"c\\\"\": 2}}", "f"); }),
            "f: \"c\\\"\" given twice in a\\nb");
  // The same key in different objects, or as a value, is fine.
  const json doc = parse_json(R"({"a": {"a": "a"}, "b": [{"a": 1}, {"a": 2}]})", "f");
  EXPECT_EQ(doc.at("b").at(1).at("a"), 2);
}

}  // namespace
}  // namespace pipebal
