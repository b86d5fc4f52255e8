// Atomic writes leave either the old file or the complete new one, never a partial file.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "test_util.hpp"

namespace scaffold::core {
namespace {

TEST(Fs, AtomicWriteReplacesAndLeavesNoTemporaries) {
  test::TempDir dir;
  const auto path = dir.path() / "a.txt";
  write_file_atomic(path, std::string("first"));
  write_file_atomic(path, std::string("second, longer"));
  EXPECT_EQ(read_file(path), "second, longer");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_FALSE(is_temporary_name(e.path())) << e.path();
  }
  EXPECT_EQ(files, 1);
  EXPECT_TRUE(is_temporary_name(temporary_sibling(path)));
  EXPECT_EQ(temporary_sibling(path).parent_path(), path.parent_path());
}

TEST(Fs, ErrorsNameThePath) {
  test::TempDir dir;
  const auto bad = dir.path() / "no-such-dir" / "x.txt";
  try {
    write_file_atomic(bad, std::string("x"));
    FAIL() << "write into a missing directory succeeded";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_file(bad), FileError);
}

}  // namespace
}  // namespace scaffold::core
