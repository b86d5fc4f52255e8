// Helpers shared by the image-classification data tests: images from a formula, two test
// patterns, byte-file helpers, a pixel comparison that reports the first offending elements, and
// a direct double-precision antialiased bilinear filter to check resampling against.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "workloads/image_classification/image_decode.hpp"
#include "workloads/image_classification/transforms.hpp"

namespace scaffold::imgcls::test_images {

namespace fs = std::filesystem;

using PixelFn = std::function<uint8_t(int x, int y, int c)>;

inline Image make_image(int width, int height, int channels, const PixelFn& f) {
  Image im;
  im.width = width;
  im.height = height;
  im.channels = channels;
  im.pixels.resize(static_cast<std::size_t>(width) * height * channels);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c)
        im.pixels[(static_cast<std::size_t>(y) * width + x) * channels + c] = f(x, y, c);
  return im;
}

// A jagged pattern: neighbouring pixels differ a lot, so any offset or resampling error shows.
inline uint8_t jagged(int x, int y, int c) {
  return static_cast<uint8_t>((x * 37 + y * 59 + c * 101 + x * y * 13) % 256);
}
// A smooth pattern JPEG can keep closely.
inline uint8_t smooth(int x, int y, int c) {
  return static_cast<uint8_t>(std::lround(128 + 50 * std::sin(x / 9.0 + c) * std::cos(y / 11.0)));
}

inline void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}
inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every mismatch of a against b beyond `tol`, reported with the first few positions.
inline void expect_pixels_near(const Image& a, const Image& b, int tol, const std::string& what) {
  ASSERT_EQ(a.width, b.width) << what;
  ASSERT_EQ(a.height, b.height) << what;
  ASSERT_EQ(a.channels, b.channels) << what;
  int max_err = 0, reported = 0;
  for (int y = 0; y < a.height; ++y)
    for (int x = 0; x < a.width; ++x)
      for (int c = 0; c < a.channels; ++c) {
        const int err = std::abs(a.at(y, x, c) - b.at(y, x, c));
        max_err = std::max(max_err, err);
        if (err > tol && reported++ < 5)
          ADD_FAILURE() << what << ": (x " << x << ", y " << y << ", c " << c << ") is "
                        << int(a.at(y, x, c)) << ", expected " << int(b.at(y, x, c));
      }
  EXPECT_LE(max_err, tol) << what << ": max abs error " << max_err << ", tolerance " << tol;
}

// Antialiased bilinear filtering written out directly: output pixel o of an axis is centred at
// (o + 0.5) * in/out in input coordinates, and every input pixel i weighs
// max(0, 1 - |i + 0.5 - centre| / max(in/out, 1)); weights are normalised, all in double.
inline double reference_bilinear(const Image& in, const CropBox& box, int out_w, int out_h, int ox,
                                 int oy, int c) {
  const double sx = static_cast<double>(box.width) / out_w,
               sy = static_cast<double>(box.height) / out_h;
  const double fx = std::max(sx, 1.0), fy = std::max(sy, 1.0);
  const double cx = (ox + 0.5) * sx, cy = (oy + 0.5) * sy;
  double num = 0, den = 0;
  for (int iy = 0; iy < box.height; ++iy) {
    const double wy = std::max(0.0, 1.0 - std::fabs(iy + 0.5 - cy) / fy);
    if (wy == 0) continue;
    for (int ix = 0; ix < box.width; ++ix) {
      const double wx = std::max(0.0, 1.0 - std::fabs(ix + 0.5 - cx) / fx);
      num += wx * wy * in.at(box.top + iy, box.left + ix, c);
      den += wx * wy;
    }
  }
  return num / den;
}

}  // namespace scaffold::imgcls::test_images
