// File-system helpers that keep the "nothing half-written" rule: every output goes to a
// temporary name in the same directory, is fsync'ed, then renamed over the final name.
#pragma once

#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>

namespace scaffold::core {

// A unique temporary name next to `path` (same directory, so rename is atomic).
std::filesystem::path temporary_sibling(const std::filesystem::path& path);

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
// throws FileError naming the path on failure.
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

// True for names made by temporary_sibling (so scans can skip leftovers of killed runs).
bool is_temporary_name(const std::filesystem::path& path);

}  // namespace scaffold::core
