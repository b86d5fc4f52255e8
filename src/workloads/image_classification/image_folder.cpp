// ImageFolder: the file list is torchvision's (find_classes + make_dataset), the per-example work
// is decode -> transform -> normalise straight into the output tensor's memory. LibTorch is used
// only to allocate the two output tensors. Unreadable images are skipped only when asked, and
// counted; the first few skips are also logged, the rest only counted, so a damaged dataset cannot
// flood the log every epoch.
#include "workloads/image_classification/image_folder.hpp"

#include <ATen/ops/empty.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>
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

// A folder's identity: the (device, inode) pair of what the path leads to, links followed.
struct FolderId {
  dev_t device = 0;
  ino_t inode = 0;
  bool operator<(const FolderId& o) const {
    return device != o.device ? device < o.device : inode < o.inode;
  }
  bool operator==(const FolderId& o) const { return device == o.device && inode == o.inode; }
};

FolderId folder_id(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw core::FileError(dir.string(), std::string("cannot stat: ") + std::strerror(errno));
  return {st.st_dev, st.st_ino};
}

// The identities of `dir` (links resolved) and of every folder above it up to "/": a link to
// one of them leads back to where it is, a loop.
std::vector<FolderId> folder_and_ancestors(const fs::path& dir) {
  std::error_code ec;
  fs::path p = fs::canonical(dir, ec);
  if (ec) throw core::FileError(dir.string(), "cannot resolve the folder: " + ec.message());
  std::vector<FolderId> ids;
  while (true) {
    ids.push_back(folder_id(p));
    if (p == p.parent_path() || p.parent_path().empty()) break;
    p = p.parent_path();
  }
  return ids;
}

bool contains(const std::vector<FolderId>& ids, const FolderId& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// One class folder's walk. Real subfolders are walked first (depth first, by name); links to
// folders are set aside and followed afterwards, in the order met, each only when it leads to a
// folder not walked yet in this class. So every folder is walked at most once, whatever the links'
// shape (a loop, two folders linking to each other, many links to one folder), the scan ends,
// and a folder's images are listed once, under its own path when it has one without links.
class ClassWalk {
 public:
  ClassWalk(const fs::path& root, const fs::path& class_dir, std::vector<std::string>* skipped)
      : root_(root), skipped_(skipped) {
    visited_.insert(folder_id(class_dir));
    walk(class_dir);
    for (std::size_t i = 0; i < links_.size(); ++i) {  // links_ grows while it is walked
      const fs::path link = links_[i];
      const FolderId target = folder_id(link);
      if (contains(folder_and_ancestors(link.parent_path()), target)) {
        skip(link, "leads back to a folder that contains it (a loop)");
      } else if (!visited_.insert(target).second) {
        skip(link, "leads to a folder already listed, whose images are listed once");
      } else {
        walk(link);
      }
    }
  }

  // Every image file found, as (folder relative to the root, file name).
  std::vector<std::pair<std::string, std::string>>& found() { return found_; }

 private:
  void walk(const fs::path& dir) {
    std::vector<fs::directory_entry> entries;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      entries.push_back(*it);
    if (ec) throw core::FileError(dir.string(), "cannot list folder: " + ec.message());
    std::sort(entries.begin(), entries.end(),
              [](const fs::directory_entry& a, const fs::directory_entry& b) {
                return a.path().filename() < b.path().filename();
              });
    const std::string folder = dir.lexically_relative(root_).generic_string();
    for (const fs::directory_entry& entry : entries) {
      std::error_code type_ec;
      // A dangling link is no folder: it is listed when named like an image, and is then an
      // unreadable image like any other.
      if (!entry.is_directory(type_ec)) {
        const std::string name = entry.path().filename().string();
        if (has_image_extension(name)) found_.emplace_back(folder, name);
        continue;
      }
      if (entry.is_symlink(type_ec)) {
        links_.push_back(entry.path());
      } else if (visited_.insert(folder_id(entry.path())).second) {
        walk(entry.path());
      }
    }
  }

  void skip(const fs::path& link, const std::string& why) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(link, ec);
    const std::string text = fmt::format("{}: symbolic link{} {}; skipped", link.string(),
                                         ec ? std::string() : " to '" + target.string() + "'", why);
    if (skipped_->size() < kLoggedLinks) LOG_WARN("{}", text);
    if (skipped_->size() + 1 == kLoggedLinks)
      LOG_WARN("further skipped links are counted, not logged");
    skipped_->push_back(link.lexically_relative(root_).generic_string());
  }

  static constexpr std::size_t kLoggedLinks = 10;
  const fs::path& root_;
  std::vector<std::string>* skipped_;
  std::set<FolderId> visited_;   // every folder walked in this class
  std::vector<fs::path> links_;  // links to folders met, in order, not yet followed
  std::vector<std::pair<std::string, std::string>> found_;
};

// Every image file under `class_dir`, relative to `root`, sorted as torchvision's
// sorted(os.walk(dir)) + sorted(fnames): by containing folder, then by name. Links skipped on the
// way are appended to `skipped` (relative to the root).
std::vector<std::string> list_images(const fs::path& root, const fs::path& class_dir,
                                     std::vector<std::string>* skipped) {
  ClassWalk walk(root, class_dir, skipped);
  std::vector<std::pair<std::string, std::string>>& found = walk.found();
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

  // A class folder that is the root or a folder above it would hold every class (and itself).
  const std::vector<FolderId> above = folder_and_ancestors(root_);
  for (const std::string& name : class_names_)
    if (contains(above, folder_id(root_ / name)))
      throw core::FileError((root_ / name).string(),
                            "class folder '" + name +
                                "' leads back to the image folder or a folder above it (a "
                                "symbolic link loop); remove the link or point it elsewhere");

  std::vector<std::string> empty;
  for (std::size_t c = 0; c < class_names_.size(); ++c) {
    const std::vector<std::string> images =
        list_images(root_, root_ / class_names_[c], &skipped_links_);
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

data::Example ImageFolder::load(std::size_t index, uint64_t draw) const {
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

data::Example ImageFolder::get(std::size_t index, uint64_t draw) const {
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
