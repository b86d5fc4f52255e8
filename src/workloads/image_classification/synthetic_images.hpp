// Synthetic image-classification data in the role of torchvision's FakeData, which CARAML's
// image-classification workload reads (10 000 images 3x224x224, 1000 classes, split 9 000 train /
// 1 000 val): example i is a label uniform in [0, classes) and a standard-normal image, both drawn
// from a stream keyed by (seed, offset + i) alone, so any thread, rank or worker count sees the
// same data. Not torch's random numbers: FakeData's exact values are not reproduced.
#pragma once

#include <cstdint>

#include "data/example_source.hpp"

namespace scaffold::imgcls {

struct SyntheticImagesOptions {
  int64_t count = 10000;  // examples in this source
  int64_t image_size = 224;
  int64_t num_classes = 1000;
  uint64_t seed = 42;
  int64_t offset = 0;  // global index of example 0: train {offset 0, 9000} and val {9000, 1000}
                       // are disjoint parts of one sequence
  // Adds a class signal a small network can learn: class c's fixed pattern, a (3, 4, 4) grid of
  // values uniform in [-1, 1] (each cell a block of about S/4 x S/4 pixels), is added to the unit
  // noise. The pattern depends on (seed, c) only, so train and val share it.
  bool separable = false;
};

class SyntheticImages : public data::ExampleSource {
 public:
  // Throws core::Error when count, image_size or num_classes is < 1 or offset < 0.
  explicit SyntheticImages(SyntheticImagesOptions options = {});

  std::size_t size() const override { return static_cast<std::size_t>(options_.count); }
  // Fields: image (3, S, S) float32; label () int64. id: "synthetic/<offset + index>".
  // `draw` is ignored: the data has no augmentation.
  data::Example get(std::size_t index, uint64_t draw) const override;

  // The label of example `index` without drawing its image.
  int64_t label(std::size_t index) const;
  // Class c's pattern value at grid cell (channel, row, column), each in [0, kPatternGrid).
  float pattern(int64_t c, int channel, int row, int column) const;
  const SyntheticImagesOptions& options() const { return options_; }

  static constexpr int kPatternGrid = 4;

 private:
  SyntheticImagesOptions options_;
};

}  // namespace scaffold::imgcls
