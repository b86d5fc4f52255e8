// File-system helpers that keep the "nothing half-written" rule: every output goes to a
// temporary name in the same directory, is fsync'ed, then renamed over the final name. A
// temporary's name carries its owner (pid and host) and the owner holds an flock on it while it
// writes, so a cleaner can tell a live writer's temporary from the leftover of a killed one.
// Also the one lock helper (FileLock) that libraries, datasets and run folders are guarded by.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace scaffold::core {

// A unique temporary name next to `path` (same directory, so rename is atomic):
// "<name>.tmp.<pid>@<host>.<n>", n counting up within the process.
std::filesystem::path temporary_sibling(const std::filesystem::path& path);

// True for names made by temporary_sibling (so scans can skip leftovers of killed runs).
bool is_temporary_name(const std::filesystem::path& path);

// The writer of a temporary, as its name records it.
struct TemporaryOwner {
  pid_t pid = 0;
  std::string host;  // as owner_host() writes it
};
// This host's name as temporaries record it (letters, digits, '-' and '.', at most 64).
std::string owner_host();
// "<pid>@<host>" for this process, and its parse (nullopt when `text` is not of that form).
std::string owner_tag();
std::optional<TemporaryOwner> parse_owner_tag(std::string_view text);
// The owner of a temporary_sibling name; nullopt for other names (and for older scaffolds'
// "<name>.tmp.<pid>.<n>", which record no host).
std::optional<TemporaryOwner> temporary_owner(const std::filesystem::path& path);

// A temporary_sibling of `final_path`, created exclusively with `mode` and flock'ed while the
// descriptor is open (the writer closes it when done). Throws FileError naming `final_path`.
struct TemporaryFile {
  int fd = -1;
  std::filesystem::path path;
};
TemporaryFile create_temporary(const std::filesystem::path& final_path, mode_t mode = 0644);

// How far a written file must have got before write_file_atomic returns. kSynced: on the disk
// (fsync before the rename). kPageCache: complete in the page cache only; for files inside a
// folder that is itself synced once when complete (sync_file_system) and only then made visible,
// or whose readers validate them (a crash of the machine may leave a renamed file short).
enum class Durability { kSynced, kPageCache };

// A piece of a file to write: `size` bytes at `data`.
struct ByteSpan {
  const void* data;
  std::size_t size;
};

// Writes the pieces, in order, as one file at `path`, atomically (no copy into one buffer);
// throws FileError naming the path and the system's reason ("No space left on device") on
// failure, having removed its temporary file.
void write_file_atomic(const std::filesystem::path& path, std::initializer_list<ByteSpan> parts,
                       Durability durability = Durability::kSynced);
void write_file_atomic(const std::filesystem::path& path, const void* data, std::size_t size);
void write_file_atomic(const std::filesystem::path& path, std::string_view text);

// Writes every file of the file system holding `path` to the disk (syncfs: one call for a
// folder of files written with Durability::kPageCache), then fsyncs `path`'s directory entry.
// Throws FileError naming `path` on failure.
void sync_file_system(const std::filesystem::path& path);

// Reads a whole file; throws FileError when it is missing or unreadable.
std::string read_file(const std::filesystem::path& path);

// Creates the directory and its parents; throws FileError naming it on failure.
void create_directories(const std::filesystem::path& dir);

// --- locks and owners -----------------------------------------------------------------------

// An exclusive flock on a lock file (created if missing), released when the object dies or the
// process does, however it ends (kill -9 included). Where the file system has no flock
// (ENOLCK, EOPNOTSUPP, ...) it warns once per lock and holds nothing: locked() is false.
class FileLock {
 public:
  // Waits for the lock; when another process holds it, logs once that it waits, with the lock's
  // path, `what` it guards and the holder's note. Throws core::Error when a stop is requested
  // (core::stop_requested) while waiting.
  static FileLock wait(const std::filesystem::path& path, std::string_view what);
  // The lock, or nullopt when another process holds it.
  static std::optional<FileLock> try_take(const std::filesystem::path& path);
  // The note the holder of `path` left (owner_tag(), or "" if none).
  static std::string holder_note(const std::filesystem::path& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  bool locked() const { return locked_; }
  const std::filesystem::path& path() const { return path_; }
  // Emptied before the lock is released, so a finished lock file is empty (and the same in
  // every run); a killed holder leaves its note, which the next holder overwrites.
  void release();

 private:
  FileLock(std::filesystem::path path, int fd, bool locked);
  std::filesystem::path path_;
  int fd_ = -1;
  bool locked_ = false;
};

// Whether a file's flock is taken by some process, as far as this host can tell.
enum class LockProbe { kFree, kHeld, kUnsupported };
LockProbe probe_lock(const std::filesystem::path& file);

// True while process `pid` exists on this host.
bool process_alive(pid_t pid);

// Whether the writer of a temporary (file or folder) is provably gone: on this host when its pid
// is dead; on any host when nobody holds the flock on `lock_file` (the temporary itself, or a
// folder's owner file) and nothing changed for a minute (the margin covers a writer between
// creating the file and locking it, and a pid reused by another process). Without flock on the
// file system, or without an owner file, only `fallback_idle` without change proves it.
bool temporary_abandoned(const std::filesystem::path& lock_file,
                         const std::optional<TemporaryOwner>& owner,
                         std::filesystem::file_time_type last_change,
                         std::chrono::seconds fallback_idle);

}  // namespace scaffold::core
