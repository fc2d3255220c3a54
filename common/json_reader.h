// Reading a JSON document field by field with errors that say where: every pipebal document
// (profile, plan, run, validation) is read through a JsonReader, so a missing or mistyped value
// in a hand-edited file is reported as one line, "FILE: path.to.field has the wrong type
// (string)", whichever document it is.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipebal {

// A value inside one document, with the file name and the path that lead to it. Refers to the
// document; does not own it.
class JsonReader {
 public:
  // `file` names the document in errors ("plan.json", a path, or "plan" for one in memory).
  JsonReader(const nlohmann::json& document, std::string file);

  const nlohmann::json& value() const { return *value_; }
  const std::string& path() const { return path_; }
  bool is_null() const { return value_->is_null(); }

  // True when this is an object holding `key` with a non-null value.
  bool has(const char* key) const;
  // The member `key`; throws when this is not an object or `key` is missing.
  JsonReader at(const char* key) const;
  // The elements of this array; throws when this is not an array.
  std::vector<JsonReader> elements() const;

  // This value as T; throws naming the path when it has another type. Numbers convert between
  // kinds as nlohmann does (a float read as an int truncates): use integer() for counts. A
  // string, or strings, go through text().
  template <typename T>
  T as() const {
    if constexpr (std::is_same_v<T, std::string>) {
      return text();
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      std::vector<std::string> texts;
      for (const JsonReader& element : elements()) texts.push_back(element.text());
      return texts;
    } else {
      try {
        return value_->get<T>();
      } catch (const nlohmann::json::exception&) {
        fail("has the wrong type (" + std::string(value_->type_name()) + ")");
      }
    }
  }
  // This string; throws for another type, and for a NUL character ("\u0000"), which no name or
  // value holds and which would cut short every message that quotes it.
  std::string text() const;
  // An integer in [min, max]; throws for a fraction, another type or a value out of range.
  int64_t integer(int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max()) const;
  // A finite number in [min, max].
  double number(double min = -std::numeric_limits<double>::max(),
                double max = std::numeric_limits<double>::max()) const;
  // The elements of this array, each an integer in [min, max].
  std::vector<int64_t> integers(int64_t min = std::numeric_limits<int64_t>::min(),
                                int64_t max = std::numeric_limits<int64_t>::max()) const;

  template <typename T>
  T get(const char* key) const {
    return at(key).as<T>();
  }
  template <typename T>
  T get_or(const char* key, T fallback) const {
    return has(key) ? get<T>(key) : fallback;
  }
  // The number at `key`, NaN when it is absent or null.
  double number_or_nan(const char* key) const;
  // The numbers of the array at `key` (empty when absent); null elements become NaN.
  std::vector<double> numbers_or_empty(const char* key) const;

  // Throws std::invalid_argument "FILE: PATH WHAT" (or "FILE: document WHAT" at the root).
  [[noreturn]] void fail(const std::string& what) const;

 private:
  JsonReader(const nlohmann::json& value, std::string file, std::string path);

  const nlohmann::json* value_;
  std::string file_;
  std::string path_;
};

}  // namespace pipebal
