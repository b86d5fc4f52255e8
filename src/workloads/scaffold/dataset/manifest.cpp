// The dataset folder against its plan (manifest.hpp): names and exact sizes of every shard file,
// nothing extra in the split folders, the small tables the plan's, meta.yaml unedited (its digest)
// and consistent with the key and the plan.
#include "workloads/scaffold/dataset/manifest.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/npy.hpp"

namespace scaffold::dataset {
namespace fs = std::filesystem;

void check_dataset_files(const DatasetPaths& paths, const DatasetMeta& meta, const DatasetKey& key,
                         const DatasetPlan& plan, const ShardLayout& layout, int64_t side) {
  std::vector<std::string> problems;
  const int n_val = static_cast<int>(plan.volumes(true).size());
  const int n_train = plan.n_volumes() - n_val;
  if (meta.config_id != config_id(key))
    problems.push_back(fmt::format("meta.yaml: config_id {} is not {} (this key's)", meta.config_id,
                                   config_id(key)));
  if (!meta.meta_sha256_recorded.empty() && meta.meta_sha256_recorded != meta.meta_sha256_actual)
    problems.push_back(
        fmt::format("meta.yaml: edited after the dataset was written (its meta_sha256 is {}, its "
                    "other lines hash to {})",
                    meta.meta_sha256_recorded, meta.meta_sha256_actual));
  if (meta.key_json != key_json(key))
    problems.push_back(fmt::format("meta.yaml: config_subset {} is not this key's {}",
                                   meta.key_json, key_json(key)));
  // The loader cuts shards by meta.yaml's layout: it must be the key's (in any order of the dims).
  DatasetKey meta_layout = key;
  meta_layout.dc_num_shards = meta.dc_num_shards;
  meta_layout.dc_shard_dims = meta.dc_shard_dims;
  if (meta.dc_num_shards.size() != meta.dc_shard_dims.size() ||
      key_json(meta_layout) != key_json(key))
    problems.push_back(
        fmt::format("meta.yaml: dc_num_shards [{}] over dc_shard_dims [{}] is not this key's [{}] "
                    "over [{}]",
                    fmt::join(meta.dc_num_shards, ", "), fmt::join(meta.dc_shard_dims, ", "),
                    fmt::join(key.dc_num_shards, ", "), fmt::join(key.dc_shard_dims, ", ")));
  if (meta.n_volumes != plan.n_volumes() || meta.n_train != n_train || meta.n_val != n_val)
    problems.push_back(fmt::format(
        "meta.yaml: {} volumes ({} training, {} validation), but the key gives {} ({}, {})",
        meta.n_volumes, meta.n_train, meta.n_val, plan.n_volumes(), n_train, n_val));
  // The small tables are the plan's, byte for byte (a few kB: read in full).
  const std::pair<fs::path, std::string> tables[] = {
      {paths.contents_csv(), contents_csv(plan)},
      {paths.split_csv(), split_csv(plan)},
      {paths.colors_csv(), colors_csv(plan)},
      {paths.mask_values_json(Split::Training), mask_values_json(plan, false)},
      {paths.mask_values_json(Split::Validation), mask_values_json(plan, true)}};
  for (const auto& [file, text] : tables) {
    std::string found;
    try {
      found = core::read_file(file);
    } catch (const core::Error&) {
      problems.push_back(fmt::format("missing {}", fs::relative(file, paths.root).string()));
      continue;
    }
    if (found != text)
      problems.push_back(fmt::format("{} differs from the table this key's plan gives (edited?)",
                                     fs::relative(file, paths.root).string()));
  }
  for (const Split split : {Split::Training, Split::Validation}) {
    std::set<fs::path> expected;
    for (const int v : plan.volumes(split == Split::Validation)) {
      for (int s = 0; s < layout.count(); ++s) {
        const auto box = layout.box(s, side);
        const std::vector<int64_t> mask_shape{box[0].size(), box[1].size(), box[2].size()};
        const std::vector<int64_t> image_shape{3, box[0].size(), box[1].size(), box[2].size()};
        const std::pair<fs::path, uint64_t> files[] = {
            {paths.volume_file(split, v, s),
             core::npy_header(core::DType::Float32, image_shape).size() +
                 4 * static_cast<uint64_t>(3 * box[0].size() * box[1].size() * box[2].size())},
            {paths.mask_file(split, v, s),
             core::npy_header(core::DType::UInt16, mask_shape).size() +
                 2 * static_cast<uint64_t>(box[0].size() * box[1].size() * box[2].size())}};
        for (const auto& [file, bytes] : files) {
          expected.insert(file);
          std::error_code ec;
          const uint64_t size = fs::file_size(file, ec);
          if (ec)
            problems.push_back(fmt::format("missing {}", fs::relative(file, paths.root).string()));
          else if (size != bytes)
            problems.push_back(fmt::format("{} is {} bytes, expected {}",
                                           fs::relative(file, paths.root).string(), size, bytes));
        }
      }
    }
    for (const fs::path& dir : {paths.volumes_dir(split), paths.masks_dir(split)}) {
      std::error_code ec;
      for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (core::is_temporary_name(it->path().filename().string()))
          continue;  // the loader skips them too
        if (expected.count(it->path()) == 0)
          problems.push_back(
              fmt::format("extra file {} (the plan has no such volume in this split)",
                          fs::relative(it->path(), paths.root).string()));
      }
    }
  }
  if (problems.empty()) return;
  constexpr std::size_t kShown = 20;
  std::string message = fmt::format(
      "the dataset does not match its key and meta.yaml ({} problem(s)):", problems.size());
  for (std::size_t i = 0; i < problems.size() && i < kShown; ++i) message += "\n  " + problems[i];
  if (problems.size() > kShown)
    message += fmt::format("\n  ... and {} more", problems.size() - kShown);
  message +=
      "\nDelete the folder so that it is generated again (datagen_from_scratch renews the fractal "
      "library "
      "only, not the dataset).";
  throw core::FileError(paths.root.string(), message);
}

}  // namespace scaffold::dataset
