// Integers as users type them on the command line: "8" and "3,3,2". Torch-free. Callers turn a
// nullopt into their own one-line error, which knows what the numbers mean.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipebal {

// The whole of `text` as a base-10 integer; nullopt when it is empty, has anything after the
// number, or does not fit in 64 bits.
std::optional<int64_t> parse_integer(const std::string& text);

// Comma-separated integers, e.g. "3,3,2"; nullopt when any item is not one (an empty item
// included: "3,,2", "3,").
std::optional<std::vector<int64_t>> parse_integer_list(const std::string& text);

}  // namespace pipebal
