// One line of text for an exception, as pipebal's errors show it (common/error_text.h), with
// LibTorch's errors (c10::Error) read without the backtrace they carry.
#pragma once

#include <exception>
#include <string>

#include "pipebal/common/error_text.h"

namespace pipebal::pipeline {

using pipebal::first_line;
using pipebal::summarize_error_text;

// The cause in one line; without a backtrace for c10::Error.
std::string error_summary(const std::exception& error);

}  // namespace pipebal::pipeline
