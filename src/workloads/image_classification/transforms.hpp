// torchvision 0.14's ImageNet preprocessing on 8-bit RGB: RandomResizedCrop's box rule, Resize
// (shorter side) + CenterCrop, horizontal flip, ToTensor + Normalize. Resampling is Pillow 9's
// antialiased bilinear resize (the filter widens when shrinking) in its 8-bit fixed point, byte for
// byte, so crops match a torchvision pipeline on PIL images. No LibTorch, and not torch's random
// numbers: boxes follow torchvision's rule on the caller's generator.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/rng.hpp"
#include "workloads/image_classification/image_decode.hpp"

namespace scaffold::imgcls {

// A crop, torchvision's (i, j, h, w): rows [top, top + height), columns [left, left + width).
struct CropBox {
  int top = 0;
  int left = 0;
  int height = 0;
  int width = 0;
  bool operator==(const CropBox& o) const {
    return top == o.top && left == o.left && height == o.height && width == o.width;
  }
  bool operator!=(const CropBox& o) const { return !(*this == o); }
};

struct RandomResizedCropOptions {
  double scale_min = 0.08;  // crop area over image area
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;  // crop width over height, drawn log-uniformly
  double ratio_max = 4.0 / 3.0;
};

// torchvision 0.14 RandomResizedCrop.get_params: up to 10 attempts of (area uniform in
// [scale_min, scale_max] * W*H, log-ratio uniform in [log ratio_min, log ratio_max]) with
// w = round(sqrt(area*ratio)), h = round(sqrt(area/ratio)) (Python's round: half to even); the
// first that fits gives top uniform in [0, H-h], left uniform in [0, W-w]. Otherwise the centre
// crop of the whole image clamped to the ratio bounds. `Rng` provides uniform(lo, hi) in [lo, hi)
// and below(n) in [0, n), as core::Xoshiro256p does; the draws are made in torchvision's order.
// Written here (not in the .cpp) because it is a template; *fell_back, when given, tells whether
// the centre-crop fallback was used.
template <class Rng>
CropBox random_resized_crop_box(int width, int height, Rng& rng,
                                const RandomResizedCropOptions& options = {},
                                bool* fell_back = nullptr) {
  const double area = static_cast<double>(width) * height;
  const double log_ratio_min = std::log(options.ratio_min);
  const double log_ratio_max = std::log(options.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(options.scale_min, options.scale_max);
    const double aspect_ratio = std::exp(rng.uniform(log_ratio_min, log_ratio_max));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target_area * aspect_ratio)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target_area / aspect_ratio)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int tops = height - h + 1, lefts = width - w + 1;  // torch.randint(0, n): [0, n)
      const int top = static_cast<int>(rng.below(static_cast<uint64_t>(tops)));
      const int left = static_cast<int>(rng.below(static_cast<uint64_t>(lefts)));
      if (fell_back) *fell_back = false;
      return {top, left, h, w};
    }
  }
  if (fell_back) *fell_back = true;
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < options.ratio_min) {
    h = static_cast<int>(std::nearbyint(w / options.ratio_min));
  } else if (in_ratio > options.ratio_max) {
    w = static_cast<int>(std::nearbyint(h * options.ratio_max));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

struct Size2d {
  int width = 0;
  int height = 0;
};

// torchvision Resize(int `shorter`): the shorter side becomes `shorter`, the longer one
// int(shorter * long / short) (truncated, as torchvision computes it).
Size2d resize_shorter_side_size(int width, int height, int shorter);
// torchvision CenterCrop(size) on an image at least size x size: offsets round((W - size) / 2)
// and round((H - size) / 2), Python's round (half to even).
CropBox center_crop_box(int width, int height, int size);
// The validation resize of the standard ImageNet recipe: round(image_size * 256 / 224), half to
// even (256 for 224).
int val_resize_size(int image_size);

// The pixels of `box` (which must lie inside the image).
Image crop(const Image& image, const CropBox& box);
// Pillow's bilinear resize (see the top of this file) of `box` of `image`, i.e. of
// crop(image, box), to out_width x out_height. Any channel count.
Image resize_bilinear(const Image& image, const CropBox& box, int out_width, int out_height);
Image resize_bilinear(const Image& image, int out_width, int out_height);
// Mirrors left to right in place.
void flip_horizontal(Image* image);

// torchvision's ImageNet statistics (float32, as Normalize holds them).
constexpr float kImageNetMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kImageNetStd[3] = {0.229f, 0.224f, 0.225f};
// ToTensor + Normalize: out[c][y][x] = (pixel / 255 - mean[c]) / std[c] in float32, CHW.
// `out` has room for 3 * height * width floats; the image must be RGB.
void normalize_to_chw(const Image& image, float* out);

// What the training transform drew, for tests and logs.
struct TrainDraw {
  CropBox box;
  bool fell_back = false;  // RandomResizedCrop's centre-crop fallback
  bool flipped = false;
};

// Training: RandomResizedCrop(size) (default scale and ratio), then RandomHorizontalFlip(p=0.5),
// drawing from `rng` in that order (the crop's draws, then one uniform < 0.5 for the flip).
Image train_transform(const Image& image, int size, core::Xoshiro256p& rng,
                      TrainDraw* draw = nullptr);
// Validation: Resize(val_resize_size(size)) then CenterCrop(size). No random numbers.
Image val_transform(const Image& image, int size);

}  // namespace scaffold::imgcls
