// FractalDataset and BatchLoader on a small hand-written dataset (docs/dataset.md): ids sorted as
// strings, exact shard shapes and values, every bad file named in its error, and a prefetcher
// that keeps order, bounds its look-ahead, rethrows worker errors and stops promptly.
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/npy.hpp"
#include "core/sha256.hpp"
#include "data/batch_loader.hpp"
#include "test_util.hpp"
#include "workloads/scaffold/dataset/fractal_dataset.hpp"
#include "workloads/scaffold/dataset/layout.hpp"

namespace scaffold::dataset {
namespace {
using data::Batch;
using data::BatchLoader;

namespace fs = std::filesystem;

constexpr int64_t kSide = 8;
constexpr int64_t kD = 4, kH = 8, kW = 8;  // a shard of layout [2, 1, 1] over dims [2, 3, 4]
const std::vector<int> kVolumes{0, 1, 2, 3, 4, 10};
const std::vector<std::string> kSortedIds{"0", "1", "10", "2", "3", "4"};

ShardLayout two_along_d() {
  return ShardLayout({2, 1, 1}, {2, 3, 4});
}

// Known contents: distinct per volume, shard and element, exact in float32.
float image_value(int volume, int shard, int64_t flat) {
  return static_cast<float>(volume * 10000 + shard * 1000 + flat);
}
// Element 0 is above int16's range, so a signed read would show up as a negative label.
uint16_t mask_value(int volume, int shard, int64_t flat) {
  return flat == 0 ? static_cast<uint16_t>(40000 + volume)
                   : static_cast<uint16_t>((volume + shard + flat) % 7);
}

void write_volume(const DatasetPaths& paths, int volume, int shard,
                  std::vector<int64_t> shape = {3, kD, kH, kW}) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> data(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) data[static_cast<std::size_t>(i)] = image_value(volume, shard, i);
  core::write_npy(paths.volume_file(Split::Training, volume, shard), core::DType::Float32, shape,
                  data.data());
}

void write_mask(const DatasetPaths& paths, int volume, int shard) {
  std::vector<uint16_t> data(static_cast<std::size_t>(kD * kH * kW));
  for (int64_t i = 0; i < kD * kH * kW; ++i)
    data[static_cast<std::size_t>(i)] = mask_value(volume, shard, i);
  core::write_npy(paths.mask_file(Split::Training, volume, shard), core::DType::UInt16,
                  {kD, kH, kW}, data.data());
}

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::create_directories(paths_.volumes_dir(Split::Training));
    core::create_directories(paths_.masks_dir(Split::Training));
    for (int v : kVolumes)
      for (int shard = 0; shard < 2; ++shard) {
        write_volume(paths_, v, shard);
        write_mask(paths_, v, shard);
      }
  }
  FractalDataset open(int shard = 0) const {
    return FractalDataset(paths_, Split::Training, two_along_d(), shard, kSide);
  }
  template <typename Fn>
  static std::string file_error_of(Fn&& fn) {
    try {
      fn();
    } catch (const core::FileError& e) {
      return e.what();
    }
    return "(no core::FileError thrown)";
  }

  test::TempDir dir_;
  DatasetPaths paths_{dir_.path()};
};

// Checks one item's shape, dtype and every value; reports the first few wrong elements.
void expect_item(const at::Tensor& image, const at::Tensor& mask, int volume, int shard) {
  ASSERT_EQ(image.sizes().vec(), (std::vector<int64_t>{3, kD, kH, kW}));
  ASSERT_EQ(image.scalar_type(), at::kFloat);
  ASSERT_TRUE(image.is_contiguous());
  ASSERT_EQ(mask.sizes().vec(), (std::vector<int64_t>{kD, kH, kW}));
  ASSERT_EQ(mask.scalar_type(), at::kLong);
  ASSERT_TRUE(mask.is_contiguous());
  const float* img = image.data_ptr<float>();
  int wrong = 0;
  for (int64_t i = 0; i < 3 * kD * kH * kW; ++i)
    if (img[i] != image_value(volume, shard, i) && ++wrong <= 3)
      ADD_FAILURE() << "volume " << volume << " shard " << shard << " image[" << i
                    << "] = " << img[i] << ", expected " << image_value(volume, shard, i);
  const int64_t* lab = mask.data_ptr<int64_t>();
  for (int64_t i = 0; i < kD * kH * kW; ++i)
    if (lab[i] != mask_value(volume, shard, i) && ++wrong <= 6)
      ADD_FAILURE() << "volume " << volume << " shard " << shard << " mask[" << i
                    << "] = " << lab[i] << ", expected " << mask_value(volume, shard, i);
  EXPECT_EQ(wrong, 0) << "wrong elements in volume " << volume << " shard " << shard;
}

TEST_F(LoaderTest, IdsAreSortedAsStringsAndOnlyThisShardsFilesCount) {
  // Leftovers and strangers that the listing must skip.
  core::write_file_atomic(paths_.volumes_dir(Split::Training) / "5_shard000000.npy.tmp.123.0",
                          "junk");
  core::write_file_atomic(paths_.volumes_dir(Split::Training) / "notes.txt", "junk");
  write_volume(paths_, 99, 1);  // shard 1 only

  EXPECT_EQ(open(0).ids(), kSortedIds);
  std::vector<std::string> shard1 = kSortedIds;
  shard1.push_back("99");
  EXPECT_EQ(open(1).ids(), shard1);
  EXPECT_EQ(open(0).size(), 6u);
  EXPECT_EQ(open(0).split(), Split::Training);
}

TEST_F(LoaderTest, ItemsAreTheShardsFloatImagesAndInt64Masks) {
  for (int shard = 0; shard < 2; ++shard) {
    const FractalDataset ds = open(shard);
    for (std::size_t i = 0; i < ds.size(); ++i) {
      const Sample s = ds.get(i);
      EXPECT_EQ(s.id, kSortedIds[i]);
      expect_item(s.image, s.mask, std::stoi(kSortedIds[i]), shard);
    }
  }
  EXPECT_THROW(open().get(6), core::Error);
}

TEST_F(LoaderTest, OpenLogNamesTheVolumeAndMaskOfThisShard) {
  const FractalDataset ds0 = open(0);
  FractalDataset ds = open(1);
  std::vector<std::string> log;
  ds.set_open_log(&log);
  ds.get(2);  // id "10"
  EXPECT_EQ(log, (std::vector<std::string>{paths_.volume_file(Split::Training, 10, 1).string(),
                                           paths_.mask_file(Split::Training, 10, 1).string()}));
  EXPECT_NE(log[0].find("10_shard000001.npy"), std::string::npos);
  ds0.get(2);  // a dataset without a log records nothing
  EXPECT_EQ(log.size(), 2u);
}

TEST_F(LoaderTest, IdsDigestIsSha256OfTheNewlineJoinedIds) {
  EXPECT_EQ(open().ids_digest(), core::sha256_hex("0\n1\n10\n2\n3\n4"));
  EXPECT_EQ(open().ids_digest().size(), 64u);
}

TEST_F(LoaderTest, MissingSplitDirectoryIsAFileErrorNamingIt) {
  const std::string what =
      file_error_of([&] { FractalDataset(paths_, Split::Validation, two_along_d(), 0, kSide); });
  EXPECT_NE(what.find(paths_.volumes_dir(Split::Validation).string()), std::string::npos) << what;
}

TEST_F(LoaderTest, DirectoryWithoutThisShardIsAFileErrorNamingIt) {
  // Four shards along D: the files of shard 3 were never written.
  const std::string what = file_error_of(
      [&] { FractalDataset(paths_, Split::Training, ShardLayout({4}, {2}), 3, kSide); });
  EXPECT_NE(what.find(paths_.volumes_dir(Split::Training).string()), std::string::npos) << what;
  EXPECT_NE(what.find("_shard000003.npy"), std::string::npos) << what;
  EXPECT_THROW(FractalDataset(paths_, Split::Training, two_along_d(), 2, kSide), core::Error);
  EXPECT_THROW(FractalDataset(paths_, Split::Training, two_along_d(), -1, kSide), core::Error);
}

TEST_F(LoaderTest, TruncatedVolumeIsAFileErrorNamingIt) {
  const fs::path file = paths_.volume_file(Split::Training, 3, 0);
  fs::resize_file(file, fs::file_size(file) - 10);
  const FractalDataset ds = open();
  const std::string what = file_error_of([&] { ds.get(4); });  // id "3"
  EXPECT_NE(what.find(file.string()), std::string::npos) << what;
  EXPECT_NO_THROW(ds.get(3));  // the others still load
}

TEST_F(LoaderTest, WronglyShapedVolumeIsAFileErrorSayingExpectedAndFound) {
  // A volume cut for a layout with two shards along W too: (3, 4, 8, 4).
  write_volume(paths_, 2, 0, {3, kD, kH, kW / 2});
  const fs::path file = paths_.volume_file(Split::Training, 2, 0);
  const std::string what = file_error_of([&] { open().get(3); });  // id "2"
  EXPECT_NE(what.find(file.string()), std::string::npos) << what;
  EXPECT_NE(what.find("expected float32 (3, 4, 8, 8)"), std::string::npos) << what;
  EXPECT_NE(what.find("found float32 (3, 4, 8, 4)"), std::string::npos) << what;
}

TEST_F(LoaderTest, MaskOfTheWrongDtypeIsAFileErrorSayingExpectedAndFound) {
  const fs::path file = paths_.mask_file(Split::Training, 1, 0);
  const std::vector<int16_t> data(static_cast<std::size_t>(kD * kH * kW), 1);
  core::write_npy(file, core::DType::Int16, {kD, kH, kW}, data.data());
  const std::string what = file_error_of([&] { open().get(1); });  // id "1"
  EXPECT_NE(what.find(file.string()), std::string::npos) << what;
  EXPECT_NE(what.find("expected uint16 (4, 8, 8)"), std::string::npos) << what;
  EXPECT_NE(what.find("found int16 (4, 8, 8)"), std::string::npos) << what;
}

TEST_F(LoaderTest, MissingMaskIsAFileErrorNamingIt) {
  const fs::path file = paths_.mask_file(Split::Training, 4, 0);
  fs::remove(file);
  const std::string what = file_error_of([&] { open().get(5); });  // id "4"
  EXPECT_NE(what.find(file.string()), std::string::npos) << what;
}

// Every batch of a loader, in order.
std::vector<Batch> drain(BatchLoader& loader) {
  std::vector<Batch> out;
  Batch b;
  while (loader.next(&b)) out.push_back(b);
  return out;
}

TEST_F(LoaderTest, BatchesKeepIndexOrderWithAndWithoutWorkers) {
  const FractalDataset ds = open(1);
  const std::vector<int64_t> indices{5, 0, 3, 1, 4, 2, 2};
  const std::vector<std::vector<std::string>> expected_ids{
      {"4", "0", "2"}, {"1", "3", "10"}, {"10"}};  // the last batch is smaller
  for (int workers : {0, 1, 2, 3}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    BatchLoader loader(ds, indices, 3, workers, /*pin_memory=*/false);
    EXPECT_EQ(loader.batches(), 3u);
    const std::vector<Batch> batches = drain(loader);
    ASSERT_EQ(batches.size(), 3u);
    for (std::size_t b = 0; b < batches.size(); ++b) {
      EXPECT_EQ(batches[b].ids, expected_ids[b]);
      const int64_t n = static_cast<int64_t>(expected_ids[b].size());
      EXPECT_EQ(batches[b].fields[0].sizes().vec(), (std::vector<int64_t>{n, 3, kD, kH, kW}));
      EXPECT_EQ(batches[b].fields[1].sizes().vec(), (std::vector<int64_t>{n, kD, kH, kW}));
      for (int64_t j = 0; j < n; ++j)
        expect_item(batches[b].fields[0].select(0, j), batches[b].fields[1].select(0, j),
                    std::stoi(expected_ids[b][static_cast<std::size_t>(j)]), 1);
    }
    Batch extra;
    EXPECT_FALSE(loader.next(&extra));  // and stays done
  }
}

TEST_F(LoaderTest, PinMemoryPinsOnlyWhenCudaIsAvailable) {
  const FractalDataset ds = open();
  BatchLoader loader(ds, {0, 1}, 2, 1, /*pin_memory=*/true);
  Batch b;
  ASSERT_TRUE(loader.next(&b));
  EXPECT_EQ(b.fields[0].is_pinned(), at::hasCUDA());
  EXPECT_EQ(b.fields[1].is_pinned(), at::hasCUDA());
  expect_item(b.fields[0].select(0, 1), b.fields[1].select(0, 1), 1, 0);
}

TEST_F(LoaderTest, AnErrorInAWorkerIsRethrownByNextInOrder) {
  const fs::path file = paths_.volume_file(Split::Training, 3, 0);  // id "3" = index 4
  fs::resize_file(file, fs::file_size(file) / 2);
  const FractalDataset ds = open();
  for (int workers : {0, 2}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    BatchLoader loader(ds, {0, 1, 2, 3, 4, 5}, 2, workers, false);
    Batch b;
    EXPECT_TRUE(loader.next(&b));
    EXPECT_TRUE(loader.next(&b));
    EXPECT_EQ(b.ids, (std::vector<std::string>{"10", "2"}));
    const std::string what = file_error_of([&] { loader.next(&b); });
    EXPECT_NE(what.find(file.string()), std::string::npos) << what;
    EXPECT_THROW(loader.next(&b), core::FileError);  // a failed epoch stays failed
  }
}

TEST_F(LoaderTest, LookAheadIsBoundedAndDestroyingMidEpochReturnsPromptly) {
  FractalDataset ds = open();
  std::vector<std::string> log;
  ds.set_open_log(&log);
  std::vector<int64_t> indices;
  for (int r = 0; r < 200; ++r)
    for (int64_t i = 0; i < 6; ++i) indices.push_back(i);
  constexpr int kWorkers = 3, kBatch = 2;
  const auto start = std::chrono::steady_clock::now();
  {
    BatchLoader loader(ds, indices, kBatch, kWorkers, false);
    Batch b;
    ASSERT_TRUE(loader.next(&b));
    // Let the workers run as far ahead as they may; then leave mid-epoch.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(elapsed_s, 5.0);
  // One batch taken plus at most 2 * workers claimed ahead, two files per sample.
  EXPECT_LE(log.size(), static_cast<std::size_t>(2 * kBatch * (1 + 2 * kWorkers)));
  EXPECT_GE(log.size(), static_cast<std::size_t>(2 * kBatch));

  // Never asked for a batch at all.
  { BatchLoader idle(ds, indices, kBatch, kWorkers, false); }
  // Workers 0: nothing runs in the background.
  log.clear();
  { BatchLoader sync(ds, indices, kBatch, 0, false); }
  EXPECT_TRUE(log.empty());
}

TEST_F(LoaderTest, BatchLoaderRejectsBadArguments) {
  const FractalDataset ds = open();
  EXPECT_THROW(BatchLoader(ds, {0}, 0, 0, false), core::Error);
  EXPECT_THROW(BatchLoader(ds, {0}, 1, -1, false), core::Error);
  EXPECT_THROW(BatchLoader(ds, {0, 6}, 1, 2, false), core::Error);
  EXPECT_THROW(BatchLoader(ds, {-1}, 1, 0, false), core::Error);
  BatchLoader empty(ds, {}, 4, 2, false);
  EXPECT_EQ(empty.batches(), 0u);
  Batch b;
  EXPECT_FALSE(empty.next(&b));
}

// A communicator whose other ranks report whatever the test tells them.
class FakeComm : public dist::Communicator {
 public:
  explicit FakeComm(int size, bool others_differ) : size_(size), others_differ_(others_differ) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  void barrier() override {}
  void broadcast(std::string&, int) override {}
  std::vector<std::string> allgather(const std::string& mine) override {
    std::vector<std::string> all(static_cast<std::size_t>(size_), mine);
    for (int r = 1; r < size_ && others_differ_; ++r) all[static_cast<std::size_t>(r)] += "x";
    return all;
  }
  void allreduce_sum(int64_t*, std::size_t) override {}
  void allreduce_sum(double*, std::size_t) override {}
  void allreduce_max(double*, std::size_t) override {}
  int local_rank() const override { return 0; }
  int local_size() const override { return size_; }
  int nodes() const override { return 1; }
  [[noreturn]] void abort(int) override { std::abort(); }
  // Not used by check_same_ids: any call is a test failure.
  std::unique_ptr<dist::Communicator> split(int, int) override { unused(); }
  void broadcast(void*, std::size_t, int) override { unused(); }
  std::unique_ptr<dist::Request> iallreduce_sum(void*, std::size_t, dist::DataType) override {
    unused();
  }
  std::unique_ptr<dist::Request> isend(const void*, std::size_t, int, int) override { unused(); }
  std::unique_ptr<dist::Request> irecv(void*, std::size_t, int, int) override { unused(); }
  bool device_buffers() const override { return false; }

 private:
  [[noreturn]] static void unused() {
    throw std::logic_error("FakeComm: unexpected buffer operation");
  }
  int size_;
  bool others_differ_;
};

TEST_F(LoaderTest, CheckSameIdsPassesWhenAllAgreeAndNamesTheRanksOtherwise) {
  const FractalDataset ds = open();
  FakeComm one(1, false), agree(3, false), differ(3, true);
  EXPECT_NO_THROW(check_same_ids(one, ds));
  EXPECT_NO_THROW(check_same_ids(agree, ds));
  try {
    check_same_ids(differ, ds);
    FAIL() << "no AgreedError";
  } catch (const dist::AgreedError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0: 6 ids"), std::string::npos) << what;
    EXPECT_NE(what.find("ranks 1,2:"), std::string::npos) << what;
  }
}

TEST_F(LoaderTest, MaskValuesAreReadFromJsonAndBadFilesAreNamed) {
  const fs::path file = paths_.mask_values_json(Split::Training);
  core::write_file_atomic(file, R"({"mask_values": [0, 2, 5]})");
  EXPECT_EQ(read_mask_values(file), (std::vector<int>{0, 2, 5}));

  for (const char* bad :
       {"{\"mask_values\": [0, 2", "{\"values\": [0]}", "[0, 1]", "{\"mask_values\": [2, 0]}",
        "{\"mask_values\": [0, \"1\"]}", "{\"mask_values\": []}"}) {
    core::write_file_atomic(file, bad);
    const std::string what = file_error_of([&] { read_mask_values(file); });
    EXPECT_NE(what.find(file.string()), std::string::npos) << bad << " -> " << what;
  }
  const fs::path missing = dir_.path() / "val_unique_mask_vals.json";
  const std::string what = file_error_of([&] { read_mask_values(missing); });
  EXPECT_NE(what.find(missing.string()), std::string::npos) << what;
}

}  // namespace
}  // namespace scaffold::dataset
