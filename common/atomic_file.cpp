// See atomic_file.h.
#include "pipebal/common/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "pipebal/common/error_text.h"
#include "pipebal/common/parse_integers.h"
#include "pipebal/common/remove_tree.h"

namespace pipebal {
namespace {

namespace fs = std::filesystem;

std::string system_error_text(int error = errno) {
  return std::strerror(error);
}

// Temporary files being written and staging directories being filled, for the signal handler
// to remove: fixed slots of plain characters, as a handler may touch nothing else.
// A slot is claimed, then filled, then ready: the handler reads only ready ones, whole.
enum SlotState : int { kFree, kClaimed, kReady };
constexpr int kSlots = 16;
constexpr size_t kPathBytes = 4096;
std::array<std::atomic<int>, kSlots> slot_state{};
std::array<std::array<char, kPathBytes>, kSlots> slot_path{};
std::array<int, kSlots> slot_depth{};  // 0: a file; more: a directory of that many levels
volatile sig_atomic_t announce_interrupt = 1;

// `depth` 0 for a file; for a directory, how many levels below it the handler may remove.
int register_temporary(const std::string& path, int depth = 0) {
  if (path.size() + 1 > kPathBytes) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (slot_state[i].compare_exchange_strong(expected, kClaimed)) {
      std::memcpy(slot_path[i].data(), path.c_str(), path.size() + 1);
      slot_depth[i] = depth;
      slot_state[i] = kReady;
      return i;
    }
  }
  return -1;  // more writers than slots: such a file is not cleaned up on a signal
}

void unregister_temporary(int slot) {
  if (slot >= 0) slot_state[slot] = kFree;
}

// Whether two names are the same, without the C library (a signal handler calls this).
bool same_name(const char* a, const char* b) {
  for (; *a != '\0' && *a == *b; ++a, ++b) {
  }
  return *a == *b;
}

// Removes `name` (under the directory `parent`) and, for a directory, what is under it down to
// `depth` levels, with system calls alone, as a signal handler may: the tree a StagedDirectory
// holds while a command writes it (documents, at most a folder of them).
void remove_in_handler(int parent, const char* name, int depth) {
  if (::unlinkat(parent, name, 0) == 0 || errno == ENOENT) return;
  if (errno != EISDIR || depth == 0) return;
  const int dir = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return;
  // Entries removed while the directory is read may move the others: read it again until a
  // pass finds nothing but "." and "..".
  for (int pass = 0; pass < 16; ++pass) {
    bool found = false;
    ::lseek(dir, 0, SEEK_SET);
    alignas(8) char buffer[4096];
    for (long bytes; (bytes = ::syscall(SYS_getdents64, dir, buffer, sizeof buffer)) > 0;) {
      for (long offset = 0; offset < bytes;) {
        const auto* entry = reinterpret_cast<const dirent64*>(buffer + offset);
        offset += entry->d_reclen;
        if (same_name(entry->d_name, ".") || same_name(entry->d_name, "..")) continue;
        found = true;
        remove_in_handler(dir, entry->d_name, depth - 1);
      }
    }
    if (!found) break;
  }
  ::close(dir);
  ::unlinkat(parent, name, AT_REMOVEDIR);
}

// What install_interrupt_cleanup's handler ends the process on, and what it ignores (as the
// process found them, for the programs it starts).
constexpr std::array<int, 5> kStoppingSignals{SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXCPU};
constexpr std::array<int, 2> kIgnoredSignals{SIGPIPE, SIGXFSZ};
std::array<struct sigaction, kIgnoredSignals.size()> found_dispositions{};
bool found_recorded = false;

// Set by the first handler to run. A signal can arrive twice (`timeout` sends it to the process
// and then to its group) and the second can land on another thread while the first is still
// handling it: only the first cleans up, speaks and exits.
std::atomic_flag handling_signal = ATOMIC_FLAG_INIT;

extern "C" void remove_temporaries_and_exit(int signal_number) {
  if (handling_signal.test_and_set()) {
    for (;;) ::pause();  // the first handler ends the process
  }
  for (int i = 0; i < kSlots; ++i) {
    if (slot_state[i] == kReady) remove_in_handler(AT_FDCWD, slot_path[i].data(), slot_depth[i]);
  }
  const char* message = signal_number == SIGINT    ? "pipebal: interrupted\n"
                        : signal_number == SIGHUP  ? "pipebal: hung up\n"
                        : signal_number == SIGQUIT ? "pipebal: quit\n"
                        : signal_number == SIGXCPU ? "pipebal: CPU time limit reached (ulimit -t)\n"
                                                   : "pipebal: terminated\n";
  if (announce_interrupt) {
    const ssize_t ignored = ::write(STDERR_FILENO, message, std::strlen(message));
    (void)ignored;
  }
  ::_exit(128 + signal_number);
}

// Removes the temporary file unless the rename consumed it.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path)
      : path_(std::move(path)), slot_(register_temporary(path_)) {}
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
    unregister_temporary(slot_);
  }
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }
  // Keeps the file, still registered for the interrupt's cleanup: returns its slot.
  int hand_over() {
    path_.clear();
    return std::exchange(slot_, -1);
  }

 private:
  std::string path_;
  int slot_;
};

}  // namespace

// The temporaries written while a WrittenTogether is open, each registered for the interrupt's
// cleanup until it is renamed or removed.
struct PendingWrites {
  struct File {
    std::string temporary;
    fs::path target;
    std::string path;  // as given, for messages
    int slot;
  };
  std::vector<File> files;
};

namespace {

// The file a write to `path` lands in: a symbolic link's target (followed as the shell's `>`
// does), refused when it exists and is not a regular file.
fs::path write_target(const std::string& path) {
  fs::path target = path;
  std::error_code error;
  // What the path is once the kernel followed it: /dev/stdout's link names a pipe ("pipe:[..]"),
  // which the walk below could not follow.
  const fs::file_status followed = fs::status(target, error);
  if (fs::exists(followed) && !fs::is_regular_file(followed)) {
    throw std::runtime_error("cannot write " + quote(path) +
                             ": it is not a regular file (pipebal writes regular files only)");
  }
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, error)); ++hops) {
    if (hops == 40)
      throw std::runtime_error("cannot write " + quote(path) + ": too many symbolic links");
    const fs::path link = fs::read_symlink(target, error);
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  const fs::file_status status = fs::status(target, error);
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    throw std::runtime_error("cannot write " + quote(path) +
                             ": it is not a regular file (pipebal writes regular files only)");
  }
  return target;
}

std::string temporary_suffix() {
  return ".tmp." + std::to_string(::getpid());
}

// Temporary files of `target` left by processes that no longer run (a kill -9, a crash, a slot
// short for the interrupt's cleanup).
void remove_stale_temporaries(const fs::path& target) {
  std::error_code error;
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string prefix = target.filename().string() + ".tmp.";
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    // PID, or PID.previous: the directory a StagedDirectory replaced, left by an interrupt.
    std::string pid_text = name.substr(prefix.size());
    const std::string previous = ".previous";
    if (pid_text.size() > previous.size() &&
        pid_text.compare(pid_text.size() - previous.size(), previous.size(), previous) == 0) {
      pid_text.resize(pid_text.size() - previous.size());
    }
    if (pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    // Not ours unless it names a process id: a name past pid_t is someone else's file.
    const std::optional<int64_t> number = parse_integer(pid_text);
    if (!number || *number < 1 || *number > std::numeric_limits<pid_t>::max()) continue;
    const auto pid = static_cast<pid_t>(*number);
    // A staging directory (StagedDirectory) as well as a file.
    if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) {
      remove_tree(entry.path().string());
    }
  }
}

void write_all(int fd, const std::string& content, const std::string& path) {
  const char* data = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0)
      throw std::runtime_error("cannot write " + quote(path) + ": " + system_error_text());
    data += written;
    left -= static_cast<size_t>(written);
  }
}

void sync_directory(const fs::path& target) {
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename happened; durability of the name is best effort
  ::fsync(fd);
  ::close(fd);
}

thread_local PendingWrites* open_writes = nullptr;

// Gives the written and synced `temporary` the name `target`, or leaves it to the open
// WrittenTogether.
void put_in_place(TemporaryFile& temporary, const fs::path& target, const std::string& path) {
  if (open_writes != nullptr) {
    // Written again: the temporary holds the later content, and is put in place once.
    std::vector<PendingWrites::File>& files = open_writes->files;
    const auto same = std::find_if(files.begin(), files.end(), [&](const auto& file) {
      return file.temporary == temporary.path();
    });
    if (same != files.end()) {
      unregister_temporary(same->slot);
      files.erase(same);
    }
    files.push_back({temporary.path(), target, path, temporary.hand_over()});
    return;
  }
  if (::rename(temporary.path().c_str(), target.c_str()) != 0) {
    throw std::runtime_error("cannot write " + quote(path) + ": " + system_error_text());
  }
  temporary.release();
  sync_directory(target);
}

}  // namespace

void remove_temporaries_and_exit_now(int status) {
  // A signal now would run its handler on this thread, find the cleanup taken and wait forever:
  // let another thread take it (and wait) while this one ends the process.
  sigset_t signals;
  sigemptyset(&signals);
  for (const int signal_number : kStoppingSignals) sigaddset(&signals, signal_number);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  if (handling_signal.test_and_set()) {
    for (;;) ::pause();  // a signal handler is cleaning up and ends the process
  }
  for (int i = 0; i < kSlots; ++i) {
    if (slot_state[i] == kReady) remove_in_handler(AT_FDCWD, slot_path[i].data(), slot_depth[i]);
  }
  ::_exit(status);
}

void install_interrupt_cleanup(bool announce) {
  announce_interrupt = announce ? 1 : 0;
  struct sigaction action {};
  action.sa_handler = remove_temporaries_and_exit;
  sigemptyset(&action.sa_mask);
  for (const int signal_number : kStoppingSignals) {
    // Not the terminal's signals found ignored: a process started to outlive its terminal
    // (nohup ignores SIGHUP) or run in the background of a shell without job control (which
    // ignores SIGINT and SIGQUIT for it, so that Ctrl-C stops only the foreground) keeps them so.
    struct sigaction current {};
    if (signal_number != SIGTERM && signal_number != SIGXCPU &&
        (::sigaction(signal_number, nullptr, &current) != 0 || current.sa_handler == SIG_IGN)) {
      continue;
    }
    ::sigaction(signal_number, &action, nullptr);
  }
  // A write past a closed pipe (`| head`) or the file size limit (ulimit -f) then fails like any
  // other, with one line and no file half-written, rather than killing the process silently.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  for (size_t i = 0; i < kIgnoredSignals.size(); ++i) {
    ::sigaction(kIgnoredSignals[i], &ignore, &found_dispositions[i]);
    found_recorded = true;
  }
}

void restore_ignored_signals_for_exec() {
  if (!found_recorded) return;
  for (size_t i = 0; i < kIgnoredSignals.size(); ++i) {
    ::sigaction(kIgnoredSignals[i], &found_dispositions[i], nullptr);
  }
}

void write_file_atomically_with(const std::string& path,
                                const std::function<void(const std::string& temporary)>& write) {
  const fs::path target = write_target(path);
  remove_stale_temporaries(target);
  TemporaryFile temporary(target.string() + temporary_suffix());
  write(temporary.path());
  // On disk before it takes the name, as write_file_atomically's.
  const int fd = ::open(temporary.path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot write " + quote(path) + ": " + system_error_text(error));
  }
  ::close(fd);
  put_in_place(temporary, target, path);
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const fs::path target = write_target(path);
  remove_stale_temporaries(target);
  TemporaryFile temporary(target.string() + temporary_suffix());
  const int fd = ::open(temporary.path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw std::runtime_error("cannot write " + quote(path) + ": " + system_error_text());
  try {
    write_all(fd, content, path);
    if (::fsync(fd) != 0) {
      throw std::runtime_error("cannot write " + quote(path) + ": " + system_error_text());
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0)
    throw std::runtime_error("cannot write " + quote(path) + ": " + system_error_text());
  put_in_place(temporary, target, path);
}

void check_writable(const std::string& path) {
  const fs::path target = write_target(path);
  TemporaryFile probe(target.string() + temporary_suffix());
  const int fd = ::open(probe.path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw std::runtime_error("cannot write " + quote(path) + ": " + system_error_text());
  ::close(fd);
}

int64_t check_regular_file(const std::string& path, const std::string& action) {
  const std::string prefix = "cannot " + action + " " + quote(path) + ": ";
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw std::invalid_argument(prefix + system_error_text());
  if (!S_ISREG(info.st_mode)) throw std::invalid_argument(prefix + "not a regular file");
  return static_cast<int64_t>(info.st_size);
}

std::string read_file(const std::string& path) {
  const int64_t size = check_regular_file(path);
  if (size > kMaxReadBytes) {
    throw std::invalid_argument("cannot read " + quote(path) + ": larger than 1 GiB (" +
                                std::to_string(size) + " bytes)");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::invalid_argument("cannot read " + quote(path) + ": " + system_error_text());
  std::string text;
  std::array<char, 1 << 16> buffer;
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      ::close(fd);
      throw std::invalid_argument("cannot read " + quote(path) + ": " + system_error_text(error));
    }
    if (got == 0) break;
    text.append(buffer.data(), static_cast<size_t>(got));
    if (static_cast<int64_t>(text.size()) > kMaxReadBytes) {
      ::close(fd);
      throw std::invalid_argument("cannot read " + quote(path) + ": larger than 1 GiB");
    }
  }
  ::close(fd);
  return text;
}

StagedDirectory::StagedDirectory(std::string path, const std::vector<std::string>& own_files)
    : path_(std::move(path)) {
  std::error_code error;
  fs::path target = path_;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, error)); ++hops) {
    if (hops == 40)
      throw std::runtime_error("cannot write " + quote(path_) + ": too many symbolic links");
    const fs::path link = fs::read_symlink(target, error);
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  target_ = target.string();
  if (fs::exists(target_, error)) {
    if (!fs::is_directory(target_, error)) {
      throw std::runtime_error("cannot write " + quote(path_) +
                               ": it exists and is not a directory");
    }
    for (const auto& entry : fs::directory_iterator(target_, error)) {
      const std::string name = entry.path().filename().string();
      if (std::find(own_files.begin(), own_files.end(), name) == own_files.end()) {
        throw std::runtime_error(quote(path_) + " holds " + printable(name) +
                                 ", which this command does not write: give a new or empty "
                                 "directory, or one this command wrote before");
      }
    }
  }
  const fs::path normal = target.lexically_normal();
  remove_stale_temporaries(normal.has_filename() ? normal : normal.parent_path());
  staging_ = (normal.has_filename() ? normal : normal.parent_path()).string() + temporary_suffix();
  // An interrupt removes it and what it holds (documents, at most a folder of them).
  staging_slot_ = register_temporary(staging_, /*depth=*/4);
  remove_tree(staging_);
  // In an existing directory, as every other output: a mistyped parent is not made.
  if (!fs::create_directory(staging_, error)) {
    unregister_temporary(staging_slot_);
    throw std::runtime_error("cannot create " + quote(path_) + ": " +
                             (error ? error.message() : std::string("it exists")));
  }
}

StagedDirectory::~StagedDirectory() {
  if (!committed_) remove_tree(staging_);
  unregister_temporary(staging_slot_);
}

void StagedDirectory::commit() {
  // From here an interrupt leaves the directories where the renames got them (the next run
  // removes a leftover staging or previous directory) rather than remove the results.
  unregister_temporary(staging_slot_);
  staging_slot_ = -1;
  std::error_code error;
  const std::string previous = staging_ + ".previous";
  const bool replacing = fs::exists(target_, error);
  if (replacing) fs::rename(target_, previous, error);
  if (error) throw std::runtime_error("cannot replace " + quote(path_) + ": " + error.message());
  fs::rename(staging_, target_, error);
  if (error) {
    if (replacing) fs::rename(previous, target_);
    throw std::runtime_error("cannot write " + quote(path_) + ": " + error.message());
  }
  committed_ = true;
  if (replacing) remove_tree(previous);
}

WrittenTogether::WrittenTogether() {
  if (open_writes != nullptr) return;  // nested: the outer one's
  pending_ = std::make_unique<PendingWrites>();
  open_writes = pending_.get();
}

WrittenTogether::~WrittenTogether() {
  if (!pending_) return;
  open_writes = nullptr;
  for (const PendingWrites::File& file : pending_->files) {
    ::unlink(file.temporary.c_str());
    unregister_temporary(file.slot);
  }
}

void WrittenTogether::commit() {
  if (!pending_) return;
  open_writes = nullptr;
  std::vector<PendingWrites::File>& files = pending_->files;
  while (!files.empty()) {
    const PendingWrites::File& file = files.front();
    if (::rename(file.temporary.c_str(), file.target.c_str()) != 0) {
      throw std::runtime_error("cannot write " + quote(file.path) + ": " + system_error_text());
    }
    unregister_temporary(file.slot);
    sync_directory(file.target);
    files.erase(files.begin());
  }
}

}  // namespace pipebal
