// An image-classification dataset in torchvision ImageFolder's layout (root/<class>/<...>/<file>),
// read as an ExampleSource: each example is the decoded, augmented (training) or resized and
// centre-cropped (validation) image, normalised with ImageNet statistics, and its class index.
// The file list is built once; images are decoded on every get(), nothing is cached.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/example_source.hpp"

namespace scaffold::imgcls {

struct ImageFolderOptions {
  int64_t image_size = 224;  // side S of the square output
  bool train = true;         // true: RandomResizedCrop + flip; false: Resize + CenterCrop
  bool skip_bad = false;     // replace an unreadable image by the next readable one, and count it
  uint64_t seed = 42;        // mixed into every augmentation stream together with get()'s draw
};

struct ImageFile {
  std::string relative_path;  // to the root, '/'-separated: "<class>/<...>/<file>"
  int64_t label = 0;          // index of the class in class_names()
};

class ImageFolder : public data::ExampleSource {
 public:
  // Lists the classes (the root's subfolders, followed through symlinks, sorted by name; label =
  // index) and, in each, every file whose name ends in .jpg, .jpeg or .png in any letter case,
  // searched recursively and sorted as torchvision does (by folder path, then file name).
  // Symbolic links to folders are followed, but every folder is walked at most once per class: a
  // link that leads back to a folder containing it (a loop), or to a folder already listed, is
  // skipped with a warning naming it (skipped_links()), so the scan always ends.
  // Throws core::FileError naming the folder when the root is missing, has no class folder, a
  // class folder leads back to the root or above it, or a class folder holds no image file;
  // core::Error when image_size < 1.
  ImageFolder(std::filesystem::path root, ImageFolderOptions options = {});

  std::size_t size() const override { return files_.size(); }
  // Fields: image (3, S, S) float32, normalised; label () int64. id: the file's relative path.
  // Training draws its crop and flip from (seed, draw); validation ignores `draw`.
  // An unreadable image throws core::FileError naming it; with skip_bad, up to kMaxSkips
  // consecutive unreadable images are replaced by the next one (index + 1, wrapping around),
  // each counted in skipped().
  data::Example get(std::size_t index, uint64_t draw) const override;

  std::size_t num_classes() const { return class_names_.size(); }
  const std::vector<std::string>& class_names() const { return class_names_; }
  const std::vector<ImageFile>& files() const { return files_; }
  const std::filesystem::path& root() const { return root_; }
  const ImageFolderOptions& options() const { return options_; }
  // Unreadable images replaced so far (each time one was met, so a bad file read in each of
  // three epochs counts three times), for the run summary.
  std::size_t skipped() const { return skipped_.load(); }
  // The links to folders the scan skipped (loops, folders already listed), relative to the root,
  // in the order met.
  const std::vector<std::string>& skipped_links() const { return skipped_links_; }

  static constexpr int kMaxSkips = 10;

 private:
  data::Example load(std::size_t index, uint64_t draw) const;

  std::filesystem::path root_;
  ImageFolderOptions options_;
  std::vector<std::string> class_names_;
  std::vector<ImageFile> files_;
  std::vector<std::string> skipped_links_;
  mutable std::atomic<std::size_t> skipped_{0};
};

// True when `name` ends in .jpg, .jpeg or .png, in any letter case (torchvision's test).
bool has_image_extension(const std::string& name);

}  // namespace scaffold::imgcls
