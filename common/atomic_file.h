// Writing output files so that an interrupted run never leaves half a document behind: the
// text goes to a temporary file beside the target (NAME.tmp.PID), flushed to disk, which is
// then renamed over it. Reading refuses what is not a regular file of sane size.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace pipebal {

// Files read whole are at most this large.
constexpr int64_t kMaxReadBytes = int64_t{1} << 30;

// Writes `content` to `path` atomically (same-directory temporary file, fsync, rename, fsync of
// the directory). A symbolic link is followed: its target is written, the link stays. A path
// that exists and is not a regular file (a device, a FIFO, a directory) is refused, and so
// temporary files of this target left by processes that no longer run are removed. Throws
// std::runtime_error naming the path and the reason.
void write_file_atomically(const std::string& path, const std::string& content);

// The same for a file another library writes: `write(temporary)` writes the whole file at the
// temporary path (registered for the interrupt's cleanup), which then replaces `path`. What
// `write` throws is passed on, the temporary removed.
void write_file_atomically_with(const std::string& path,
                                const std::function<void(const std::string& temporary)>& write);

// Checks now that write_file_atomically could write `path`: its directory exists and takes a
// new file, and the path (or what it links to) is not a directory or a device. Commands that
// work for long call it before the work, so that an output that cannot be written is refused
// up front instead of losing the result at the end. Creates and removes one temporary file;
// throws std::runtime_error with the text write_file_atomically would.
void check_writable(const std::string& path);

// Makes SIGTERM, SIGXCPU, and SIGINT, SIGQUIT and SIGHUP unless found ignored (a job a shell
// started in the background, a process under nohup), remove the temporary files being written and
// the staging directories of StagedDirectory not yet committed, print one line ("pipebal:
// interrupted") unless `announce` is false (a process of a launched run, whose launcher says it),
// and exit with status 128 + the signal. Ignores SIGPIPE and SIGXFSZ, so that a closed pipe or the
// file size limit fails a write as an error the command reports. For executables.
void install_interrupt_cleanup(bool announce = true);

// In a child between fork and exec (async-signal-safe): gives SIGPIPE and SIGXFSZ back the
// dispositions install_interrupt_cleanup found, for the program the child becomes.
void restore_ignored_signals_for_exec();

// Removes what install_interrupt_cleanup's handler would (the temporary files and uncommitted
// staging directories) and ends the process with `status` at once, without unwinding: for a
// process that must stop with work it cannot interrupt (a layer that never returns).
[[noreturn]] void remove_temporaries_and_exit_now(int status);

// A directory of documents that appears whole or not at all: its files are written into
// PATH.tmp.PID, and commit() renames that over PATH (replacing an earlier run's directory), so
// an interrupted or concurrent run never leaves a directory mixing two runs. Without commit()
// the staging directory is removed.
class StagedDirectory {
 public:
  // Creates the staging directory. An existing `path` is replaced only when it is a directory
  // holding nothing but files named in `own_files` (an earlier run's); otherwise, or when the
  // staging directory cannot be made, throws std::runtime_error saying why. A `path` that is a
  // symbolic link is followed (the link kept): its target is what is replaced, or made beside
  // the staging directory (a link that leads into a missing directory, or in a loop, is refused
  // here, not after the work).
  StagedDirectory(std::string path, const std::vector<std::string>& own_files);
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  // Where to write the files now.
  const std::string& staging() const { return staging_; }
  // Puts the directory in place at `path` (its link's target).
  void commit();

 private:
  std::string path_;    // as given, for messages
  std::string target_;  // where it leads

  std::string staging_;
  int staging_slot_ = -1;  // registered for the interrupt's cleanup
  bool committed_ = false;
};

struct PendingWrites;

// The output files of one command, which appear together or not at all. While one is open on a
// thread, write_file_atomically and write_file_atomically_with on that thread leave each file in
// its temporary (written whole and synced; an interrupt removes it), and commit() renames them
// all over their targets. Ended without commit() (a later write failed, an error came after), it
// removes them: none of the files lands beside an earlier run's others. Opened inside another,
// its files are the outer one's.
class WrittenTogether {
 public:
  WrittenTogether();
  ~WrittenTogether();
  WrittenTogether(const WrittenTogether&) = delete;
  WrittenTogether& operator=(const WrittenTogether&) = delete;

  // Puts every file written since the opening in place; throws std::runtime_error naming the
  // file that could not be (those renamed before it stay: renames within their directories
  // rarely fail, and cannot be undone once the earlier files they replace are gone).
  void commit();

 private:
  std::unique_ptr<PendingWrites> pending_;  // null when nested
};

// Returns the size of the regular file at `path`; throws std::invalid_argument ("cannot
// `action` 'path': why") when there is none (missing, unreadable, a directory, a FIFO that would
// block the reader, a device that never ends).
int64_t check_regular_file(const std::string& path, const std::string& action = "read");

// Reads a whole regular file of at most kMaxReadBytes; throws std::invalid_argument naming the
// path when it cannot (without blocking on a FIFO or reading a device).
std::string read_file(const std::string& path);

}  // namespace pipebal
