// The dataset folder against its plan (manifest.hpp): names and exact sizes of every shard file,
// nothing extra in the split folders, meta.yaml consistent with the key and the plan.
#include "dataset/manifest.hpp"

#include <fmt/format.h>

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
  if (meta.n_volumes != plan.n_volumes() || meta.n_train != n_train || meta.n_val != n_val)
    problems.push_back(fmt::format(
        "meta.yaml: {} volumes ({} training, {} validation), but the key gives {} ({}, {})",
        meta.n_volumes, meta.n_train, meta.n_val, plan.n_volumes(), n_train, n_val));
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
  message += "\nDelete the folder (or set datagen_from_scratch) so that it is generated again.";
  throw core::FileError(paths.root.string(), message);
}

}  // namespace scaffold::dataset
