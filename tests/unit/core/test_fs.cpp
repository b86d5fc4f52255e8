// Atomic writes leave either the old file or the complete new one, never a partial file, and a
// failed write (a file-size limit standing in for a full disk) leaves no temporary and names the
// file and the system's reason. Temporaries name their owner, who holds their flock; a cleaner
// removes one only when the owner is provably gone. FileLock waits for and names its holder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/npy.hpp"
#include "fs_test_util.hpp"
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

std::string error_of(const std::function<void()>& step) {
  try {
    step();
  } catch (const FileError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(text, part)                                                                \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "missing '" << (part) << "' in:\n" \
                                                             << (text)

// Over RLIMIT_FSIZE the write fails with EFBIG part-way through (as ENOSPC would on a full
// disk): the error names the final file and the reason, the temporary is gone, and a file that
// was there before is left as it was.
TEST(Fs, FailedWriteNamesTheFileAndReasonAndLeavesNoTemporary) {
  test::TempDir dir;
  const auto path = dir.path() / "big.bin";
  write_file_atomic(path, std::string("old contents"));
  const std::string body(64 * 1024, 'x');
  std::string message;
  {
    test::FileSizeLimit limit(4096);
    message = error_of([&] { write_file_atomic(path, body); });
  }
  EXPECT_CONTAINS(message, path.string() + ": write failed: File too large");
  EXPECT_EQ(read_file(path), "old contents");
  EXPECT_TRUE(test::temporaries_below(dir.path()).empty());

  // The .npy writer (two pieces: header, data) and the page-cache mode alike.
  const std::vector<float> data(16 * 1024, 1.0f);
  {
    test::FileSizeLimit limit(4096);
    message = error_of([&] {
      write_npy(dir.path() / "a.npy", DType::Float32, {16, 1024}, data.data(),
                Durability::kPageCache);
    });
  }
  EXPECT_CONTAINS(message, (dir.path() / "a.npy").string() + ": write failed: File too large");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "a.npy"));
  EXPECT_TRUE(test::temporaries_below(dir.path()).empty());
}

TEST(Fs, TemporaryNamesRecordTheirOwner) {
  const auto tmp = temporary_sibling("/some/dir/file.npy");
  EXPECT_EQ(tmp.parent_path(), std::filesystem::path("/some/dir"));
  const std::string expected_prefix =
      "file.npy.tmp." + std::to_string(::getpid()) + "@" + owner_host() + ".";
  EXPECT_EQ(tmp.filename().string().rfind(expected_prefix, 0), 0u) << tmp;
  const auto owner = temporary_owner(tmp);
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->pid, ::getpid());
  EXPECT_EQ(owner->host, owner_host());
  const auto other = temporary_owner("x.csv.tmp.123@node-7.cluster.org.4");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->pid, 123);
  EXPECT_EQ(other->host, "node-7.cluster.org");
  EXPECT_FALSE(temporary_owner("x.csv.tmp.123.4"));  // an older scaffold's name: no host
  EXPECT_FALSE(temporary_owner("x.csv"));
  EXPECT_FALSE(parse_owner_tag("12x@host"));
  EXPECT_FALSE(parse_owner_tag("12@"));
  EXPECT_EQ(parse_owner_tag("42@h\n")->pid, 42);
  EXPECT_EQ(owner_tag(), std::to_string(::getpid()) + "@" + owner_host());
}

// The writer's descriptor holds the temporary's flock: another open of the file sees it held
// until the writer closes it.
TEST(Fs, ATemporaryIsLockedWhileItsWriterHasItOpen) {
  test::TempDir dir;
  const TemporaryFile tmp = create_temporary(dir.path() / "f.bin");
  EXPECT_EQ(probe_lock(tmp.path), LockProbe::kHeld);
  ::close(tmp.fd);
  EXPECT_EQ(probe_lock(tmp.path), LockProbe::kFree);
  EXPECT_EQ(probe_lock(dir.path() / "missing"), LockProbe::kUnsupported);
}

TEST(Fs, ATemporaryIsAbandonedOnlyWhenItsOwnerIsProvablyGone) {
  test::TempDir dir;
  const auto now = std::filesystem::file_time_type::clock::now();
  const auto two_minutes_ago = now - std::chrono::minutes(2);
  const auto two_days_ago = now - std::chrono::hours(48);
  const std::chrono::hours day(24);
  const auto write = [&](const std::string& name) {
    std::ofstream(dir.path() / name) << "partial";
    return dir.path() / name;
  };

  // This host, dead pid: gone at once, however fresh the file.
  const pid_t dead = test::dead_pid();
  const auto dead_file = write("a.npy.tmp." + std::to_string(dead) + "@" + owner_host() + ".0");
  EXPECT_TRUE(temporary_abandoned(dead_file, temporary_owner(dead_file), now, day));

  // This host, live owner holding the flock: kept, however old.
  const auto live_file = write("b.npy.tmp.0@" + owner_host() + ".0");
  test::LockHolder holder(live_file);
  ASSERT_TRUE(holder.held());
  const TemporaryOwner live{holder.pid(), owner_host()};
  EXPECT_FALSE(temporary_abandoned(live_file, live, two_days_ago, day));
  // Another host's writer holding the flock: kept as well.
  EXPECT_FALSE(
      temporary_abandoned(live_file, TemporaryOwner{holder.pid(), "elsewhere"}, two_days_ago, day));
  holder.stop();
  // Its lock is gone with it: abandoned once unchanged for a minute (not while fresh, which a
  // writer between creating and locking its file would be).
  EXPECT_FALSE(temporary_abandoned(live_file, TemporaryOwner{1, "elsewhere"}, now, day));
  EXPECT_TRUE(temporary_abandoned(live_file, TemporaryOwner{1, "elsewhere"}, two_minutes_ago, day));
  // A live pid on this host whose file nobody locks (the pid reused by another process).
  EXPECT_TRUE(temporary_abandoned(live_file, TemporaryOwner{::getpid(), owner_host()},
                                  two_minutes_ago, day));
  EXPECT_FALSE(temporary_abandoned(live_file, TemporaryOwner{::getpid(), owner_host()}, now, day));

  // No lock file to probe (a folder without its owner file): only the fallback idle time proves it.
  EXPECT_FALSE(temporary_abandoned(dir.path() / "none", std::nullopt, two_minutes_ago, day));
  EXPECT_TRUE(temporary_abandoned(dir.path() / "none", std::nullopt, two_days_ago, day));
}

TEST(Fs, FileLockIsExclusiveNamesItsHolderAndIsEmptyWhenReleased) {
  test::TempDir dir;
  const auto path = dir.path() / "x.lock";
  {
    std::optional<FileLock> mine = FileLock::try_take(path);
    ASSERT_TRUE(mine);
    EXPECT_TRUE(mine->locked());
    EXPECT_EQ(FileLock::holder_note(path), owner_tag());
    EXPECT_FALSE(FileLock::try_take(path)) << "a second descriptor got an exclusive lock";
    EXPECT_EQ(probe_lock(path), LockProbe::kHeld);
  }
  EXPECT_EQ(read_file(path), "") << "the note of a released lock stays behind";
  EXPECT_EQ(probe_lock(path), LockProbe::kFree);
}

// wait() returns only once the other holder is gone.
TEST(Fs, FileLockWaitsForTheHolder) {
  test::TempDir dir;
  const auto path = dir.path() / "y.lock";
  test::LockHolder holder(path);
  ASSERT_TRUE(holder.held());
  EXPECT_FALSE(FileLock::try_take(path));
  const auto start = std::chrono::steady_clock::now();
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    holder.stop();
  });
  FileLock lock = FileLock::wait(path, "test");
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  release.join();
  EXPECT_TRUE(lock.locked());
  EXPECT_GE(waited, 0.25);
}

}  // namespace
}  // namespace scaffold::core
