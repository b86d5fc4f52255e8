// Sizes in messages: bytes written for people, the free space of the file system that holds a
// path, and recognising an exception as a failed memory allocation (std::bad_alloc, LibTorch's
// CPU allocator, CUDA/HIP out of memory) with the bytes it asked for. Text matching on LibTorch's
// messages keeps this torch-free; a message it does not know is simply not recognised.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>

namespace scaffold::core {

// "512 B", "1.5 KiB", "14.5 GiB", "1.0 TiB" (powers of 1024, one decimal above bytes).
std::string human_bytes(double bytes);

// What an unprivileged writer may still put on the file system holding `path` (or its nearest
// existing parent, when `path` does not exist yet).
struct FileSystemSpace {
  uint64_t device = 0;      // st_dev: two paths on one file system share it
  std::string mount_probe;  // the existing path that was asked
  uint64_t free_bytes = 0;
  uint64_t free_files = 0;  // inodes; 0 with files_known false on file systems without a count
  bool files_known = true;
};
// nullopt when stat or statvfs fails.
std::optional<FileSystemSpace> file_system_space(const std::filesystem::path& path);

struct AllocationFailure {
  int64_t bytes = -1;      // what the failed allocation asked for; -1: not said
  std::string first_line;  // the message's first line (LibTorch's carry a backtrace after it)
};

// Whether `e` reports a failed memory allocation: std::bad_alloc, or a message of LibTorch's
// allocators ("DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes",
// "CUDA out of memory. Tried to allocate 2.00 GiB ...").
std::optional<AllocationFailure> allocation_failure(const std::exception& e);

}  // namespace scaffold::core
