// One line of text for an error message, as pipebal's errors show it: the first line of the
// message, or for an error raised inside the TorchScript interpreter the line that says what
// failed ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x16 and 32x4)"), not
// the interpreter's generic header. Without LibTorch: pipeline/error_text.h adds its errors.
#pragma once

#include <string>

namespace pipebal {

// The text up to the first newline.
std::string first_line(const std::string& text);

// The cause in one line of a message's full text.
std::string summarize_error_text(const std::string& text);

// `text` with its control characters written as escapes (\n, \t, \x1b): what a user typed (a
// path with a newline) said in a message of one line, and no escape sequence sent to the
// terminal.
std::string printable(const std::string& text);

// A path or name for a message: printable and in single quotes.
std::string quote(const std::string& text);

// `text` if at most `most` bytes long (at least 64), else its beginning and its end with what was
// left out between them said ("[... 98000 bytes left out ...]"), whole UTF-8 characters kept:
// a message that echoes a huge value stays readable, and keeps the advice at its end.
std::string shortened(const std::string& text, size_t most);

}  // namespace pipebal
