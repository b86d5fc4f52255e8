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

// The page-cache mode writes the same bytes, atomically too: only the fsync is left out.
TEST(Fs, PageCacheWriteIsCompleteAndAtomic) {
  test::TempDir dir;
  const auto path = dir.path() / "b.bin";
  const std::string head = "head:", body(100000, 'x');
  write_file_atomic(path, {ByteSpan{head.data(), head.size()}, ByteSpan{body.data(), body.size()}},
                    Durability::kPageCache);
  EXPECT_EQ(read_file(path), head + body);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_FALSE(is_temporary_name(e.path())) << e.path();
  }
  EXPECT_EQ(files, 1);
  EXPECT_NO_THROW(sync_file_system(dir.path()));
}

TEST(Fs, SyncOfAMissingFolderNamesIt) {
  test::TempDir dir;
  const auto missing = dir.path() / "gone";
  try {
    sync_file_system(missing);
    FAIL() << "syncing a missing folder succeeded";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace scaffold::core
