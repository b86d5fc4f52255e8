// Reading JPEG (libjpeg-turbo) and PNG (libpng) files into 8-bit RGB pixels, as torchvision's
// ImageFolder does through PIL's open(...).convert("RGB"): the format is chosen by the file's magic
// bytes, never its extension. No LibTorch here, and no colour management (ICC profiles, gamma and
// EXIF orientation are ignored, as PIL ignores them). The writers exist for tests and fixtures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace scaffold::imgcls {

struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;             // 3 (RGB) for every decoded image; writers take 1-4
  std::vector<uint8_t> pixels;  // (height, width, channels), row-major, no padding

  uint8_t at(int y, int x, int c) const {
    return pixels[(static_cast<std::size_t>(y) * width + x) * channels + c];
  }
};

// Larger images are refused before any pixel memory is taken: PIL's decompression-bomb limit
// (twice Image.MAX_IMAGE_PIXELS, where PIL raises rather than warns).
constexpr int64_t kMaxImagePixels = int64_t{2} * 89478485;

// Decodes a JPEG or PNG file to RGB (channels == 3):
//  - PNG: grey is replicated to R, G and B; palette images are expanded; alpha (and tRNS) is
//    dropped, not composited; 16-bit samples keep their high byte (PIL does so for 16-bit RGB;
//    for 16-bit grey it clips the value at 255 instead, whitening the image: not copied).
//  - JPEG: grey and YCbCr are converted by libjpeg (PIL uses the same conversion); CMYK/YCCK is
//    read with Adobe's inverted polarity and converted with PIL's formula. Decoder warnings are
//    errors (a truncated or damaged stream), except "extraneous bytes before marker", which PIL
//    also accepts and which leaves the image complete.
// Throws core::FileError naming the file and what is wrong: unreadable, not a JPEG or PNG
// (naming the format when recognisable), truncated, corrupt, or larger than kMaxImagePixels.
Image decode_image(const std::filesystem::path& path);
// The same on bytes already in memory; `name` is the file name used in errors.
Image decode_image_bytes(const uint8_t* data, std::size_t size, const std::string& name);

// Lossless 8-bit PNG of `image` (channels 1: grey, 2: grey+alpha, 3: RGB, 4: RGBA), written
// atomically. Throws core::FileError naming the path.
void encode_png(const Image& image, const std::filesystem::path& path);
// Baseline JPEG of a grey (channels 1), RGB (3, YCbCr 4:2:0) or CMYK (4) image. CMYK samples are
// stored as given with libjpeg's Adobe marker, so readers (decode_image, PIL) take them as
// inverted: 255 is no ink.
void encode_jpeg(const Image& image, const std::filesystem::path& path, int quality = 95);

}  // namespace scaffold::imgcls
