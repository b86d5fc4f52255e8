// Decoding JPEG and PNG files against pixels known in advance: PNG round trips are exact (RGB,
// grey, grey+alpha, RGBA, palette with transparency, 16-bit), JPEG within a tolerance (RGB, grey,
// CMYK with Adobe polarity), the format follows the magic bytes, and every bad file is a FileError
// naming the file and the problem.
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "test_util.hpp"
#include "unit/workloads/image_test_util.hpp"
#include "workloads/image_classification/image_decode.hpp"

namespace scaffold::imgcls {
namespace {

namespace fs = std::filesystem;
using namespace test_images;

// Writes with libpng's simplified API (an independent writer: palette and 16-bit images).
void write_png_simplified(const fs::path& path, int width, int height, png_uint_32 format,
                          const void* buffer, const void* colormap = nullptr, int entries = 0) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = format;
  image.colormap_entries = static_cast<png_uint_32>(entries);
  ASSERT_NE(png_image_write_to_file(&image, path.c_str(), 0, buffer, 0, colormap), 0)
      << image.message;
}

// ---------------------------------------------------------------------------------------------
// Decoding

TEST(ImageDecode, PngRgbRoundTripIsExact) {
  test::TempDir dir;
  const Image src = make_image(37, 23, 3, jagged);
  encode_png(src, dir.path() / "p.png");
  const Image back = decode_image(dir.path() / "p.png");
  EXPECT_EQ(back.width, 37);
  EXPECT_EQ(back.height, 23);
  EXPECT_EQ(back.channels, 3);
  expect_pixels_near(back, src, 0, "RGB PNG");
}

TEST(ImageDecode, GreyAndAlphaPngBecomeRgb) {
  test::TempDir dir;
  const Image grey = make_image(9, 7, 1, jagged);
  const Image grey_alpha = make_image(9, 7, 2, jagged);
  const Image rgba = make_image(9, 7, 4, jagged);
  encode_png(grey, dir.path() / "l.png");
  encode_png(grey_alpha, dir.path() / "la.png");
  encode_png(rgba, dir.path() / "rgba.png");
  // Grey replicated to R, G and B; alpha dropped (not composited), as PIL's convert("RGB").
  expect_pixels_near(decode_image(dir.path() / "l.png"),
                     make_image(9, 7, 3, [](int x, int y, int) { return jagged(x, y, 0); }), 0,
                     "grey PNG");
  expect_pixels_near(decode_image(dir.path() / "la.png"),
                     make_image(9, 7, 3, [](int x, int y, int) { return jagged(x, y, 0); }), 0,
                     "grey+alpha PNG");
  expect_pixels_near(decode_image(dir.path() / "rgba.png"), make_image(9, 7, 3, jagged), 0,
                     "RGBA PNG");
}

TEST(ImageDecode, PalettePngIsExpandedAndItsAlphaDropped) {
  test::TempDir dir;
  // Four RGBA palette entries (two partly transparent, so libpng writes a tRNS chunk).
  const uint8_t palette[4][4] = {
      {10, 20, 30, 255}, {200, 100, 50, 0}, {0, 255, 7, 128}, {1, 2, 3, 255}};
  const int w = 6, h = 5;
  std::vector<uint8_t> index(static_cast<std::size_t>(w * h));
  for (int i = 0; i < w * h; ++i)
    index[static_cast<std::size_t>(i)] = static_cast<uint8_t>((i * 7) % 4);
  write_png_simplified(dir.path() / "pal.png", w, h, PNG_FORMAT_RGBA_COLORMAP, index.data(),
                       palette, 4);
  const Image im = decode_image(dir.path() / "pal.png");
  expect_pixels_near(im,
                     make_image(w, h, 3,
                                [&](int x, int y, int c) {
                                  return palette[index[static_cast<std::size_t>(y * w + x)]][c];
                                }),
                     0, "palette PNG");
}

TEST(ImageDecode, SixteenBitPngKeepsTheHighByte) {
  test::TempDir dir;
  const int w = 5, h = 4;
  const auto value16 = [](int x, int y, int c) {
    return static_cast<uint16_t>(x * 12345 + y * 4321 + c * 999 + 17);
  };
  std::vector<uint16_t> rgb(static_cast<std::size_t>(w * h * 3)),
      grey(static_cast<std::size_t>(w * h));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c)
        rgb[static_cast<std::size_t>((y * w + x) * 3 + c)] = value16(x, y, c);
      grey[static_cast<std::size_t>(y * w + x)] = value16(x, y, 0);
    }
  write_png_simplified(dir.path() / "rgb16.png", w, h, PNG_FORMAT_LINEAR_RGB, rgb.data());
  write_png_simplified(dir.path() / "grey16.png", w, h, PNG_FORMAT_LINEAR_Y, grey.data());
  expect_pixels_near(
      decode_image(dir.path() / "rgb16.png"),
      make_image(w, h, 3, [&](int x, int y, int c) { return value16(x, y, c) >> 8; }), 0,
      "16-bit RGB PNG");
  expect_pixels_near(decode_image(dir.path() / "grey16.png"),
                     make_image(w, h, 3, [&](int x, int y, int) { return value16(x, y, 0) >> 8; }),
                     0, "16-bit grey PNG");
}

TEST(ImageDecode, JpegIsWithinATolerance) {
  test::TempDir dir;
  const Image rgb = make_image(64, 48, 3, smooth);
  const Image grey = make_image(40, 30, 1, smooth);
  encode_jpeg(rgb, dir.path() / "c.jpg", 95);
  encode_jpeg(grey, dir.path() / "g.jpg", 95);
  const Image back = decode_image(dir.path() / "c.jpg");
  EXPECT_EQ(back.width, 64);
  EXPECT_EQ(back.height, 48);
  expect_pixels_near(back, rgb, 6, "RGB JPEG q95");
  double sum = 0;
  for (std::size_t i = 0; i < back.pixels.size(); ++i)
    sum += std::abs(back.pixels[i] - rgb.pixels[i]);
  EXPECT_LT(sum / back.pixels.size(), 1.5) << "mean abs error of the RGB JPEG";
  expect_pixels_near(decode_image(dir.path() / "g.jpg"),
                     make_image(40, 30, 3, [](int x, int y, int) { return smooth(x, y, 0); }), 3,
                     "grey JPEG (replicated to RGB)");
}

TEST(ImageDecode, CmykJpegUsesAdobePolarityAsPil) {
  test::TempDir dir;
  // Flat blocks of stored CMYK values (Adobe polarity: 255 = no ink), which JPEG keeps closely.
  const uint8_t stored[2][4] = {{255, 128, 40, 200}, {90, 255, 255, 255}};
  const Image cmyk = make_image(32, 16, 4, [&](int x, int, int c) { return stored[x / 16][c]; });
  encode_jpeg(cmyk, dir.path() / "cmyk.jpg", 100);
  // Ink C = 255 - stored, R = (255 - K)(255 - C)/255 = stored_k * stored_c / 255.
  const Image expected = make_image(32, 16, 3, [&](int x, int, int c) {
    const uint8_t* s = stored[x / 16];
    return static_cast<uint8_t>(std::lround(s[3] * s[c] / 255.0));
  });
  expect_pixels_near(decode_image(dir.path() / "cmyk.jpg"), expected, 3, "CMYK JPEG");
}

TEST(ImageDecode, FormatComesFromTheMagicBytesNotTheExtension) {
  test::TempDir dir;
  const Image src = make_image(8, 6, 3, jagged);
  encode_png(src, dir.path() / "real.png");
  encode_jpeg(make_image(16, 16, 3, smooth), dir.path() / "real.jpg");
  fs::rename(dir.path() / "real.png", dir.path() / "png_named.jpg");
  fs::rename(dir.path() / "real.jpg", dir.path() / "jpeg_named.png");
  expect_pixels_near(decode_image(dir.path() / "png_named.jpg"), src, 0, "PNG named .jpg");
  EXPECT_EQ(decode_image(dir.path() / "jpeg_named.png").width, 16);
}

// The FileError's message for `bytes` written as `name`.
std::string decode_error(const test::TempDir& dir, const std::string& name,
                         const std::string& bytes) {
  const fs::path path = dir.path() / name;
  write_bytes(path, bytes);
  try {
    decode_image(path);
  } catch (const core::FileError& e) {
    return e.what();
  }
  ADD_FAILURE() << name << " decoded without an error";
  return {};
}

TEST(ImageDecode, BadFilesAreFileErrorsNamingTheFileAndTheProblem) {
  test::TempDir dir;
  encode_png(make_image(40, 30, 3, jagged), dir.path() / "ok.png");
  encode_jpeg(make_image(64, 64, 3, smooth), dir.path() / "ok.jpg");
  const std::string png = read_bytes(dir.path() / "ok.png");
  const std::string jpg = read_bytes(dir.path() / "ok.jpg");

  struct Case {
    std::string name, bytes, expect;
  };
  std::string png_bad_crc = png;
  png_bad_crc[19] ^= 0x01;  // the IHDR's width: its CRC no longer matches
  std::string png_bad_data = png;
  png_bad_data[png.size() / 2] ^= 0x55;  // inside the compressed IDAT data
  std::string jpg_garbage = jpg.substr(0, 3) + std::string(500, '\x17');
  const std::vector<Case> cases = {
      {"cut.png", png.substr(0, png.size() / 2), "truncated"},
      {"crc.png", png_bad_crc, "IHDR: CRC error"},
      {"data.png", png_bad_data, "is not a readable PNG image: "},
      {"cut.jpg", jpg.substr(0, jpg.size() / 2), "Premature end of JPEG file"},
      {"garbage.jpg", jpg_garbage, "not a readable JPEG"},
      {"text.jpg", "<!DOCTYPE html><html>", "not a JPEG or PNG image (it starts with bytes 3c 21"},
      {"anim.png", std::string("GIF89a\x01\x00\x01\x00", 10), "is a GIF image"},
      {"empty.png", "", "is empty"},
  };
  for (const Case& c : cases) {
    const std::string message = decode_error(dir, c.name, c.bytes);
    EXPECT_NE(message.find((dir.path() / c.name).string()), std::string::npos) << message;
    EXPECT_NE(message.find(c.expect), std::string::npos) << c.name << ": " << message;
  }
  try {
    decode_image(dir.path() / "missing.png");
    ADD_FAILURE() << "a missing file decoded";
  } catch (const core::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.png"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace scaffold::imgcls
