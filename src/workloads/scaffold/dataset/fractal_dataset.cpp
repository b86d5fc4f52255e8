// Training-time reading of a generated dataset (docs/dataset.md): one rank opens only its own
// shard's files, each read straight into a tensor's memory after the header is checked against
// the shard box.
#include "workloads/scaffold/dataset/fractal_dataset.hpp"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/npy.hpp"
#include "core/rng.hpp"
#include "core/sha256.hpp"

namespace scaffold::dataset {
namespace fs = std::filesystem;

// .npy data is little-endian; reading it straight into tensor memory assumes the host agrees.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the .npy reader assumes a little-endian host");

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("({})", fmt::join(shape, ", "));
}

// Checks the file holds exactly `dtype` of `shape` and reads its data into `dst` (which has room
// for it). read_npy_info has already checked that the file size matches the header.
void read_npy_into(const fs::path& path, core::DType dtype, const std::vector<int64_t>& shape,
                   void* dst) {
  const core::NpyInfo info = core::read_npy_info(path);
  if (info.dtype != dtype || info.shape != shape)
    throw core::FileError(path.string(),
                          fmt::format("expected {} {}, found {} {} (is the dataset's shard layout "
                                      "or volume size different from this run's?)",
                                      core::dtype_name(dtype), shape_text(shape),
                                      core::dtype_name(info.dtype), shape_text(info.shape)));
  const std::size_t bytes = info.element_count() * core::dtype_size(dtype);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw core::FileError(path.string(), "cannot open .npy file");
  in.seekg(static_cast<std::streamoff>(info.data_offset));
  if (!in.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes)))
    throw core::FileError(path.string(), fmt::format("short read of {} data bytes", bytes));
}

// "<idx>" when `name` is "<idx>_shard<NNNNNN>.npy" for this shard with a canonical decimal idx
// (no sign, no leading zero, fits an int); empty otherwise.
std::string id_of(const std::string& name, const std::string& suffix) {
  if (name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return {};
  const std::string stem = name.substr(0, name.size() - suffix.size());
  const bool digits =
      std::all_of(stem.begin(), stem.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || stem.size() > 9 || (stem.size() > 1 && stem[0] == '0')) return {};
  return stem;
}

}  // namespace

FractalDataset::FractalDataset(DatasetPaths paths, Split split, ShardLayout layout, int shard_id,
                               int64_t volume_side)
    : paths_(std::move(paths)), split_(split), layout_(std::move(layout)), shard_id_(shard_id) {
  if (shard_id_ < 0 || shard_id_ >= layout_.count())
    throw core::Error(fmt::format("shard id {} is outside [0, {}) for dc_num_shards {}", shard_id_,
                                  layout_.count(), layout_.num_shards()));
  if (volume_side < 1) throw core::Error(fmt::format("volume side {} must be >= 1", volume_side));
  layout_.check_extent(volume_side);
  const auto box = layout_.box(shard_id_, volume_side);
  for (int a = 0; a < 3; ++a) shard_shape_[a] = box[a].size();

  const fs::path dir = paths_.volumes_dir(split_);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw core::FileError(dir.string(), fmt::format("the {} volumes directory does not exist",
                                                    split_dir_name(split_)));
  const std::string suffix = fmt::format("_shard{:06d}.npy", shard_id_);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (core::is_temporary_name(name)) continue;  // leftover of an interrupted write
    std::string id = id_of(name, suffix);
    if (!id.empty()) ids_.push_back(std::move(id));
  }
  if (ec) throw core::FileError(dir.string(), "cannot list directory: " + ec.message());
  if (ids_.empty())
    throw core::FileError(dir.string(),
                          fmt::format("holds no volume file of shard {} (<idx>{}); was the dataset "
                                      "generated with dc_num_shards {}?",
                                      shard_id_, suffix, layout_.num_shards()));
  // Sorted as strings, like the reference's sorted(os.listdir(...)): "0", "1", "10", "2", ...
  std::sort(ids_.begin(), ids_.end());
}

Sample FractalDataset::get(std::size_t index) const {
  if (index >= ids_.size())
    throw core::Error(fmt::format("sample index {} is outside the {} samples of the {} split",
                                  index, ids_.size(), split_dir_name(split_)));
  const std::string& id = ids_[index];
  const int volume = std::stoi(id);
  const fs::path volume_file = paths_.volume_file(split_, volume, shard_id_);
  const fs::path mask_file = paths_.mask_file(split_, volume, shard_id_);
  if (open_log_) {
    std::lock_guard<std::mutex> lock(log_mutex_);
    open_log_->push_back(volume_file.string());
    open_log_->push_back(mask_file.string());
  }
  const auto [d, h, w] = shard_shape_;

  Sample sample;
  sample.id = id;
  sample.image = at::empty({3, d, h, w}, at::kFloat);
  read_npy_into(volume_file, core::DType::Float32, {3, d, h, w}, sample.image.data_ptr<float>());

  // ATen 1.13 has no uint16 dtype: read the uint16 labels into the front of the int64 tensor and
  // widen them in place, back to front, so element i is read before anything overwrites it.
  sample.mask = at::empty({d, h, w}, at::kLong);
  int64_t* labels = sample.mask.data_ptr<int64_t>();
  read_npy_into(mask_file, core::DType::UInt16, {d, h, w}, labels);
  const auto* raw = reinterpret_cast<const unsigned char*>(labels);
  int64_t bad_voxel = -1;  // the first voxel (in file order) with a label outside the classes
  for (int64_t i = d * h * w; i-- > 0;) {
    uint16_t v;
    std::memcpy(&v, raw + 2 * i, sizeof v);
    labels[i] = v;
    if (v >= n_classes_) bad_voxel = i;
  }
  if (bad_voxel >= 0)
    throw core::FileError(
        mask_file.string(),
        fmt::format("voxel (z, y, x) = ({}, {}, {}) of this shard holds label {}, outside this "
                    "run's classes 0 to {} "
                    "(background and n_categories = {}); the file is damaged or belongs to another "
                    "dataset: delete "
                    "the dataset folder {} to have it generated again",
                    bad_voxel / (h * w), bad_voxel / w % h, bad_voxel % w, labels[bad_voxel],
                    n_classes_ - 1, n_classes_ - 1, paths_.root.string()));
  return sample;
}

std::string FractalDataset::origin(std::size_t index) const {
  if (index >= ids_.size()) return {};
  return paths_.volume_file(split_, std::stoi(ids_[index]), shard_id_).string();
}

data::Example FractalDataset::get(std::size_t index, uint64_t /*draw*/) const {
  Sample s = get(index);
  return {{std::move(s.image), std::move(s.mask)}, std::move(s.id)};
}

std::string FractalDataset::ids_digest() const {
  std::string joined;
  for (std::size_t i = 0; i < ids_.size(); ++i) {
    if (i > 0) joined += '\n';
    joined += ids_[i];
  }
  return core::sha256_hex(joined);
}

void check_same_ids(dist::Communicator& comm, const FractalDataset& dataset) {
  const std::string mine = fmt::format("{} {}", dataset.size(), dataset.ids_digest());
  const std::vector<std::string> all =
      comm.size() == 1 ? std::vector<std::string>{mine} : comm.allgather(mine);
  if (std::all_of(all.begin(), all.end(), [&](const std::string& s) { return s == all[0]; }))
    return;
  // Every rank gathered the same list, so every rank reaches this throw with the same message.
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // "count digest" -> ranks
  for (std::size_t r = 0; r < all.size(); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == all[r]; });
    if (it == groups.end()) it = groups.insert(groups.end(), {all[r], {}});
    it->second.push_back(static_cast<int>(r));
  }
  std::string detail;
  for (const auto& [key, ranks] : groups) {
    const std::size_t space = key.find(' ');
    detail += fmt::format("\n  {} {}: {} ids (SHA-256 {})", ranks.size() == 1 ? "rank" : "ranks",
                          fmt::join(ranks, ","), key.substr(0, space), key.substr(space + 1, 12));
  }
  throw dist::AgreedError(fmt::format(
      "ranks list different {} samples (every rank must read the same dataset directory):{}",
      split_dir_name(dataset.split()), detail));
}

std::vector<int> read_mask_values(const fs::path& json_file) {
  const std::string text = core::read_file(json_file);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw core::FileError(json_file.string(), std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("mask_values") || !j.at("mask_values").is_array())
    throw core::FileError(json_file.string(), "expected an object {\"mask_values\": [...]}");
  std::vector<int> values;
  for (const auto& v : j.at("mask_values")) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 65535)
      throw core::FileError(json_file.string(),
                            "mask_values must be integers in [0, 65535], found " + v.dump());
    values.push_back(v.get<int>());
  }
  if (values.empty() || !std::is_sorted(values.begin(), values.end()) ||
      std::adjacent_find(values.begin(), values.end()) != values.end())
    throw core::FileError(
        json_file.string(),
        fmt::format("mask_values must be non-empty, sorted and distinct, found [{}]",
                    fmt::join(values, ", ")));
  return values;
}

}  // namespace scaffold::dataset
