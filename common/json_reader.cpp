// See json_reader.h.
#include "pipebal/common/json_reader.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace pipebal {

JsonReader::JsonReader(const nlohmann::json& document, std::string file)
    : JsonReader(document, std::move(file), "") {}

JsonReader::JsonReader(const nlohmann::json& value, std::string file, std::string path)
    : value_(&value), file_(std::move(file)), path_(std::move(path)) {}

bool JsonReader::has(const char* key) const {
  if (!value_->is_object()) return false;
  const auto it = value_->find(key);
  return it != value_->end() && !it->is_null();
}

JsonReader JsonReader::at(const char* key) const {
  if (!value_->is_object()) fail(fmt::format("is not an object ({})", value_->type_name()));
  const std::string child = path_.empty() ? key : path_ + "." + key;
  const auto it = value_->find(key);
  if (it == value_->end())
    throw std::invalid_argument(fmt::format("{}: missing \"{}\"", file_, child));
  return JsonReader(*it, file_, child);
}

std::vector<JsonReader> JsonReader::elements() const {
  if (!value_->is_array()) fail(fmt::format("must be an array, not {}", value_->type_name()));
  std::vector<JsonReader> out;
  out.reserve(value_->size());
  for (size_t i = 0; i < value_->size(); ++i) {
    out.push_back(JsonReader((*value_)[i], file_, fmt::format("{}[{}]", path_, i)));
  }
  return out;
}

std::string JsonReader::text() const {
  if (!value_->is_string()) fail(fmt::format("has the wrong type ({})", value_->type_name()));
  std::string text = value_->get<std::string>();
  if (text.find('\0') != std::string::npos) {
    fail("holds a NUL character (\\u0000), which no name or value may");
  }
  return text;
}

int64_t JsonReader::integer(int64_t min, int64_t max) const {
  int64_t n = 0;
  if (value_->is_number_unsigned()) {
    const uint64_t u = value_->get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) fail(fmt::format("is {}, expected {} to {}", u, min, max));
    n = static_cast<int64_t>(u);
  } else if (value_->is_number_integer()) {
    n = value_->get<int64_t>();
  } else if (value_->is_number_float() &&
             std::trunc(value_->get<double>()) == value_->get<double>()) {
    // 3.0 as another tool may write it; beyond 2^53 a float no longer counts exactly.
    const double x = value_->get<double>();
    if (std::abs(x) > 9e15) fail(fmt::format("is {}, expected {} to {}", value_->dump(), min, max));
    n = static_cast<int64_t>(x);
  } else {
    fail(fmt::format("must be an integer, not {}",
                     value_->is_number() ? value_->dump() : value_->type_name()));
  }
  if (n < min || n > max) fail(fmt::format("is {}, expected {} to {}", n, min, max));
  return n;
}

double JsonReader::number(double min, double max) const {
  if (!value_->is_number()) fail(fmt::format("must be a number, not {}", value_->type_name()));
  const double x = value_->get<double>();
  if (!std::isfinite(x) || x < min || x > max) {
    fail(max == std::numeric_limits<double>::max()
             ? fmt::format("is {}, expected a finite number >= {}", x, min)
             : fmt::format("is {:g}, expected {:g} to {:g}", x, min, max));
  }
  return x;
}

std::vector<int64_t> JsonReader::integers(int64_t min, int64_t max) const {
  std::vector<int64_t> out;
  for (const JsonReader& element : elements()) out.push_back(element.integer(min, max));
  return out;
}

double JsonReader::number_or_nan(const char* key) const {
  return has(key) ? at(key).as<double>() : std::numeric_limits<double>::quiet_NaN();
}

std::vector<double> JsonReader::numbers_or_empty(const char* key) const {
  std::vector<double> out;
  if (!has(key)) return out;
  for (const JsonReader& element : at(key).elements()) {
    out.push_back(element.is_null() ? std::numeric_limits<double>::quiet_NaN()
                                    : element.as<double>());
  }
  return out;
}

void JsonReader::fail(const std::string& what) const {
  throw std::invalid_argument(
      fmt::format("{}: {} {}", file_, path_.empty() ? "document" : path_, what));
}

}  // namespace pipebal
