// SyntheticImages: one xoshiro256+ stream per example, keyed by (seed, global index); its first
// draw is the label, the rest the image's normals (Box-Muller, both values of each pair used). A
// class pattern comes from its own stream keyed by (seed, class), drawn when needed (48 numbers),
// so nothing is cached and get() is thread-safe.
#include "workloads/image_classification/synthetic_images.hpp"

#include <ATen/ops/empty.h>
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <utility>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace scaffold::imgcls {
namespace {

constexpr uint64_t kExampleStream = 0x73796e7465786d70ULL;  // "syntexmp"
constexpr uint64_t kPatternStream = 0x73796e7470617474ULL;  // "syntpatt"
constexpr int kGrid = SyntheticImages::kPatternGrid;
constexpr double kTwoPi = 6.283185307179586476925286766559;

using Pattern = std::array<float, std::size_t{3} * kGrid * kGrid>;  // (3, kGrid, kGrid)

Pattern class_pattern(uint64_t seed, int64_t c) {
  core::Xoshiro256p rng(core::stream_key({seed, kPatternStream, static_cast<uint64_t>(c)}));
  Pattern p;
  for (float& v : p) v = static_cast<float>(rng.uniform(-1.0, 1.0));
  return p;
}

core::Xoshiro256p example_stream(const SyntheticImagesOptions& o, std::size_t index) {
  return core::Xoshiro256p(
      core::stream_key({o.seed, kExampleStream, static_cast<uint64_t>(o.offset) + index}));
}

// n standard normals (Box-Muller: r = sqrt(-2 ln u1), angle 2 pi u2, with u1 in (0, 1]).
void fill_standard_normal(core::Xoshiro256p& rng, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 2) {
    const double u1 = 1.0 - rng.uniform01();
    const double angle = kTwoPi * rng.uniform01();
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(r * std::cos(angle));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(angle));
  }
}

}  // namespace

SyntheticImages::SyntheticImages(SyntheticImagesOptions options) : options_(options) {
  if (options_.count < 1)
    throw core::Error(fmt::format("synthetic image count {} must be >= 1", options_.count));
  if (options_.image_size < 1 || options_.image_size > 65536)
    throw core::Error(
        fmt::format("synthetic image size {} is outside [1, 65536]", options_.image_size));
  if (options_.num_classes < 1)
    throw core::Error(fmt::format("synthetic class count {} must be >= 1", options_.num_classes));
  if (options_.offset < 0)
    throw core::Error(fmt::format("synthetic index offset {} must be >= 0", options_.offset));
}

int64_t SyntheticImages::label(std::size_t index) const {
  if (index >= size())
    throw core::Error(
        fmt::format("synthetic image index {} is outside the {} images", index, size()));
  core::Xoshiro256p rng = example_stream(options_, index);
  return static_cast<int64_t>(rng.below(static_cast<uint64_t>(options_.num_classes)));
}

float SyntheticImages::pattern(int64_t c, int channel, int row, int column) const {
  SCAFFOLD_CHECK(c >= 0 && c < options_.num_classes && channel >= 0 && channel < 3 && row >= 0 &&
                     row < kGrid && column >= 0 && column < kGrid,
                 "synthetic pattern cell out of range");
  const int cell = (channel * kGrid + row) * kGrid + column;
  return class_pattern(options_.seed, c)[static_cast<std::size_t>(cell)];
}

data::Example SyntheticImages::get(std::size_t index, uint64_t /*draw*/) const {
  if (index >= size())
    throw core::Error(
        fmt::format("synthetic image index {} is outside the {} images", index, size()));
  const int64_t s = options_.image_size;
  core::Xoshiro256p rng = example_stream(options_, index);
  const int64_t c = static_cast<int64_t>(rng.below(static_cast<uint64_t>(options_.num_classes)));

  at::Tensor image = at::empty({3, s, s}, at::kFloat);  // (3, S, S)
  float* px = image.data_ptr<float>();
  const std::size_t plane = static_cast<std::size_t>(s * s);
  fill_standard_normal(rng, px, 3 * plane);
  if (options_.separable) {
    const Pattern p = class_pattern(options_.seed, c);
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t y = 0; y < s; ++y) {
        const float* cells = &p[static_cast<std::size_t>((ch * kGrid + y * kGrid / s) * kGrid)];
        float* row = px + static_cast<std::size_t>((ch * s + y) * s);
        for (int64_t x = 0; x < s; ++x) row[x] += cells[x * kGrid / s];
      }
  }
  at::Tensor label = at::empty({}, at::kLong);  // ()
  *label.data_ptr<int64_t>() = c;
  return {{std::move(image), std::move(label)},
          fmt::format("synthetic/{}", options_.offset + static_cast<int64_t>(index))};
}

}  // namespace scaffold::imgcls
