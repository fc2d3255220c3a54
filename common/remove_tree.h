// Removes a file or a directory with everything under it, never following a symbolic link.
// Not std::filesystem::remove_all: a LibTorch from a pip wheel (2.11) exports its own copy of
// that function, which the dynamic linker may bind in place of the standard library's, and
// which crashes on a directory that is not empty (seen on a GPU machine: a null call inside
// it). Torch-free.
#pragma once

#include <string>

namespace pipebal {

// True when `path` no longer exists (also when it never did); otherwise false, with the reason
// in `error` if given.
bool remove_tree(const std::string& path, std::string* error = nullptr);

}  // namespace pipebal
