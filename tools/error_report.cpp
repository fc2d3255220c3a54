// See error_report.h.
#include "tools/error_report.h"

#include <cerrno>
#include <stdexcept>

#include <unistd.h>

#include "pipebal/common/error_text.h"

namespace pipebal::tools {

ErrorReport report_error(const std::exception& error, const std::string& prefix,
                         Summarize summarize) {
  // c10::Error and friends append a backtrace; users need only the cause, in one line. pipebal's
  // own messages for bad input are one line already, unless they quote what the user typed
  // (a newline in an argument): those are kept whole, for print_error_line to escape.
  const bool bad_input = dynamic_cast<const std::invalid_argument*>(&error) != nullptr;
  const std::string raw = error.what();
  const bool traceback = raw.find("(most recent call") != std::string::npos;
  const std::string what = bad_input && !traceback ? raw
                           : summarize             ? summarize(error)
                                                   : summarize_error_text(raw);
  if (!bad_input && dynamic_cast<const std::logic_error*>(&error) != nullptr) {
    return {"pipebal: internal error (a bug in pipebal; please report it with the command line): " +
                prefix + what,
            kInternalErrorStatus};
  }
  return {"pipebal: error: " + prefix + what, kUserErrorStatus};
}

void print_error_line(const std::string& line) {
  // One line, whatever it quotes, and of a size to read.
  const std::string text = shortened(printable(line), kMostErrorLineBytes) + "\n";
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to say it
    done += static_cast<size_t>(n);
  }
}

}  // namespace pipebal::tools
