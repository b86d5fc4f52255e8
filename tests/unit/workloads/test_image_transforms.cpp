// The ImageNet transforms against independently computed values: Pillow's resize output (golden
// bytes from Pillow 9.4) and a direct double-precision bilinear filter, torchvision's resize,
// centre-crop and RandomResizedCrop rules worked by hand (scripted draws, the fallback, Python's
// half-to-even rounding), the bounds and determinism of random boxes, and the flip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/rng.hpp"
#include "unit/workloads/image_test_util.hpp"
#include "workloads/image_classification/image_decode.hpp"
#include "workloads/image_classification/transforms.hpp"

namespace scaffold::imgcls {
namespace {

namespace fs = std::filesystem;
using namespace test_images;

// ---------------------------------------------------------------------------------------------
// Resampling

// Pillow 9.4's Image.resize(size, Image.BILINEAR) of make_image(7, 5, 3, jagged), computed once
// with Python and pasted here (the image is the same formula, (x*37 + y*59 + c*101 + x*y*13) %
// 256).
const std::vector<uint8_t> kPil3x4 = {50,  137, 146, 117, 165, 93,  158, 108, 145, 131, 131, 77,
                                      131, 97,  165, 113, 130, 155, 181, 96,  127, 139, 159, 138,
                                      142, 127, 152, 158, 98,  104, 166, 113, 116, 95,  101, 138};
const std::vector<uint8_t> kPil7x3 = {
    25,  126, 118, 68,  169, 160, 110, 102, 56,  153, 144, 99,  86,  187, 142, 128,
    83,  184, 171, 126, 117, 118, 162, 64,  181, 83,  127, 187, 89,  133, 108, 152,
    196, 114, 158, 117, 120, 79,  180, 183, 142, 129, 211, 56,  157, 148, 139, 94,
    122, 76,  68,  205, 160, 151, 142, 133, 88,  116, 71,  172, 53,  154, 145};
const std::vector<uint8_t> kPil4x5 = {19,  120, 209, 77,  178, 74,  145, 195, 91,  203, 60,  149,
                                      85,  174, 31,  163, 59,  109, 71,  100, 201, 77,  178, 145,
                                      151, 130, 97,  177, 94,  195, 109, 159, 127, 207, 64,  153,
                                      205, 62,  151, 130, 180, 76,  168, 136, 165, 93,  182, 149,
                                      161, 115, 107, 165, 61,  111, 145, 123, 91,  77,  69,  157};
const std::vector<uint8_t> kPil11x9 = {
    0,   101, 202, 17,  118, 219, 40,  141, 219, 64,  165, 80,  87,  188, 33,  111, 212, 57,  135,
    236, 81,  158, 189, 104, 182, 50,  128, 205, 50,  151, 222, 67,  168, 20,  121, 136, 39,  140,
    155, 65,  158, 166, 91,  130, 84,  117, 133, 63,  144, 159, 90,  116, 186, 116, 111, 165, 142,
    137, 83,  169, 163, 94,  148, 182, 113, 128, 52,  153, 27,  75,  176, 49,  106, 185, 78,  136,
    72,  90,  167, 40,  113, 198, 72,  144, 84,  103, 175, 33,  126, 206, 63,  138, 236, 94,  166,
    144, 116, 189, 62,  85,  186, 31,  111, 160, 57,  146, 120, 92,  181, 65,  127, 176, 62,  163,
    139, 98,  199, 84,  133, 162, 68,  138, 156, 103, 101, 191, 138, 125, 149, 164, 151, 110, 118,
    219, 64,  147, 131, 93,  187, 32,  133, 227, 72,  173, 174, 112, 213, 51,  152, 253, 91,  192,
    130, 131, 162, 77,  171, 40,  117, 211, 56,  157, 240, 85,  186, 151, 110, 97,  183, 90,  129,
    215, 73,  161, 169, 117, 115, 133, 162, 121, 105, 206, 165, 150, 160, 137, 156, 123, 141, 110,
    95,  185, 142, 129, 153, 174, 161, 120, 184, 29,  130, 206, 64,  152, 219, 111, 165, 123, 141,
    69,  111, 183, 57,  160, 232, 106, 191, 137, 137, 168, 96,  176, 72,  127, 225, 85,  173, 151,
    108, 209, 82,  216, 61,  162, 177, 100, 123, 130, 138, 76,  130, 84,  76,  160, 91,  106, 214,
    145, 160, 160, 144, 106, 128, 120, 97,  128, 66,  151, 81,  104, 159, 42,  143, 158, 236, 81,
    182, 160, 121, 106, 77,  155, 23,  134, 49,  80,  190, 35,  136, 247, 92,  193, 141, 149, 87,
    104, 135, 50,  161, 29,  107, 78,  63,  164, 2,   103, 204};
// img.crop((1, 1, 6, 4)).resize((4, 2), Image.BILINEAR): torchvision's resized_crop.
const std::vector<uint8_t> kPilCrop4x2 = {150, 115, 96,  174, 59,  160, 89,  123,
                                          168, 86,  115, 192, 204, 89,  150, 127,
                                          172, 113, 154, 162, 139, 117, 106, 183};

TEST(Resize, MatchesPillowByteForByte) {
  const Image src = make_image(7, 5, 3, jagged);
  struct Case {
    int w, h;
    const std::vector<uint8_t>* pil;
  };
  for (const Case& c :
       {Case{3, 4, &kPil3x4}, Case{7, 3, &kPil7x3}, Case{4, 5, &kPil4x5}, Case{11, 9, &kPil11x9}}) {
    Image pil;
    pil.width = c.w;
    pil.height = c.h;
    pil.channels = 3;
    pil.pixels = *c.pil;
    expect_pixels_near(resize_bilinear(src, c.w, c.h), pil, 0,
                       "resize to " + std::to_string(c.w) + "x" + std::to_string(c.h));
  }
  Image pil_crop;
  pil_crop.width = 4;
  pil_crop.height = 2;
  pil_crop.channels = 3;
  pil_crop.pixels = kPilCrop4x2;
  // CropBox is (top, left, height, width): PIL's box (1, 1, 6, 4) is left 1, top 1, 5 x 3.
  expect_pixels_near(resize_bilinear(src, CropBox{1, 1, 3, 5}, 4, 2), pil_crop, 0, "resized crop");
}

TEST(Resize, AgreesWithADirectBilinearFilterWithinOneLevel) {
  // Pillow rounds to 8 bits after each of its two passes, so up to one level from the direct
  // computation (half a level from each rounding).
  const Image src = make_image(53, 41, 3, jagged);
  struct Case {
    CropBox box;
    int w, h;
  };
  for (const Case& k :
       {Case{{0, 0, 41, 53}, 17, 9}, Case{{0, 0, 41, 53}, 80, 70}, Case{{3, 5, 30, 40}, 13, 31},
        Case{{0, 0, 41, 53}, 53, 20}, Case{{10, 2, 25, 25}, 24, 24}}) {
    const Image out = resize_bilinear(src, k.box, k.w, k.h);
    double max_err = 0;
    for (int y = 0; y < k.h; ++y)
      for (int x = 0; x < k.w; ++x)
        for (int c = 0; c < 3; ++c)
          max_err = std::max(max_err, std::fabs(out.at(y, x, c) -
                                                reference_bilinear(src, k.box, k.w, k.h, x, y, c)));
    EXPECT_LE(max_err, 1.0 + 1e-9) << "resize of " << k.box.width << "x" << k.box.height << " to "
                                   << k.w << "x" << k.h << ": max abs error " << max_err;
  }
}

TEST(Transforms, ShorterSideCentreCropAndNormalisationRules) {
  // torchvision: the long side is int(size * long / short), truncated.
  EXPECT_EQ(resize_shorter_side_size(320, 280, 256).width, 292);  // 292.57
  EXPECT_EQ(resize_shorter_side_size(320, 280, 256).height, 256);
  EXPECT_EQ(resize_shorter_side_size(100, 399, 256).height, 1021);  // 1021.44
  EXPECT_EQ(resize_shorter_side_size(100, 399, 256).width, 256);
  EXPECT_EQ(val_resize_size(224), 256);
  EXPECT_EQ(val_resize_size(32), 37);  // 36.57
  EXPECT_EQ(val_resize_size(112), 128);
  // Offsets round((W - S) / 2) with Python's round: 38.5 -> 38, 39.5 -> 40.
  EXPECT_EQ(center_crop_box(301, 256, 224), (CropBox{16, 38, 224, 224}));
  EXPECT_EQ(center_crop_box(303, 257, 224), (CropBox{16, 40, 224, 224}));
  // ToTensor + Normalize.
  const Image two = make_image(
      2, 1, 3, [](int x, int, int c) { return static_cast<uint8_t>(x * 255 - c * x * 100); });
  std::vector<float> chw(6);
  normalize_to_chw(two, chw.data());
  for (int c = 0; c < 3; ++c)
    for (int x = 0; x < 2; ++x) {
      const float v = static_cast<float>(x * 255 - c * x * 100) / 255.0f;
      EXPECT_NEAR(chw[static_cast<std::size_t>(c * 2 + x)],
                  (v - kImageNetMean[c]) / kImageNetStd[c], 1e-6)
          << "c " << c << " x " << x;
    }
  EXPECT_NEAR(chw[0], -0.485 / 0.229, 1e-5);       // black, red channel
  EXPECT_NEAR(chw[1], (1 - 0.485) / 0.229, 1e-5);  // white
}

// ---------------------------------------------------------------------------------------------
// RandomResizedCrop

// Hands out scripted values and records the bounds it was asked for.
struct ScriptedRng {
  std::vector<double> uniforms;
  std::vector<uint64_t> integers;
  std::vector<std::pair<double, double>> uniform_bounds;
  std::vector<uint64_t> below_bounds;
  double uniform(double lo, double hi) {
    uniform_bounds.emplace_back(lo, hi);
    return uniforms.at(uniform_bounds.size() - 1);
  }
  uint64_t below(uint64_t n) {
    below_bounds.push_back(n);
    return integers.at(below_bounds.size() - 1);
  }
};

TEST(RandomResizedCrop, FollowsTorchvisionsRuleStepByStep) {
  // 120x100. Attempt 1: area 12000 * 1.0 at ratio 4/3 gives w = round(sqrt(16000)) = 126 > 120:
  // rejected. Attempt 2: area 3000 at ratio 1 gives w = h = round(54.77) = 55; then
  // top = randint(0, 100 - 55 + 1) and left = randint(0, 120 - 55 + 1), in that order.
  ScriptedRng rng;
  rng.uniforms = {1.0, std::log(4.0 / 3.0), 0.25, 0.0};
  rng.integers = {7, 3};
  bool fell_back = true;
  EXPECT_EQ(random_resized_crop_box(120, 100, rng, {}, &fell_back), (CropBox{7, 3, 55, 55}));
  EXPECT_FALSE(fell_back);
  ASSERT_EQ(rng.uniform_bounds.size(), 4u);
  for (int a = 0; a < 2; ++a) {
    EXPECT_EQ(rng.uniform_bounds[2 * a].first, 0.08);
    EXPECT_EQ(rng.uniform_bounds[2 * a].second, 1.0);
    EXPECT_DOUBLE_EQ(rng.uniform_bounds[2 * a + 1].first, std::log(0.75));
    EXPECT_DOUBLE_EQ(rng.uniform_bounds[2 * a + 1].second, std::log(4.0 / 3.0));
  }
  EXPECT_EQ(rng.below_bounds, (std::vector<uint64_t>{46, 66}));

  // Python's round is half to even: sqrt(100 * 0.0625) = 2.5 rounds to 2, not 3.
  ScriptedRng half;
  half.uniforms = {0.0625, 0.0};
  half.integers = {0, 0};
  EXPECT_EQ(random_resized_crop_box(10, 10, half), (CropBox{0, 0, 2, 2}));
  EXPECT_EQ(half.below_bounds, (std::vector<uint64_t>{9, 9}));
}

TEST(RandomResizedCrop, FallsBackToACentreCropForExtremeAspectRatios) {
  // 1000x10: any area >= 0.08 * 10000 at ratio <= 4/3 needs h >= 24 > 10, so all 10 attempts
  // fail; the fallback keeps the height and clamps the ratio: w = round(10 * 4/3) = 13.
  for (uint64_t key = 0; key < 20; ++key) {
    core::Xoshiro256p rng(key);
    bool fell_back = false;
    EXPECT_EQ(random_resized_crop_box(1000, 10, rng, {}, &fell_back), (CropBox{0, 493, 10, 13}));
    EXPECT_TRUE(fell_back);
    core::Xoshiro256p tall_rng(key);
    EXPECT_EQ(random_resized_crop_box(10, 1000, tall_rng, {}, &fell_back),
              (CropBox{493, 0, 13, 10}));
    EXPECT_TRUE(fell_back);
  }
  // The same with scripted draws that never fit a 30x30 image whose ratio is in range: the whole
  // image is the fallback.
  ScriptedRng never;
  for (int a = 0; a < 10; ++a) {
    never.uniforms.push_back(1.0);
    never.uniforms.push_back(std::log(4.0 / 3.0));  // w = round(34.6) = 35 > 30
  }
  bool fell_back = false;
  EXPECT_EQ(random_resized_crop_box(30, 30, never, {}, &fell_back), (CropBox{0, 0, 30, 30}));
  EXPECT_TRUE(fell_back);
  EXPECT_EQ(never.uniform_bounds.size(), 20u);
}

TEST(RandomResizedCrop, BoxesKeepTheBoundsAndFollowTheirKey) {
  const int W = 500, H = 375;
  const double area = double(W) * H;
  int fallbacks = 0;
  std::set<std::tuple<int, int, int, int>> distinct;
  for (uint64_t key = 0; key < 3000; ++key) {
    core::Xoshiro256p rng(core::stream_key({7, key}));
    bool fell_back = false;
    const CropBox b = random_resized_crop_box(W, H, rng, {}, &fell_back);
    fallbacks += fell_back;
    ASSERT_TRUE(b.top >= 0 && b.left >= 0 && b.height > 0 && b.width > 0 && b.top + b.height <= H &&
                b.left + b.width <= W)
        << "box outside the image for key " << key;
    if (!fell_back) {
      // w and h are each rounded, so the bounds hold up to half a pixel per side.
      EXPECT_GE((b.width + 0.5) * (b.height + 0.5), 0.08 * area) << key;
      EXPECT_LE((b.width - 0.5) * (b.height - 0.5), 1.0 * area) << key;
      EXPECT_GE((b.width + 0.5) / (b.height - 0.5), 0.75) << key;
      EXPECT_LE((b.width - 0.5) / (b.height + 0.5), 4.0 / 3.0) << key;
    }
    distinct.insert({b.top, b.left, b.height, b.width});
    // The same key gives the same box.
    core::Xoshiro256p again(core::stream_key({7, key}));
    EXPECT_EQ(random_resized_crop_box(W, H, again), b) << key;
  }
  EXPECT_LT(fallbacks, 30) << "a 4:3 image should almost never need the fallback";
  EXPECT_GT(distinct.size(), 2900u) << "different keys should give different boxes";
}

// ---------------------------------------------------------------------------------------------
// Training transform: flip

TEST(TrainTransform, FlipsAboutHalfTheDrawsAndMirrorsExactly) {
  const Image src = make_image(90, 70, 3, jagged);
  const int size = 32;
  int flips = 0;
  const int draws = 400;
  for (int key = 0; key < draws; ++key) {
    core::Xoshiro256p rng(core::stream_key({3, static_cast<uint64_t>(key)}));
    TrainDraw d;
    const Image out = train_transform(src, size, rng, &d);
    // The same crop drawn again, resized, unflipped: the output is it, or its exact mirror.
    core::Xoshiro256p replay(core::stream_key({3, static_cast<uint64_t>(key)}));
    const CropBox box = random_resized_crop_box(src.width, src.height, replay);
    ASSERT_EQ(box, d.box);
    const Image plain = resize_bilinear(src, box, size, size);
    flips += d.flipped;
    const Image expected = make_image(size, size, 3, [&](int x, int y, int c) {
      return plain.at(y, d.flipped ? size - 1 - x : x, c);
    });
    ASSERT_EQ(out.pixels, expected.pixels) << "key " << key << (d.flipped ? " (flipped)" : "");
  }
  // Binomial(400, 0.5): sd 10, so [160, 240] is 4 sd.
  EXPECT_GT(flips, 160);
  EXPECT_LT(flips, 240);
}

}  // namespace
}  // namespace scaffold::imgcls
