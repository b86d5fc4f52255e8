// Shared by the fuzz targets: a per-process scratch folder for inputs that the readers take as
// files, and the rule every target checks: a reader may refuse any input with a core::Error
// (the user sees a message naming the file); anything else escaping it (std::out_of_range from
// a stoll, a crash, a sanitizer report) is a bug.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace scaffold::fuzz {

inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path d =
        std::filesystem::temp_directory_path() / ("scaffold_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline void write_bytes(const std::filesystem::path& path, const uint8_t* data, std::size_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace scaffold::fuzz
