// Option values read one way in every command. CLI11 reads integers as C literals ("010" is
// eight, "0x10" sixteen), wraps "-1" into an unsigned option, saturates past 64 bits, and takes
// "nan" and "inf" for floating options, which then pass range checks (NaN compares false); and an
// empty value ("-o $OUT" with OUT unset) reads as the option not given. Here an integer is base 10
// and fits its type's sign and 64 bits, a floating value is a finite decimal, and an option's value
// is never empty; text (paths, names) is valid UTF-8, as the JSON documents that record it must
// be; anything else is refused with one line naming the option.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace pipebal::tools {

// Applies the rules above to every option of `app` and its subcommands, before their own
// checks (the words after `--` of a positional list excepted from the empty rule). Call once
// all options are added.
void enforce_value_syntax(CLI::App& app);

// Throws std::invalid_argument naming the option when a value of an option that takes a list
// (`--memory-caps 8G,,8G`, `--chunks 1,2,`) has an empty item, which CLI11 would drop unsaid.
// Reads `argv` up to a `--`, after which words are a launched command's.
void check_list_items(const CLI::App& app, int argc, char** argv);

// Throws std::invalid_argument for an --input value that begins with a bracket ("[4,8]", the
// dtype left out): CLI11 reads a value in brackets as a list, and the error would quote "4".
// Reads `argv` up to a `--`.
void check_input_specs_have_dtypes(int argc, char** argv);

// The number rules on one value: "" when `value` is fine (rewritten canonically, e.g.
// "010" -> "10"), else why not.
std::string check_integer_text(std::string& value, bool is_unsigned);
std::string check_floating_text(const std::string& value);
// "" when `value` is valid UTF-8 (paths and names go into JSON documents), else why not.
std::string check_utf8_text(const std::string& value);

}  // namespace pipebal::tools
