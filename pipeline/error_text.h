// One line of text for an exception, as pipebal's errors show it: the first line of the
// message, or for an error raised inside the TorchScript interpreter the line that says what
// failed ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x16 and 32x4)"), not
// the interpreter's generic header.
#pragma once

#include <exception>
#include <string>

namespace pipebal::pipeline {

// The text up to the first newline.
std::string first_line(const std::string& text);

// The cause in one line; without a backtrace for c10::Error.
std::string error_summary(const std::exception& error);

// error_summary of a message's full text (the same rules, for text already taken out of an
// exception).
std::string summarize_error_text(const std::string& text);

}  // namespace pipebal::pipeline
