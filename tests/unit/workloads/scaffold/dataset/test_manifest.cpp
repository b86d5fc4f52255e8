// A cached dataset is checked against its key before a run trains on it (issue 16, item 6): a
// deleted volume, a stray file, a cut file, an edited table and an edited meta.yaml (its counts,
// id, layout, or any byte, by its digest) are each refused, naming the file. The dataset here is
// written file by file by the test; which file was broken is the reference.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/npy.hpp"
#include "test_util.hpp"
#include "workloads/scaffold/dataset/cache.hpp"
#include "workloads/scaffold/dataset/generate.hpp"
#include "workloads/scaffold/dataset/layout.hpp"
#include "workloads/scaffold/dataset/manifest.hpp"
#include "workloads/scaffold/dataset/plan.hpp"

namespace scaffold::dataset {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kSide = 8;

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_.n_categories = 2;
    key_.n_instances_used_per_fractal = 6;
    key_.problem_scale = 3;
    key_.dc_num_shards = {2, 1, 1};
    layout_ = ShardLayout(key_.dc_num_shards, key_.dc_shard_dims);
    plan_ = make_plan(plan_options(key_));
    for (const Split split : {Split::Training, Split::Validation}) {
      core::create_directories(paths_.volumes_dir(split));
      core::create_directories(paths_.masks_dir(split));
      for (const int v : plan_.volumes(split == Split::Validation)) {
        for (int s = 0; s < layout_.count(); ++s) {
          // dc_num_shards {2, 1, 1} over (D, H, W): each shard is 4 x 8 x 8.
          const std::vector<float> image(3 * 4 * 8 * 8, 0.5f);
          const std::vector<uint16_t> mask(4 * 8 * 8, 1);
          core::write_npy(paths_.volume_file(split, v, s), core::DType::Float32, {3, 4, 8, 8},
                          image.data());
          core::write_npy(paths_.mask_file(split, v, s), core::DType::UInt16, {4, 8, 8},
                          mask.data());
        }
      }
    }
    // The tables as generate writes them (test_plan checks their text against docs/dataset.md).
    core::write_file_atomic(paths_.contents_csv(), contents_csv(plan_));
    core::write_file_atomic(paths_.split_csv(), split_csv(plan_));
    core::write_file_atomic(paths_.colors_csv(), colors_csv(plan_));
    core::write_file_atomic(paths_.mask_values_json(Split::Training),
                            mask_values_json(plan_, false));
    core::write_file_atomic(paths_.mask_values_json(Split::Validation),
                            mask_values_json(plan_, true));
    meta_ = good_meta();
  }
  DatasetMeta good_meta() const {
    DatasetMeta meta;
    meta.config_id = config_id(key_);
    meta.key_json = key_json(key_);
    meta.dc_num_shards = key_.dc_num_shards;
    meta.dc_shard_dims = key_.dc_shard_dims;
    meta.n_volumes = plan_.n_volumes();
    meta.n_val = static_cast<int>(plan_.volumes(true).size());
    meta.n_train = meta.n_volumes - meta.n_val;
    // As read back from the meta.yaml that generate writes.
    return parse_meta(meta_yaml(meta), "meta.yaml");
  }
  std::string problem() const {
    try {
      check_dataset_files(paths_, meta_, key_, plan_, layout_, kSide);
    } catch (const core::FileError& e) {
      return e.what();
    }
    return "";
  }
  std::string first_training(const char* suffix) const {
    return std::to_string(plan_.volumes(false).front()) + suffix;
  }

  test::TempDir tmp_;
  DatasetPaths paths_{tmp_.path() / "dataset"};
  DatasetKey key_;
  ShardLayout layout_;
  DatasetPlan plan_;
  DatasetMeta meta_;
};

#define EXPECT_CONTAINS(text, part)                                                                \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "missing '" << (part) << "' in:\n" \
                                                             << (text)

TEST_F(ManifestTest, IntactDatasetPasses) {
  ASSERT_GE(plan_.volumes(false).size(), 2u);
  ASSERT_GE(plan_.volumes(true).size(), 1u);
  EXPECT_EQ(problem(), "");
}

TEST_F(ManifestTest, DeletedVolumeIsNamed) {
  fs::remove(paths_.volume_file(Split::Training, plan_.volumes(false).front(), 1));
  const std::string message = problem();
  EXPECT_CONTAINS(message, paths_.root.string() + ": the dataset does not match");
  EXPECT_CONTAINS(message, "missing volumes/training/" + first_training("_shard000001.npy"));
}

TEST_F(ManifestTest, DeletedValidationMaskIsNamed) {
  const int v = plan_.volumes(true).front();
  fs::remove(paths_.mask_file(Split::Validation, v, 0));
  EXPECT_CONTAINS(problem(),
                  "missing masks/validation/" + std::to_string(v) + "_shard000000_mask.npy");
}

TEST_F(ManifestTest, StrayFileIsNamed) {
  const std::vector<float> image(3 * 4 * 8 * 8, 0.0f);
  core::write_npy(paths_.volume_file(Split::Training, 999, 0), core::DType::Float32, {3, 4, 8, 8},
                  image.data());
  EXPECT_CONTAINS(problem(), "extra file volumes/training/999_shard000000.npy");
  // A validation volume copied into the training folder is extra there too.
  fs::remove(paths_.volume_file(Split::Training, 999, 0));
  const int v = plan_.volumes(true).front();
  fs::copy_file(paths_.volume_file(Split::Validation, v, 0),
                paths_.volume_file(Split::Training, v, 0));
  EXPECT_CONTAINS(problem(),
                  "extra file volumes/training/" + std::to_string(v) + "_shard000000.npy");
}

TEST_F(ManifestTest, CutFileIsNamedWithBothSizes) {
  const fs::path file = paths_.volume_file(Split::Training, plan_.volumes(false).front(), 0);
  const std::string bytes = core::read_file(file);
  core::write_file_atomic(file, std::string_view(bytes).substr(0, bytes.size() - 100));
  EXPECT_CONTAINS(problem(), "volumes/training/" + first_training("_shard000000.npy") + " is " +
                                 std::to_string(bytes.size() - 100) + " bytes, expected " +
                                 std::to_string(bytes.size()));
}

TEST_F(ManifestTest, EditedMetaIsNotBelieved) {
  meta_.n_train += 1;
  meta_.n_volumes += 1;
  EXPECT_CONTAINS(problem(), "meta.yaml: " + std::to_string(meta_.n_volumes) + " volumes");
  meta_ = good_meta();
  meta_.config_id = "0123456789ab";
  EXPECT_CONTAINS(problem(), "meta.yaml: config_id 0123456789ab is not " + config_id(key_));
}

// The file itself edited, as a user would: any line, even one no check reads, breaks its digest.
TEST_F(ManifestTest, EditedMetaFileIsNamedByItsDigest) {
  DatasetMeta meta = good_meta();
  meta.code_commit = "abc";
  std::string text = meta_yaml(meta);
  text.replace(text.find("\"abc\""), 5, "\"abd\"");
  meta_ = parse_meta(text, "meta.yaml");
  EXPECT_CONTAINS(problem(),
                  "meta.yaml: edited after the dataset was written (its meta_sha256 is ");
  // Without a digest line (an older scaffold's meta.yaml) the other checks still apply.
  meta_ = parse_meta(text.substr(0, text.rfind("meta_sha256")), "meta.yaml");
  EXPECT_EQ(problem(), "");
}

TEST_F(ManifestTest, MetaLayoutAndKeyMustBeTheKeys) {
  meta_ = good_meta();
  meta_.dc_num_shards = {1, 2, 1};
  EXPECT_CONTAINS(problem(),
                  "meta.yaml: dc_num_shards [1, 2, 1] over dc_shard_dims [2, 3, 4] is not this "
                  "key's [2, 1, 1]");
  // The same (dim, shards) pairs in another order are the same layout.
  meta_ = good_meta();
  meta_.dc_num_shards = {1, 1, 2};
  meta_.dc_shard_dims = {4, 3, 2};
  EXPECT_EQ(problem(), "");
  meta_ = good_meta();
  meta_.key_json = "{}";
  EXPECT_CONTAINS(problem(), "meta.yaml: config_subset {} is not this key's");
}

TEST_F(ManifestTest, EditedOrMissingTableIsNamed) {
  std::string split = core::read_file(paths_.split_csv());
  split.replace(split.find("training"), 8, "validation");
  core::write_file_atomic(paths_.split_csv(), split);
  EXPECT_CONTAINS(problem(), "volumes_split.csv differs from the table this key's plan gives");
  fs::remove(paths_.mask_values_json(Split::Validation));
  EXPECT_CONTAINS(problem(), "missing val_unique_mask_vals.json");
}

}  // namespace
}  // namespace scaffold::dataset
