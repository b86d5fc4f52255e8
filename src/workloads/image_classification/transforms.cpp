// Geometry and arithmetic of the ImageNet transforms. The resize follows Pillow's separable
// two-pass resampler (libImaging/Resample.c, 8 bits per channel): coefficients computed in double
// as Pillow does, stored as 22-bit fixed point, a horizontal pass rounded to uint8, then a vertical
// pass. Matching it byte for byte is why the arithmetic is integer and the passes are in this
// order.
#include "workloads/image_classification/transforms.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.hpp"

namespace scaffold::imgcls {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS for 8-bit images

// One axis of the resampling: for output position o, inputs [first[o], first[o] + count[o])
// weighted by weights[o * taps + t] (fixed point, 2^kPrecisionBits == 1).
struct AxisFilter {
  int taps = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;
};

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for the bilinear filter (support 1) over an
// input axis [0, in_size) mapped onto out_size outputs.
AxisFilter bilinear_axis(int in_size, int out_size) {
  const double scale = static_cast<double>(static_cast<float>(in_size)) / out_size;
  const double filter_scale = std::max(scale, 1.0);  // antialiasing: widen when shrinking
  const double support = 1.0 * filter_scale;
  AxisFilter f;
  f.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  f.first.resize(static_cast<std::size_t>(out_size));
  f.count.resize(static_cast<std::size_t>(out_size));
  f.weights.assign(static_cast<std::size_t>(out_size) * f.taps, 0);
  std::vector<double> k(static_cast<std::size_t>(f.taps));
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;
    const double inv = 1.0 / filter_scale;
    // (int) truncation of a value + 0.5, as Pillow "rounds" (the low end can be negative): kept
    // as it is, since the taps it selects decide the output bytes.
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    const int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    const int n = hi - lo;
    double total = 0.0;
    for (int t = 0; t < n; ++t) {
      k[static_cast<std::size_t>(t)] = triangle((t + lo - center + 0.5) * inv);
      total += k[static_cast<std::size_t>(t)];
    }
    for (int t = 0; t < n; ++t) {
      double w = k[static_cast<std::size_t>(t)];
      if (total != 0.0) w /= total;
      const double fixed = w * (1 << kPrecisionBits);
      f.weights[static_cast<std::size_t>(o) * f.taps + t] =
          static_cast<int32_t>(w < 0 ? fixed - 0.5 : fixed + 0.5);
    }
    f.first[static_cast<std::size_t>(o)] = lo;
    f.count[static_cast<std::size_t>(o)] = n;
  }
  return f;
}

uint8_t clip8(int32_t acc) {
  return static_cast<uint8_t>(std::clamp(acc >> kPrecisionBits, 0, 255));
}

void check_box(const Image& image, const CropBox& box) {
  SCAFFOLD_CHECK(box.width > 0 && box.height > 0 && box.left >= 0 && box.top >= 0 &&
                     box.left + box.width <= image.width && box.top + box.height <= image.height,
                 fmt::format("crop box (top {}, left {}, {}x{}) outside a {}x{} image", box.top,
                             box.left, box.width, box.height, image.width, image.height));
}

}  // namespace

Size2d resize_shorter_side_size(int width, int height, int shorter) {
  SCAFFOLD_CHECK(width > 0 && height > 0 && shorter > 0, "resize of an empty image");
  const bool wide = width > height;
  const int64_t short_side = wide ? height : width;
  const int64_t long_side = wide ? width : height;
  const int new_long = static_cast<int>(static_cast<double>(shorter * long_side) / short_side);
  return wide ? Size2d{new_long, shorter} : Size2d{shorter, new_long};
}

CropBox center_crop_box(int width, int height, int size) {
  SCAFFOLD_CHECK(width >= size && height >= size && size > 0,
                 fmt::format("centre crop of {} from a {}x{} image", size, width, height));
  const int top = static_cast<int>(std::nearbyint((height - size) / 2.0));
  const int left = static_cast<int>(std::nearbyint((width - size) / 2.0));
  return {top, left, size, size};
}

int val_resize_size(int image_size) {
  return static_cast<int>(std::nearbyint(image_size * 256.0 / 224.0));
}

Image crop(const Image& image, const CropBox& box) {
  check_box(image, box);
  Image out;
  out.width = box.width;
  out.height = box.height;
  out.channels = image.channels;
  const std::size_t row = static_cast<std::size_t>(box.width) * image.channels;
  out.pixels.resize(row * box.height);
  for (int y = 0; y < box.height; ++y) {
    const uint8_t* src =
        &image.pixels[(static_cast<std::size_t>(box.top + y) * image.width + box.left) *
                      image.channels];
    std::copy(src, src + row, &out.pixels[row * y]);
  }
  return out;
}

Image resize_bilinear(const Image& image, const CropBox& box, int out_width, int out_height) {
  check_box(image, box);
  SCAFFOLD_CHECK(out_width > 0 && out_height > 0, "resize to an empty size");
  const int channels = image.channels;
  const std::size_t in_stride = static_cast<std::size_t>(image.width) * channels;
  const uint8_t* origin =
      &image.pixels[box.top * in_stride + static_cast<std::size_t>(box.left) * channels];

  // Pillow skips a pass along an axis whose size does not change.
  Image horizontal;  // (box.height, out_width) after the first pass
  const uint8_t* rows = origin;
  std::size_t rows_stride = in_stride;
  if (out_width != box.width) {
    const AxisFilter f = bilinear_axis(box.width, out_width);
    horizontal.width = out_width;
    horizontal.height = box.height;
    horizontal.channels = channels;
    horizontal.pixels.resize(static_cast<std::size_t>(out_width) * box.height * channels);
    for (int y = 0; y < box.height; ++y) {
      const uint8_t* src = origin + in_stride * y;
      uint8_t* dst = &horizontal.pixels[static_cast<std::size_t>(y) * out_width * channels];
      for (int x = 0; x < out_width; ++x) {
        const int32_t* w = &f.weights[static_cast<std::size_t>(x) * f.taps];
        const uint8_t* s =
            src + static_cast<std::size_t>(f.first[static_cast<std::size_t>(x)]) * channels;
        const int n = f.count[static_cast<std::size_t>(x)];
        for (int c = 0; c < channels; ++c) {
          int32_t acc = 1 << (kPrecisionBits - 1);
          for (int t = 0; t < n; ++t) acc += s[t * channels + c] * w[t];
          dst[x * channels + c] = clip8(acc);
        }
      }
    }
    rows = horizontal.pixels.data();
    rows_stride = static_cast<std::size_t>(out_width) * channels;
  }

  Image out;
  out.width = out_width;
  out.height = out_height;
  out.channels = channels;
  out.pixels.resize(static_cast<std::size_t>(out_width) * out_height * channels);
  const std::size_t out_stride = static_cast<std::size_t>(out_width) * channels;
  if (out_height == box.height) {
    for (int y = 0; y < out_height; ++y)
      std::copy(rows + rows_stride * y, rows + rows_stride * y + out_stride,
                &out.pixels[out_stride * y]);
    return out;
  }
  const AxisFilter f = bilinear_axis(box.height, out_height);
  for (int y = 0; y < out_height; ++y) {
    const int32_t* w = &f.weights[static_cast<std::size_t>(y) * f.taps];
    const uint8_t* s = rows + rows_stride * f.first[static_cast<std::size_t>(y)];
    const int n = f.count[static_cast<std::size_t>(y)];
    uint8_t* dst = &out.pixels[out_stride * y];
    for (std::size_t i = 0; i < out_stride; ++i) {
      int32_t acc = 1 << (kPrecisionBits - 1);
      for (int t = 0; t < n; ++t) acc += s[rows_stride * t + i] * w[t];
      dst[i] = clip8(acc);
    }
  }
  return out;
}

Image resize_bilinear(const Image& image, int out_width, int out_height) {
  return resize_bilinear(image, CropBox{0, 0, image.height, image.width}, out_width, out_height);
}

void flip_horizontal(Image* image) {
  const auto c = static_cast<std::size_t>(image->channels);
  for (int y = 0; y < image->height; ++y) {
    uint8_t* row = &image->pixels[static_cast<std::size_t>(y) * image->width * c];
    for (std::size_t l = 0, r = static_cast<std::size_t>(image->width) - 1; l < r; ++l, --r)
      std::swap_ranges(row + l * c, row + l * c + c, row + r * c);
  }
}

void normalize_to_chw(const Image& image, float* out) {
  SCAFFOLD_CHECK(image.channels == 3, "normalize_to_chw needs an RGB image");
  const std::size_t plane = static_cast<std::size_t>(image.width) * image.height;
  for (int c = 0; c < 3; ++c) {
    const float mean = kImageNetMean[c];
    const float std = kImageNetStd[c];
    float* dst = out + plane * c;
    for (std::size_t i = 0; i < plane; ++i)
      dst[i] = (static_cast<float>(image.pixels[i * 3 + c]) / 255.0f - mean) / std;
  }
}

Image train_transform(const Image& image, int size, core::Xoshiro256p& rng, TrainDraw* draw) {
  TrainDraw d;
  d.box = random_resized_crop_box(image.width, image.height, rng, {}, &d.fell_back);
  Image out = resize_bilinear(image, d.box, size, size);
  d.flipped = rng.uniform01() < 0.5;
  if (d.flipped) flip_horizontal(&out);
  if (draw) *draw = d;
  return out;
}

Image val_transform(const Image& image, int size) {
  const Size2d resized = resize_shorter_side_size(image.width, image.height, val_resize_size(size));
  const Image scaled = resize_bilinear(image, resized.width, resized.height);
  return crop(scaled, center_crop_box(scaled.width, scaled.height, size));
}

}  // namespace scaffold::imgcls
