// See value_syntax.h.
#include "tools/value_syntax.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "pipebal/common/parse_integers.h"

namespace pipebal::tools {
namespace {

bool all_digits(const std::string& text, size_t from) {
  return from < text.size() && text.find_first_not_of("0123456789", from) == std::string::npos;
}

// The type CLI11 names for an option's target: INT, UINT, FLOAT, ... (before any ':' that
// its validators' descriptions add).
std::string base_type(const CLI::Option& option) {
  const std::string type = option.get_type_name();
  return type.substr(0, type.find(':'));
}

std::string not_utf8(size_t at) {
  return "not valid UTF-8 (at byte " + std::to_string(at) +
         "), which the JSON documents pipebal writes cannot hold";
}

}  // namespace

std::string check_integer_text(std::string& value, bool is_unsigned) {
  const bool negative = !value.empty() && value.front() == '-';
  const size_t digits = !value.empty() && (value.front() == '-' || value.front() == '+') ? 1 : 0;
  if (!all_digits(value, digits)) return "expected a whole number in base 10, got '" + value + "'";
  if (is_unsigned && negative && value.find_first_not_of('0', 1) != std::string::npos) {
    return "must not be negative, got " + value;
  }
  if (!is_unsigned) {
    const std::optional<int64_t> number = parse_integer(value);  // base 10, within 64 bits
    if (!number) return value + " is out of range";
    value = std::to_string(*number);
    return "";
  }
  errno = 0;
  const unsigned long long number = std::strtoull(value.c_str() + digits, nullptr, 10);
  if (errno == ERANGE) return value + " is too large";
  value = std::to_string(number);
  return "";
}

std::string check_utf8_text(const std::string& value) {
  // Lead bytes and how many continuation bytes (10xxxxxx) follow; no overlong forms, no UTF-16
  // surrogates, nothing past U+10FFFF (the rules of RFC 3629 that JSON writers enforce).
  for (size_t i = 0; i < value.size();) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(value[k]); };
    const unsigned char lead = byte(i);
    size_t follow = 0;
    unsigned char low = 0x80, high = 0xBF;  // the second byte's range
    if (lead < 0x80) {
      ++i;
      continue;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      follow = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      follow = 2;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      follow = 3;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return not_utf8(i);
    }
    bool ok = i + follow < value.size();  // the continuation bytes are there
    for (size_t k = 1; ok && k <= follow; ++k) {
      const unsigned char c = byte(i + k);
      ok = k == 1 ? (c >= low && c <= high) : (c >= 0x80 && c <= 0xBF);
    }
    if (!ok) return not_utf8(i);
    i += follow + 1;
  }
  return "";
}

std::string check_floating_text(const std::string& value) {
  // Decimal notation only: strtod would also take hexadecimal floats, "nan" and "infinity".
  const bool decimal =
      !value.empty() && value.find_first_not_of("0123456789+-.eE") == std::string::npos;
  char* end = nullptr;
  const double number = decimal ? std::strtod(value.c_str(), &end) : 0;
  if (!decimal || end != value.c_str() + value.size()) {
    return "expected a decimal number, got '" + value + "'";
  }
  if (!std::isfinite(number)) return value + " is too large";
  return "";
}

namespace {

// The long names ("--chunks") of the options of `app` and its subcommands that split a value
// into a list.
void list_options(const CLI::App& app, std::vector<std::string>& names) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_delimiter() == '\0') continue;
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  for (const CLI::App* sub : app.get_subcommands({})) list_options(*sub, names);
}

}  // namespace

void check_list_items(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> names;
  list_options(app, names);
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") return;
    const size_t equals = word.find('=');
    const std::string name = word.substr(0, equals);
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    std::string value;
    if (equals != std::string::npos) {
      value = word.substr(equals + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      continue;  // CLI11 says the value is missing
    }
    const std::string padded = "," + value + ",";
    if (padded.find(",,") != std::string::npos) {
      throw std::invalid_argument(name + ": an empty item in '" + value +
                                  "' (give the values comma-separated, none empty)");
    }
  }
}

void check_input_specs_have_dtypes(int argc, char** argv) {
  bool in_input = false;  // the words after --input, up to the next option, are its values
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "--") return;
    if (word.rfind("--input=", 0) == 0) {
      word.erase(0, 8);
      in_input = false;
    } else if (!word.empty() && word[0] == '-') {
      in_input = word == "--input";
      continue;
    } else if (!in_input) {
      continue;
    }
    if (!word.empty() && word[0] == '[') {
      throw std::invalid_argument("--input '" + word +
                                  "': the dtype comes first, DTYPE[SHAPE], e.g. float32" + word);
    }
  }
}

void enforce_value_syntax(CLI::App& app) {
  // The command's option names ("--steps", "-o"): CLI11 gives an option with no value the next
  // word whatever it is, so `--plans -o dir` would read "-o" as a plan and then miss -o.
  auto names = std::make_shared<std::vector<std::string>>();
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names->push_back("--" + name);
    for (const std::string& name : option->get_snames()) names->push_back("-" + name);
  }
  const auto names_an_option = [names](const std::string& value) {
    const std::string name = value.substr(0, value.find('='));  // --steps=3 too
    return std::find(names->begin(), names->end(), name) != names->end();
  };
  for (CLI::Option* option : app.get_options()) {
    if (option->nonpositional() && option->get_type_size_max() > 0) {
      option->check(CLI::Validator(
          [names_an_option](std::string& value) -> std::string {
            if (value.empty()) return "the value is empty";
            if (names_an_option(value)) return "no value given (" + value + " is an option)";
            return "";
          },
          ""));
    }
    const std::string type = base_type(*option);
    if (type == "INT" || type == "UINT") {
      const bool is_unsigned = type == "UINT";
      option->transform(CLI::Validator(
          [is_unsigned](std::string& value) { return check_integer_text(value, is_unsigned); },
          ""));
    } else if (type == "FLOAT") {
      option->transform(
          CLI::Validator([](std::string& value) { return check_floating_text(value); }, ""));
    } else if (option->get_type_size_max() > 0 && option->get_name() != "command") {
      // Paths and names end up in profile.json, plan.json, run.json; launch's command words
      // are passed on as they are.
      option->check(CLI::Validator([](std::string& value) { return check_utf8_text(value); }, ""));
    }
  }
  for (CLI::App* sub : app.get_subcommands({})) enforce_value_syntax(*sub);
}

}  // namespace pipebal::tools
