#include "core/fs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace scaffold::core {
namespace fs = std::filesystem;

namespace {
constexpr std::string_view kTempMarker = ".tmp.";

std::string errno_text() { return std::strerror(errno); }
}  // namespace

fs::path temporary_sibling(const fs::path& path) {
  static std::atomic<unsigned> counter{0};
  // pid + per-process counter: unique across the threads and processes of one host; each file
  // has a single writer, so ranks on other hosts never race for the same temporary name.
  const std::string name = path.filename().string() + std::string(kTempMarker) +
                           std::to_string(::getpid()) + "." + std::to_string(counter++);
  return path.parent_path() / name;
}

bool is_temporary_name(const fs::path& path) {
  return path.filename().string().find(kTempMarker) != std::string::npos;
}

void write_file_atomic(const fs::path& path, const void* data, std::size_t size) {
  write_file_atomic(path, {ByteSpan{data, size}});
}

void write_file_atomic(const fs::path& path, std::initializer_list<ByteSpan> parts, Durability durability) {
  const fs::path tmp = temporary_sibling(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw FileError(path.string(), "cannot create temporary file: " + errno_text());
  for (const ByteSpan& part : parts) {
    const char* p = static_cast<const char*>(part.data);
    std::size_t left = part.size;
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        const std::string err = errno_text();
        ::close(fd);
        ::unlink(tmp.c_str());
        throw FileError(path.string(), "write failed: " + err);
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  if ((durability == Durability::kSynced && ::fsync(fd) != 0) || ::close(fd) != 0) {
    const std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw FileError(path.string(), "fsync/close failed: " + err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw FileError(path.string(), "rename failed: " + err);
  }
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

}  // namespace scaffold::core
