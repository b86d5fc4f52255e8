// ImageFolder: the file list is torchvision's (find_classes + make_dataset), the per-example work
// is decode -> transform -> normalise straight into the output tensor's memory. LibTorch is used
// only to allocate the two output tensors. Unreadable images are skipped only when asked, and
// counted; the first few skips are also logged, the rest only counted, so a damaged dataset cannot
// flood the log every epoch.
#include "workloads/image_classification/image_folder.hpp"

#include <ATen/ops/empty.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/rng.hpp"
#include "workloads/image_classification/image_decode.hpp"
#include "workloads/image_classification/transforms.hpp"

namespace scaffold::imgcls {
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kAugmentStream = 0x696d67666f6c6472ULL;  // "imgfoldr": the augmentation stream
constexpr std::size_t kLoggedSkips = 10;

bool ends_with_lower(const std::string& lower, const std::string& suffix) {
  return lower.size() >= suffix.size() &&
         lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every image file under `class_dir`, relative to `root`, sorted as torchvision's
// sorted(os.walk(dir)) + sorted(fnames): by containing folder, then by name.
std::vector<std::string> list_images(const fs::path& root, const fs::path& class_dir) {
  std::vector<std::pair<std::string, std::string>> found;  // (folder, file name)
  std::error_code ec;
  fs::recursive_directory_iterator it(class_dir, fs::directory_options::follow_directory_symlink,
                                      ec);
  for (const fs::recursive_directory_iterator end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) continue;
    const std::string name = it->path().filename().string();
    if (!has_image_extension(name)) continue;
    found.emplace_back(it->path().parent_path().lexically_relative(root).generic_string(), name);
  }
  if (ec) throw core::FileError(class_dir.string(), "cannot list folder: " + ec.message());
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  files.reserve(found.size());
  for (const auto& [folder, name] : found) files.push_back(fmt::format("{}/{}", folder, name));
  return files;
}

}  // namespace

bool has_image_extension(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ends_with_lower(lower, ".jpg") || ends_with_lower(lower, ".jpeg") ||
         ends_with_lower(lower, ".png");
}

ImageFolder::ImageFolder(fs::path root, ImageFolderOptions options)
    : root_(std::move(root)), options_(options) {
  if (options_.image_size < 1 || options_.image_size > 65536)
    throw core::Error(fmt::format("image size {} is outside [1, 65536]", options_.image_size));
  std::error_code ec;
  if (!fs::is_directory(root_, ec))
    throw core::FileError(root_.string(),
                          "the image folder does not exist or is not a folder "
                          "(expected <root>/<class>/<image>.jpg|.jpeg|.png)");
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) class_names_.push_back(it->path().filename().string());
  }
  if (ec) throw core::FileError(root_.string(), "cannot list folder: " + ec.message());
  if (class_names_.empty())
    throw core::FileError(root_.string(),
                          "has no class folders (expected one subfolder per class, "
                          "<root>/<class>/<image>.jpg|.jpeg|.png, as torchvision's "
                          "ImageFolder)");
  std::sort(class_names_.begin(), class_names_.end());

  std::vector<std::string> empty;
  for (std::size_t c = 0; c < class_names_.size(); ++c) {
    const std::vector<std::string> images = list_images(root_, root_ / class_names_[c]);
    if (images.empty()) empty.push_back(class_names_[c]);
    for (const std::string& file : images) files_.push_back({file, static_cast<int64_t>(c)});
  }
  if (!empty.empty()) {
    const std::string others = empty.size() == 1
                                   ? std::string()
                                   : fmt::format(" (nor do {} more: {})", empty.size() - 1,
                                                 fmt::join(empty.begin() + 1, empty.end(), ", "));
    throw core::FileError(
        (root_ / empty[0]).string(),
        fmt::format("class folder '{}' holds no .jpg, .jpeg or .png file{}; every "
                    "class needs at least one image",
                    empty[0], others));
  }
}

dataset::Example ImageFolder::load(std::size_t index, uint64_t draw) const {
  const ImageFile& file = files_[index];
  const Image image = decode_image(root_ / file.relative_path);
  const int size = static_cast<int>(options_.image_size);
  Image out;
  if (options_.train) {
    core::Xoshiro256p rng(core::stream_key({options_.seed, kAugmentStream, draw}));
    out = train_transform(image, size, rng);
  } else {
    out = val_transform(image, size);
  }
  at::Tensor pixels = at::empty({3, size, size}, at::kFloat);  // (3, S, S)
  normalize_to_chw(out, pixels.data_ptr<float>());
  at::Tensor label = at::empty({}, at::kLong);  // ()
  *label.data_ptr<int64_t>() = file.label;
  return {{std::move(pixels), std::move(label)}, file.relative_path};
}

dataset::Example ImageFolder::get(std::size_t index, uint64_t draw) const {
  if (index >= files_.size())
    throw core::Error(fmt::format("image index {} is outside the {} images of {}", index,
                                  files_.size(), root_.string()));
  if (!options_.skip_bad) return load(index, draw);
  const std::size_t tries = std::min<std::size_t>(kMaxSkips + 1, files_.size());
  std::string first_error;
  for (std::size_t attempt = 0; attempt < tries; ++attempt) {
    const std::size_t i = (index + attempt) % files_.size();
    try {
      return load(i, draw);
    } catch (const core::FileError& e) {
      if (attempt == 0) first_error = e.what();
      if (attempt + 1 == tries) break;
      const std::size_t n = skipped_.fetch_add(1) + 1;
      if (n <= kLoggedSkips)
        LOG_WARN("skipping unreadable image (replaced by the next one){}: {}",
                 n == kLoggedSkips ? "; further skips are counted, not logged" : "", e.what());
    }
  }
  throw core::FileError(
      (root_ / files_[index].relative_path).string(),
      fmt::format("unreadable, and so are the {} images after it (skip_bad gives up after {} in a "
                  "row): {}",
                  tries - 1, tries, first_error));
}

}  // namespace scaffold::imgcls
