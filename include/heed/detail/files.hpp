// heed/detail/files.hpp — what every reader checks before it opens a file, and how every
// writer replaces one: save_atomically writes a temporary file beside the target, fsyncs it
// and renames it over the target, so a file is never half-written, and removes the
// temporary files of earlier saves to the same target that were killed before they could
// (see remove_stale_temporaries).
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#if defined(_WIN32)
#include <io.h>
#include <process.h>
#else
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#endif

#include "heed/core/error.hpp"

namespace heed::detail {

/// "a directory", "a FIFO (named pipe)", …: what a path is, for an error message.
inline const char* file_kind(std::filesystem::file_type type) {
  switch (type) {
    case std::filesystem::file_type::directory:
      return "a directory";
    case std::filesystem::file_type::fifo:
      return "a FIFO (named pipe)";
    case std::filesystem::file_type::socket:
      return "a socket";
    case std::filesystem::file_type::character:
      return "a character device";
    case std::filesystem::file_type::block:
      return "a block device";
    default:
      return "not a regular file";
  }
}

/// Throws FileError "<op>: <path> is a FIFO (named pipe), not a regular file" unless
/// path is a regular file (after symlinks) or does not exist (the reader's open then
/// says so): a directory cannot be read, and opening a FIFO with no writer, a terminal
/// or a socket would block the reader forever.
inline void check_regular_file(const char* op, const std::string& path) {
  std::error_code error;
  const std::filesystem::file_type type = std::filesystem::status(path, error).type();
  if (error || type == std::filesystem::file_type::regular || type == std::filesystem::file_type::not_found) return;
  throw FileError(concat(op, ": ", path, " is ", file_kind(type), ", not a regular file"));
}

inline std::string errno_message(int error) {
  return error != 0 ? std::error_code(error, std::generic_category()).message() : std::string("unknown error");
}

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// ---- saving -------------------------------------------------------------------------

inline long current_pid() {
#if defined(_WIN32)
  return static_cast<long>(_getpid());
#else
  return static_cast<long>(getpid());
#endif
}

/// path + ".tmp-<pid>-<n>": unique within the process by n, across processes by pid.
inline std::string temporary_path(const std::string& path) {
  static std::atomic<unsigned long long> counter{0};
  return concat(path, ".tmp-", current_pid(), "-", counter.fetch_add(1));
}

/// The file names (without directory: n makes them unique in the process) of the
/// temporary files this process's saves hold now, and the lock that guards them.
inline std::set<std::string>& temporaries_in_progress() {
  static std::set<std::string> names;
  return names;
}
inline std::mutex& temporaries_mutex() {
  static std::mutex mutex;
  return mutex;
}

/// A save's claim on a temporary file name. While it lives, remove_stale_temporaries in
/// other threads leaves the file alone; on destruction it removes the file if created()
/// and the save did not get as far as renaming it.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path)
      : path_(std::move(path)), name_(std::filesystem::path(path_).filename().string()) {
    const std::lock_guard<std::mutex> lock(temporaries_mutex());
    temporaries_in_progress().insert(name_);
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (created_ && !committed_) std::remove(path_.c_str());
    const std::lock_guard<std::mutex> lock(temporaries_mutex());
    temporaries_in_progress().erase(name_);
  }
  const std::string& path() const { return path_; }
  /// This save made the file (until then it may be another's, which is not removed).
  void created() { created_ = true; }
  void commit() { committed_ = true; }

 private:
  std::string path_, name_;
  bool created_ = false, committed_ = false;
};

/// Whether the process `pid` may be running: only "no such process" says it is not.
inline bool process_may_be_running([[maybe_unused]] long pid) {
#if defined(_WIN32)
  return true;  // no cheap test here: other processes' files are left alone
#else
  return !(::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH);
#endif
}

/// The pid in a name `base` + ".tmp-<pid>-<n>" (decimal digits only, as temporary_path
/// writes them, and a pid a process can have), or 0 for any other name.
inline long temporary_owner(const std::string& name, const std::string& base) {
  const std::string prefix = base + ".tmp-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return 0;
  std::size_t at = prefix.size();
  long pid = 0;
  const std::size_t pid_begin = at;
  for (; at < name.size() && name[at] >= '0' && name[at] <= '9'; ++at) {
    if (pid > (std::numeric_limits<int>::max() - (name[at] - '0')) / 10) return 0;  // pids are ints
    pid = pid * 10 + (name[at] - '0');
  }
  if (at == pid_begin || at == name.size() || name[at] != '-' || pid <= 0) return 0;
  const std::size_t n_begin = ++at;
  for (; at < name.size() && name[at] >= '0' && name[at] <= '9'; ++at) {
  }
  return at == n_begin || at != name.size() ? 0 : pid;
}

/// Removes the temporary files that earlier saves to `path` left when they were killed
/// before they could remove them (SIGKILL, a power cut). Only regular files named exactly
/// `path` + ".tmp-<pid>-<n>" are candidates, and of those only files no save can still be
/// writing: this process's own that none of its threads holds (its pid can be a killed
/// predecessor's, as in a restarted container), and other processes' whose pid the system
/// says no process has. A file of a live process is kept even if that process is not a
/// save (its pid was reused): it goes once that process ends. Best effort: a file that
/// cannot be removed stays, and the save goes on.
inline void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const std::string base = target.filename().string();
  if (base.empty()) return;
  const fs::path directory = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const long own_pid = current_pid();
  std::error_code ec;
  for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const long pid = temporary_owner(name, base);
    std::error_code kind_ec;
    if (pid == 0 || it->symlink_status(kind_ec).type() != fs::file_type::regular) continue;
    const std::string stale = path + name.substr(base.size());  // the name temporary_path made
    std::error_code remove_ec;
    if (pid == own_pid) {
      const std::lock_guard<std::mutex> lock(temporaries_mutex());  // no thread claims it meanwhile
      if (temporaries_in_progress().count(name) == 0) fs::remove(stale, remove_ec);
    } else if (!process_may_be_running(pid)) {
      fs::remove(stale, remove_ec);
    }
  }
}

/// Makes the rename itself durable; a failure here loses nothing, so it is not reported.
inline void sync_directory([[maybe_unused]] const std::string& path) {
#if !defined(_WIN32)
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
#endif
}

/// What save_atomically's writer writes through: the temporary file, every write checked.
class SaveSink {
 public:
  SaveSink(std::FILE* file, const std::string& op, const std::string& path, const std::string& temporary)
      : file_(file), op_(op), path_(path), temporary_(temporary) {}
  /// Throws FileError "<op>: <path>: cannot write '<temporary>': <why>" on failure.
  void write(const void* bytes, std::size_t size) const {
    if (size != 0 && std::fwrite(bytes, 1, size, file_) != size)
      throw FileError(concat(op_, ": ", path_, ": cannot write '", temporary_, "': ", errno_message(errno)));
  }

 private:
  std::FILE* file_;
  const std::string &op_, &path_, &temporary_;
};

/// Replaces `path` with what write(const SaveSink&) writes, atomically, and leaves nothing
/// beside it if anything throws: a FileError "<op>: <path>: <what failed>" (naming the
/// temporary file where that is what failed) or whatever `write` throws. First removes
/// the stale temporary files of earlier saves to `path` (see remove_stale_temporaries).
template <typename Writer>
void save_atomically(const std::string& op, const std::string& path, Writer&& write) {
  // Write a temporary file beside the target and rename it over the target only once
  // it is complete and on disk: the target is the old file or the new one, never half.
  auto fail = [&](auto&&... what) { throw FileError(concat(op, ": ", path, ": ", what...)); };
  remove_stale_temporaries(path);
  std::unique_ptr<TemporaryFile> temporary;  // declared before `file`, so closed before removed
  std::FILE* raw = nullptr;
  int error = 0;
  for (int attempt = 0; attempt < 100 && raw == nullptr; ++attempt) {
    temporary = std::make_unique<TemporaryFile>(temporary_path(path));  // claimed before it exists
    errno = 0;
    raw = std::fopen(temporary->path().c_str(), "wbx");  // x: never reuse an existing file
    error = errno;
    if (raw == nullptr && error != EEXIST) break;
  }
  const std::string temp_path = temporary->path();
  if (raw == nullptr) fail("cannot create the temporary file '", temp_path, "': ", errno_message(error));
  temporary->created();
  FilePtr file(raw);

  std::forward<Writer>(write)(SaveSink(file.get(), op, path, temp_path));
  if (std::fflush(file.get()) != 0) fail("cannot write '", temp_path, "': ", errno_message(errno));
#if defined(_WIN32)
  if (_commit(_fileno(file.get())) != 0) fail("cannot sync '", temp_path, "' to disk: ", errno_message(errno));
#else
  if (::fsync(fileno(file.get())) != 0) fail("cannot sync '", temp_path, "' to disk: ", errno_message(errno));
#endif
  if (std::fclose(file.release()) != 0) fail("cannot close '", temp_path, "': ", errno_message(errno));

  std::error_code ec;
  std::filesystem::rename(temp_path, path, ec);
  if (ec) fail("cannot rename '", temp_path, "' over it: ", ec.message());
  temporary->commit();
  sync_directory(path);
}

}  // namespace heed::detail
