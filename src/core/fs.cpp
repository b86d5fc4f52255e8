#include "core/fs.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/stop.hpp"

namespace scaffold::core {
namespace fs = std::filesystem;

namespace {
constexpr std::string_view kTempMarker = ".tmp.";
// A writer holds its temporary's flock from creation to close; between creating and locking,
// and between closing and renaming, it is unlocked for microseconds. A free lock on a file
// unchanged for this long is a dead writer's.
constexpr std::chrono::seconds kOwnerGrace{60};

std::string errno_text() {
  return std::strerror(errno);
}
std::string errno_text(int error) {
  return std::strerror(error);
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// flock's answer for "this file system cannot lock" (as opposed to "someone holds it").
bool lock_unsupported(int error) {
  return error != EWOULDBLOCK && error != EINTR;
}

// Opens `path` for locking: read-write where allowed (NFS turns flock into a POSIX lock, whose
// exclusive form needs a writable descriptor), else read-only.
int open_for_lock(const fs::path& path, bool create) {
  const int flags = O_CLOEXEC | (create ? O_CREAT : 0);
  int fd = ::open(path.c_str(), O_RDWR | flags, 0644);
  if (fd < 0 && !create && errno == EACCES) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  return fd;
}
}  // namespace

std::string owner_host() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  std::string host;
  for (const char* p = buf; *p && host.size() < 64; ++p) {
    const char c = *p;
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '.';
    host += plain ? c : '-';
  }
  return host.empty() ? "unknown" : host;
}

std::string owner_tag() {
  return std::to_string(::getpid()) + "@" + owner_host();
}

std::optional<TemporaryOwner> parse_owner_tag(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const auto at = text.find('@');
  if (at == std::string_view::npos || at + 1 == text.size()) return std::nullopt;
  const std::string_view pid = text.substr(0, at);
  if (!all_digits(pid) || pid.size() > 9) return std::nullopt;
  TemporaryOwner owner;
  owner.pid = static_cast<pid_t>(std::stol(std::string(pid)));
  owner.host = std::string(text.substr(at + 1));
  return owner;
}

fs::path temporary_sibling(const fs::path& path) {
  static std::atomic<unsigned> counter{0};
  static const std::string tag = owner_host();
  // pid + host + per-process counter: unique across the threads and processes of all hosts, and
  // the owner a cleaner checks before it removes the file.
  const std::string name = path.filename().string() + std::string(kTempMarker) +
                           std::to_string(::getpid()) + "@" + tag + "." + std::to_string(counter++);
  return path.parent_path() / name;
}

bool is_temporary_name(const fs::path& path) {
  return path.filename().string().find(kTempMarker) != std::string::npos;
}

std::optional<TemporaryOwner> temporary_owner(const fs::path& path) {
  const std::string name = path.filename().string();
  const auto marker = name.rfind(kTempMarker);
  if (marker == std::string::npos) return std::nullopt;
  std::string_view rest =
      std::string_view(name).substr(marker + kTempMarker.size());  // <pid>@<host>.<n>
  const auto dot = rest.rfind('.');
  if (dot == std::string_view::npos || !all_digits(rest.substr(dot + 1))) return std::nullopt;
  return parse_owner_tag(rest.substr(0, dot));
}

TemporaryFile create_temporary(const fs::path& final_path, mode_t mode) {
  TemporaryFile tmp;
  tmp.path = temporary_sibling(final_path);
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (tmp.fd < 0)
    throw FileError(final_path.string(), "cannot create temporary file: " + errno_text());
  // Held until the writer closes the descriptor: the sign of a live owner (temporary_abandoned).
  // A file system without flock still gets the file; its cleaners go by the owner's pid and age.
  while (::flock(tmp.fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  return tmp;
}

void write_file_atomic(const fs::path& path, const void* data, std::size_t size) {
  write_file_atomic(path, {ByteSpan{data, size}});
}

void write_file_atomic(const fs::path& path, std::initializer_list<ByteSpan> parts,
                       Durability durability) {
  const TemporaryFile tmp = create_temporary(path);
  // Every failure below removes the temporary before it throws.
  const auto fail = [&](const std::string& what, int error, bool close_fd) {
    if (close_fd) ::close(tmp.fd);
    ::unlink(tmp.path.c_str());
    throw FileError(path.string(), what + ": " + errno_text(error));
  };
  for (const ByteSpan& part : parts) {
    const char* p = static_cast<const char*>(part.data);
    std::size_t left = part.size;
    while (left > 0) {
      const ssize_t n = ::write(tmp.fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("write failed", n < 0 ? errno : EIO, true);
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  if (durability == Durability::kSynced && ::fsync(tmp.fd) != 0) fail("fsync failed", errno, true);
  // kPageCache: start the file's writeback now, without waiting for it, so that the one
  // sync_file_system at the end of a folder finds most pages already on the disk instead of
  // writing them all then. A hint only (an error, or a file system without it, changes nothing):
  // the durability still comes from that sync.
  if (durability == Durability::kPageCache) ::sync_file_range(tmp.fd, 0, 0, SYNC_FILE_RANGE_WRITE);
  if (::close(tmp.fd) != 0) fail("close failed", errno, false);
  if (::rename(tmp.path.c_str(), path.c_str()) != 0) fail("rename failed", errno, false);
}

void sync_file_system(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FileError(path.string(), "cannot open to sync: " + errno_text());
  // syncfs writes the whole file system's dirty pages, fsync then the folder's own entries.
  if (::syncfs(fd) != 0 || ::fsync(fd) != 0) {
    const std::string err = errno_text();
    ::close(fd);
    throw FileError(path.string(), "sync failed: " + err);
  }
  ::close(fd);
}

void write_file_atomic(const fs::path& path, std::string_view text) {
  write_file_atomic(path, text.data(), text.size());
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path.string(), "cannot open for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw FileError(path.string(), "read failed");
  return buffer.str();
}

void create_directories(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw FileError(dir.string(), "cannot create directory: " + ec.message());
}

// --- locks and owners -----------------------------------------------------------------------

FileLock::FileLock(fs::path path, int fd, bool locked)
    : path_(std::move(path)), fd_(fd), locked_(locked) {
  if (!locked_) return;
  // The note only names the holder for messages; the lock holds without it.
  const std::string note = owner_tag() + "\n";
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, note.data(), note.size(), 0) != static_cast<ssize_t>(note.size())) {
  }
}

FileLock FileLock::wait(const fs::path& path, std::string_view what) {
  const int fd = open_for_lock(path, true);
  if (fd < 0) throw FileError(path.string(), "cannot open the lock file: " + errno_text());
  bool logged = false;
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      if (logged) LOG_INFO("{}: lock {} taken, going on", what, path.string());
      return FileLock(path, fd, true);
    }
    const int error = errno;
    if (lock_unsupported(error)) {
      LOG_WARN("{}: no file locking on {} ({}); not guarded against a concurrent process", what,
               path.string(), errno_text(error));
      return FileLock(path, fd, false);
    }
    if (!logged) {
      const std::string holder = holder_note(path);
      LOG_INFO("{}: another process{} holds the lock {}; waiting for it to finish", what,
               holder.empty() ? std::string() : " (" + holder + ")", path.string());
      logged = true;
    }
    if (stop_requested()) {
      ::close(fd);
      throw Error(std::string(what) + ": stopped while waiting for the lock " + path.string());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::optional<FileLock> FileLock::try_take(const fs::path& path) {
  const int fd = open_for_lock(path, true);
  if (fd < 0) throw FileError(path.string(), "cannot open the lock file: " + errno_text());
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return FileLock(path, fd, true);
  const int error = errno;
  if (lock_unsupported(error)) {
    LOG_WARN("no file locking on {} ({}); not guarded against a concurrent process", path.string(),
             errno_text(error));
    return FileLock(path, fd, false);
  }
  ::close(fd);
  return std::nullopt;
}

std::string FileLock::holder_note(const fs::path& path) {
  std::string note;
  try {
    note = read_file(path);
  } catch (const Error&) {
  }
  while (!note.empty() && (note.back() == '\n' || note.back() == ' ')) note.pop_back();
  return note.size() > 200 ? note.substr(0, 200) : note;
}

FileLock::FileLock(FileLock&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      locked_(std::exchange(other.locked_, false)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    locked_ = std::exchange(other.locked_, false);
  }
  return *this;
}

FileLock::~FileLock() {
  release();
}

void FileLock::release() {
  if (fd_ < 0) return;
  if (locked_ && ::ftruncate(fd_, 0) != 0) {
  }
  ::close(fd_);
  fd_ = -1;
  locked_ = false;
}

LockProbe probe_lock(const fs::path& file) {
  const int fd = open_for_lock(file, false);
  if (fd < 0) return LockProbe::kUnsupported;  // gone or unreadable: nothing to tell by
  LockProbe probe = LockProbe::kFree;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0)
    probe = lock_unsupported(errno) ? LockProbe::kUnsupported : LockProbe::kHeld;
  ::close(fd);  // releases the probe's own lock at once
  return probe;
}

bool process_alive(pid_t pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

bool temporary_abandoned(const fs::path& lock_file, const std::optional<TemporaryOwner>& owner,
                         fs::file_time_type last_change, std::chrono::seconds fallback_idle) {
  if (owner && owner->host == owner_host() && !process_alive(owner->pid)) return true;
  const auto idle = fs::file_time_type::clock::now() - last_change;
  switch (probe_lock(lock_file)) {
    case LockProbe::kHeld:
      return false;
    case LockProbe::kFree:
      return idle > kOwnerGrace;
    case LockProbe::kUnsupported:
      return idle > fallback_idle;
  }
  return false;
}

}  // namespace scaffold::core
