// The data sources: ImageFolder's listing (classes and files sorted as torchvision's), its
// validation crop checked exactly and against a direct bilinear filter, augmentation following the
// draw, layout and corrupt-file errors naming the folder or file, skip_bad's counting; and
// SyntheticImages' determinism across objects and threads, disjoint splits and learnable classes.
#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "test_util.hpp"
#include "unit/workloads/image_test_util.hpp"
#include "workloads/image_classification/image_decode.hpp"
#include "workloads/image_classification/image_folder.hpp"
#include "workloads/image_classification/synthetic_images.hpp"
#include "workloads/image_classification/transforms.hpp"

namespace scaffold::imgcls {
namespace {

namespace fs = std::filesystem;
using namespace test_images;

// ---------------------------------------------------------------------------------------------
// ImageFolder

float normalised(uint8_t v, int c) {
  return (static_cast<float>(v) / 255.0f - kImageNetMean[c]) / kImageNetStd[c];
}

float tensor_at(const at::Tensor& t, int c, int y, int x) {
  return t.data_ptr<float>()[(static_cast<int64_t>(c) * t.size(1) + y) * t.size(2) + x];
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const core::FileError& e) {
    return e.what();
  }
  return "(no FileError)";
}

TEST(ImageFolder, ListsClassesAndFilesAsTorchvision) {
  test::TempDir dir;
  const fs::path root = dir.path() / "train";
  for (const char* d : {"b/sub", "a"}) fs::create_directories(root / d);
  write_bytes(root / "c.png", "a file beside the class folders is not a class");
  write_bytes(root / "readme.txt", "files beside the class folders are ignored");
  const Image im = make_image(12, 10, 3, jagged);
  for (const char* f : {"a/img2.png", "a/img10.PNG", "a/img1.png", "b/r.png", "b/sub/x.png"})
    encode_png(im, root / f);
  encode_jpeg(make_image(12, 10, 3, smooth), root / "b/q.JPEG");
  write_bytes(root / "b/notes.txt", "not an image");

  const ImageFolder folder(root, {/*image_size=*/8, /*train=*/false});
  EXPECT_EQ(folder.class_names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(folder.num_classes(), 2u);
  ASSERT_EQ(folder.size(), 6u);
  // Sorted as strings ('.' < '0'), files of a folder before its subfolders' files.
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"a/img1.png", 0}, {"a/img10.PNG", 0}, {"a/img2.png", 0},
      {"b/q.JPEG", 1},   {"b/r.png", 1},     {"b/sub/x.png", 1}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(folder.files()[i].relative_path, expected[i].first) << i;
    EXPECT_EQ(folder.files()[i].label, expected[i].second) << i;
    const data::Example ex = folder.get(i, 0);
    EXPECT_EQ(ex.id, expected[i].first);
    ASSERT_EQ(ex.fields.size(), 2u);
    EXPECT_EQ(ex.fields[1].dim(), 0);
    EXPECT_EQ(ex.fields[1].scalar_type(), at::kLong);
    EXPECT_EQ(ex.fields[1].item<int64_t>(), expected[i].second);
    EXPECT_EQ(ex.fields[0].sizes(), (std::vector<int64_t>{3, 8, 8}));
    EXPECT_EQ(ex.fields[0].scalar_type(), at::kFloat);
  }
  EXPECT_TRUE(has_image_extension("x.JpEg"));
  EXPECT_FALSE(has_image_extension("x.jpg.txt"));
  EXPECT_FALSE(has_image_extension("jpg"));
}

TEST(ImageFolder, ValidationCropWithoutResamplingIsExact) {
  // 300x256 with S = 224: the shorter side is already 256, so no resampling; the centre crop is
  // at top round(32 / 2) = 16, left round(76 / 2) = 38.
  test::TempDir dir;
  fs::create_directories(dir.path() / "a");
  encode_png(make_image(300, 256, 3, jagged), dir.path() / "a/wide.png");
  const ImageFolder folder(dir.path(), {224, /*train=*/false});
  const data::Example ex = folder.get(0, 12345);
  const at::Tensor& t = ex.fields[0];
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{3, 224, 224}));
  float max_err = 0;
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 224; ++y)
      for (int x = 0; x < 224; ++x)
        max_err = std::max(
            max_err, std::fabs(tensor_at(t, c, y, x) - normalised(jagged(x + 38, y + 16, c), c)));
  EXPECT_LE(max_err, 1e-6f) << "max abs error of the normalised centre crop";
  // Spot values written out: output (0, 0) is source (38, 16).
  EXPECT_NEAR(tensor_at(t, 0, 0, 0),
              (((38 * 37 + 16 * 59 + 38 * 16 * 13) % 256) / 255.0 - 0.485) / 0.229, 1e-5);
  // Validation ignores the draw.
  const at::Tensor again = folder.get(0, 999).fields[0];
  EXPECT_EQ(std::memcmp(again.data_ptr<float>(), t.data_ptr<float>(), sizeof(float) * t.numel()),
            0);
}

TEST(ImageFolder, ValidationResizeAgreesWithADirectBilinearFilter) {
  // 320x280 -> shorter side 256: 292x256 (292.57 truncated), then the crop at top 16, left 34.
  test::TempDir dir;
  fs::create_directories(dir.path() / "a");
  const Image src = make_image(320, 280, 3, jagged);
  encode_png(src, dir.path() / "a/img.png");
  const ImageFolder folder(dir.path(), {224, /*train=*/false});
  const at::Tensor t = folder.get(0, 0).fields[0];
  const CropBox whole{0, 0, 280, 320};
  double max_err_levels = 0;
  for (int y : {0, 1, 57, 111, 200, 223})
    for (int x : {0, 3, 64, 150, 222, 223})
      for (int c = 0; c < 3; ++c) {
        const double ref = reference_bilinear(src, whole, 292, 256, x + 34, y + 16, c);
        // Back from the normalised value to pixel levels.
        const double got = (tensor_at(t, c, y, x) * kImageNetStd[c] + kImageNetMean[c]) * 255.0;
        max_err_levels = std::max(max_err_levels, std::fabs(got - ref));
      }
  EXPECT_LE(max_err_levels, 1.0 + 1e-3) << "max abs error in pixel levels";
}

TEST(ImageFolder, TrainingExamplesFollowTheirDraw) {
  test::TempDir dir;
  fs::create_directories(dir.path() / "a");
  encode_png(make_image(64, 48, 3, jagged), dir.path() / "a/img.png");
  const ImageFolder folder(dir.path(), {32, /*train=*/true});
  const ImageFolder other_seed(dir.path(), {32, /*train=*/true, false, /*seed=*/43});
  const auto bytes_equal = [](const at::Tensor& a, const at::Tensor& b) {
    return std::memcmp(a.data_ptr<float>(), b.data_ptr<float>(), sizeof(float) * a.numel()) == 0;
  };
  const at::Tensor a = folder.get(0, 5).fields[0];
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{3, 32, 32}));
  EXPECT_TRUE(bytes_equal(a, folder.get(0, 5).fields[0]))
      << "the same draw must give the same crop";
  EXPECT_FALSE(bytes_equal(a, folder.get(0, 6).fields[0])) << "another draw, another crop";
  EXPECT_FALSE(bytes_equal(a, other_seed.get(0, 5).fields[0])) << "another seed, another crop";
  // Every value is a normalised 8-bit level.
  for (int64_t i = 0; i < a.numel(); ++i) {
    const int c = static_cast<int>(i / (32 * 32));
    const float level = (a.data_ptr<float>()[i] * kImageNetStd[c] + kImageNetMean[c]) * 255.0f;
    ASSERT_NEAR(level, std::round(level), 1e-3) << i;
  }
}

TEST(ImageFolder, LayoutErrorsNameTheFolder) {
  test::TempDir dir;
  const fs::path missing = dir.path() / "nope";
  EXPECT_NE(error_of([&] { ImageFolder f(missing); }).find(missing.string()), std::string::npos);

  const fs::path flat = dir.path() / "flat";
  fs::create_directories(flat);
  encode_png(make_image(4, 4, 3, jagged), flat / "img.png");
  const std::string no_classes = error_of([&] { ImageFolder f(flat); });
  EXPECT_NE(no_classes.find(flat.string() + ": has no class folders"), std::string::npos)
      << no_classes;

  const fs::path root = dir.path() / "root";
  for (const char* d : {"a", "b", "c"}) fs::create_directories(root / d);
  encode_png(make_image(4, 4, 3, jagged), root / "a/img.png");
  encode_png(make_image(4, 4, 3, jagged), root / "b/img.png");
  write_bytes(root / "c/notes.txt", "no images here");
  const std::string empty_class = error_of([&] { ImageFolder f(root); });
  EXPECT_NE(empty_class.find((root / "c").string() + ": class folder 'c' holds no"),
            std::string::npos)
      << empty_class;
  EXPECT_THROW(ImageFolder(root, {0}), core::Error);
}

TEST(ImageFolder, CorruptImagesAreNamedOrSkippedAndCounted) {
  test::TempDir dir;
  const fs::path& root = dir.path();
  for (const char* d : {"a", "b"}) fs::create_directories(root / d);
  encode_png(make_image(20, 20, 3, jagged), root / "a/0_good.png");
  write_bytes(root / "a/1_bad.jpg", "\xff\xd8\xff this is not JPEG data");
  encode_png(make_image(20, 20, 3, smooth), root / "b/2_good.png");

  const ImageFolder strict(root, {16, false});
  const std::string message = error_of([&] { strict.get(1, 0); });
  EXPECT_NE(message.find((root / "a/1_bad.jpg").string()), std::string::npos) << message;
  EXPECT_EQ(strict.skipped(), 0u);

  const ImageFolder lenient(root, {16, false, /*skip_bad=*/true});
  const data::Example ex = lenient.get(1, 0);
  EXPECT_EQ(ex.id, "b/2_good.png") << "replaced by the next readable image";
  EXPECT_EQ(ex.fields[1].item<int64_t>(), 1) << "with that image's own label";
  EXPECT_EQ(lenient.skipped(), 1u);
  lenient.get(1, 1);
  EXPECT_EQ(lenient.skipped(), 2u) << "each time the bad file is met";
  EXPECT_EQ(lenient.get(0, 0).id, "a/0_good.png");
  EXPECT_EQ(lenient.skipped(), 2u);
}

TEST(ImageFolder, SkippingGivesUpOnARunOfBadImages) {
  test::TempDir dir;
  fs::create_directories(dir.path() / "a");
  for (int i = 0; i < 3; ++i)
    write_bytes(dir.path() / "a" / ("bad" + std::to_string(i) + ".png"), "junk");
  const ImageFolder folder(dir.path(), {16, true, /*skip_bad=*/true});
  const std::string message = error_of([&] { folder.get(1, 0); });
  EXPECT_NE(message.find("bad1.png: unreadable, and so are the 2 images after it"),
            std::string::npos)
      << message;
}

// Builds the ImageFolder on a thread and gives it 60 s: a scan that loops forever fails the test
// (ending the process, as the thread cannot be stopped) instead of hanging it.
std::unique_ptr<ImageFolder> scan_within_a_minute(const fs::path& root) {
  auto scan = std::async(std::launch::async, [root] {
    return std::make_unique<ImageFolder>(root, ImageFolderOptions{8, false});
  });
  if (scan.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: scanning %s did not end within 60 s\n", root.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
  return scan.get();
}

TEST(ImageFolder, LinkLoopsAndFoldersReachedTwiceAreSkippedByNameAndTheScanEnds) {
  test::TempDir dir;
  const fs::path root = dir.path() / "train";
  const fs::path outside = dir.path() / "outside";
  for (const fs::path& d : {root / "a/sub", root / "b/x", root / "b/y", outside})
    fs::create_directories(d);
  const Image im = make_image(12, 10, 3, jagged);
  for (const char* f : {"a/img.png", "a/sub/s.png", "b/x/q.png", "b/y/p.png"})
    encode_png(im, root / f);
  encode_png(im, outside / "o.png");
  fs::create_directory_symlink(".", root / "a/self");         // the folder itself
  fs::create_directory_symlink("..", root / "a/sub/back");    // its parent, the class folder
  fs::create_directory_symlink("../..", root / "a/sub/up2");  // two levels up: the root
  fs::create_directory_symlink("../y", root / "b/x/toy");     // two folders linking to each other
  fs::create_directory_symlink("../x", root / "b/y/tox");
  fs::create_directory_symlink(outside, root / "b/ext");       // a folder outside: followed
  fs::create_directory_symlink(root / "b", outside / "back");  // and back into the class
  fs::create_symlink("nowhere", root / "b/dangling");          // dangling: not a folder, no image
  fs::create_symlink("nowhere.png", root / "b/dangling.png");  // dangling, named as an image

  const std::unique_ptr<ImageFolder> folder = scan_within_a_minute(root);
  EXPECT_EQ(folder->class_names(), (std::vector<std::string>{"a", "b"}));
  std::vector<std::string> files;
  for (const ImageFile& f : folder->files()) files.push_back(f.relative_path);
  // Each real folder's images once, under its own path; the outside folder's through its link;
  // the dangling link named as an image is listed (reading it fails, as for any unreadable file).
  EXPECT_EQ(files, (std::vector<std::string>{"a/img.png", "a/sub/s.png", "b/dangling.png",
                                             "b/ext/o.png", "b/x/q.png", "b/y/p.png"}));
  // Links in the order met: real folders first (by name), then the links' own folders.
  EXPECT_EQ(folder->skipped_links(),
            (std::vector<std::string>{"a/self", "a/sub/back", "a/sub/up2", "b/x/toy", "b/y/tox",
                                      "b/ext/back"}));
}

// No loop, but 2^24 paths: a chain of 24 folders, each linking twice to the next. Walked by
// path, this takes hours; walked by folder, each is walked once and the second link is skipped.
TEST(ImageFolder, AChainOfDoubleLinksIsWalkedOnceAFolder) {
  test::TempDir dir;
  const fs::path root = dir.path() / "train";
  const fs::path chain = dir.path() / "chain";
  constexpr int kLevels = 24;
  for (int i = 0; i <= kLevels; ++i) fs::create_directories(chain / ("n" + std::to_string(i)));
  for (int i = 0; i < kLevels; ++i)
    for (const char* link : {"l1", "l2"})
      fs::create_directory_symlink("../n" + std::to_string(i + 1),
                                   chain / ("n" + std::to_string(i)) / link);
  encode_png(make_image(4, 4, 3, jagged), chain / ("n" + std::to_string(kLevels)) / "end.png");
  fs::create_directories(root / "a");
  fs::create_directory_symlink(chain / "n0", root / "a/start");

  const std::unique_ptr<ImageFolder> folder = scan_within_a_minute(root);
  std::string expected = "a/start";
  for (int i = 0; i < kLevels; ++i) expected += "/l1";
  ASSERT_EQ(folder->size(), 1u);
  EXPECT_EQ(folder->files()[0].relative_path, expected + "/end.png");
  EXPECT_EQ(folder->skipped_links().size(), static_cast<std::size_t>(kLevels)) << "every l2";
}

TEST(ImageFolder, AClassFolderLeadingBackToTheRootIsRefusedByName) {
  test::TempDir dir;
  const fs::path root = dir.path() / "train";
  fs::create_directories(root / "a");
  encode_png(make_image(4, 4, 3, jagged), root / "a/img.png");
  fs::create_directory_symlink(".", root / "all");
  const std::string message = error_of([&] { scan_within_a_minute(root); });
  EXPECT_NE(message.find((root / "all").string() + ": class folder 'all' leads back to the image "
                                                   "folder or a folder above it"),
            std::string::npos)
      << message;
}

// ---------------------------------------------------------------------------------------------
// SyntheticImages

bool same_example(const data::Example& a, const data::Example& b) {
  return a.id == b.id && a.fields[0].sizes() == b.fields[0].sizes() &&
         std::memcmp(a.fields[0].data_ptr<float>(), b.fields[0].data_ptr<float>(),
                     sizeof(float) * a.fields[0].numel()) == 0 &&
         a.fields[1].item<int64_t>() == b.fields[1].item<int64_t>();
}

TEST(SyntheticImages, SameExampleForTheSameSeedAndIndexAcrossObjectsAndThreads) {
  SyntheticImagesOptions o;
  o.count = 64;
  o.image_size = 24;
  o.num_classes = 10;
  const SyntheticImages one(o), two(o);
  std::vector<data::Example> serial;
  for (std::size_t i = 0; i < one.size(); ++i) serial.push_back(one.get(i, i * 7));
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(same_example(serial[i], two.get(i, 0))) << "index " << i;
    EXPECT_EQ(serial[i].id, "synthetic/" + std::to_string(i));
    EXPECT_EQ(serial[i].fields[1].item<int64_t>(), one.label(i));
  }
  // Four threads, each over every index in its own order.
  std::vector<std::vector<data::Example>> got(4, std::vector<data::Example>(one.size()));
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t k = 0; k < one.size(); ++k) {
        const std::size_t i = (k * (2 * t + 1) + t) % one.size();
        got[t][i] = two.get(i, t);
      }
    });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(same_example(serial[i], got[t][i])) << "thread " << t << " index " << i;

  o.seed = 43;
  EXPECT_FALSE(same_example(serial[0], SyntheticImages(o).get(0, 0))) << "another seed, other data";
}

TEST(SyntheticImages, OffsetSplitsOneSequenceIntoDisjointParts) {
  SyntheticImagesOptions all;
  all.count = 1000;
  all.image_size = 8;
  SyntheticImagesOptions train = all, val = all;
  train.count = 900;
  val.count = 100;
  val.offset = 900;
  const SyntheticImages whole(all), tr(train), va(val);
  std::set<std::string> train_ids;
  for (std::size_t i = 0; i < tr.size(); ++i) train_ids.insert(tr.get(i, 0).id);
  for (std::size_t i = 0; i < va.size(); ++i) {
    const data::Example v = va.get(i, 0);
    EXPECT_EQ(train_ids.count(v.id), 0u) << v.id;
    EXPECT_TRUE(same_example(v, whole.get(900 + i, 0))) << "val " << i << " is example " << 900 + i;
  }
  EXPECT_FALSE(same_example(va.get(0, 0), tr.get(0, 0)));
  EXPECT_THROW(va.get(100, 0), core::Error);
}

TEST(SyntheticImages, LabelsAreUniformAndPixelsStandardNormal) {
  SyntheticImagesOptions o;
  o.count = 4000;
  o.num_classes = 10;
  o.image_size = 4;
  const SyntheticImages data(o);
  std::vector<int> counts(10, 0);
  for (std::size_t i = 0; i < data.size(); ++i) {
    const int64_t label = data.label(i);
    ASSERT_TRUE(label >= 0 && label < 10) << label;
    ++counts[static_cast<std::size_t>(label)];
  }
  // Binomial(4000, 0.1): sd 19, so [320, 480] is over 4 sd.
  for (int c = 0; c < 10; ++c)
    EXPECT_TRUE(counts[c] > 320 && counts[c] < 480) << c << ": " << counts[c];

  o.count = 2;
  o.image_size = 224;
  const at::Tensor img = SyntheticImages(o).get(1, 0).fields[0];
  ASSERT_EQ(img.sizes(), (std::vector<int64_t>{3, 224, 224}));
  double sum = 0, sq = 0, tails = 0;
  const float* p = img.data_ptr<float>();
  for (int64_t i = 0; i < img.numel(); ++i) {
    sum += p[i];
    sq += double(p[i]) * p[i];
    tails += std::fabs(p[i]) > 1.959964;
  }
  const double n = static_cast<double>(img.numel());
  // 150 528 samples: the mean's sd is 0.0026, the variance's 0.0036, the 5% tail count's 0.00056.
  EXPECT_NEAR(sum / n, 0.0, 0.013);
  EXPECT_NEAR(sq / n, 1.0, 0.018);
  EXPECT_NEAR(tails / n, 0.05, 0.003);
}

TEST(SyntheticImages, SeparableClassesHaveDifferentMeansAndCanBeLearnt) {
  SyntheticImagesOptions o;
  o.num_classes = 4;
  o.image_size = 16;
  o.separable = true;
  o.count = 400;
  SyntheticImagesOptions v = o;
  v.count = 200;
  v.offset = 400;
  const SyntheticImages train(o), val(v);
  const int64_t pixels = 3 * 16 * 16;
  // Class centroids from the training part.
  std::vector<std::vector<double>> centroid(
      4, std::vector<double>(static_cast<std::size_t>(pixels), 0.0));
  std::vector<int> counts(4, 0);
  for (std::size_t i = 0; i < train.size(); ++i) {
    const data::Example ex = train.get(i, 0);
    const auto c = static_cast<std::size_t>(ex.fields[1].item<int64_t>());
    const float* p = ex.fields[0].data_ptr<float>();
    for (int64_t k = 0; k < pixels; ++k) centroid[c][static_cast<std::size_t>(k)] += p[k];
    ++counts[c];
  }
  for (std::size_t c = 0; c < 4; ++c) {
    ASSERT_GT(counts[c], 50);
    for (double& x : centroid[c]) x /= counts[c];
  }
  // Each 4x4-pixel block of a centroid averages 16 * ~100 unit normals (sd 0.025) around the
  // class's pattern value; pattern values of different classes differ by O(1).
  double max_gap = 0;
  for (int ch = 0; ch < 3; ++ch)
    for (int gy = 0; gy < 4; ++gy)
      for (int gx = 0; gx < 4; ++gx)
        for (std::size_t c = 0; c < 4; ++c) {
          double block = 0;
          for (int y = gy * 4; y < gy * 4 + 4; ++y)
            for (int x = gx * 4; x < gx * 4 + 4; ++x)
              block += centroid[c][static_cast<std::size_t>((ch * 16 + y) * 16 + x)];
          block /= 16;
          EXPECT_NEAR(block, train.pattern(static_cast<int64_t>(c), ch, gy, gx), 0.15)
              << "class " << c << " cell (" << ch << ", " << gy << ", " << gx << ")";
          EXPECT_LE(std::fabs(train.pattern(static_cast<int64_t>(c), ch, gy, gx)), 1.0f);
          if (c > 0) {
            double block0 = 0;
            for (int y = gy * 4; y < gy * 4 + 4; ++y)
              for (int x = gx * 4; x < gx * 4 + 4; ++x)
                block0 += centroid[0][static_cast<std::size_t>((ch * 16 + y) * 16 + x)];
            max_gap = std::max(max_gap, std::fabs(block - block0 / 16));
          }
        }
  EXPECT_GT(max_gap, 0.5) << "class means should differ";

  // Nearest-centroid classification of the validation part (other examples, same patterns).
  const auto accuracy = [&](const SyntheticImages& source,
                            const std::vector<std::vector<double>>& centres) {
    int right = 0;
    for (std::size_t i = 0; i < source.size(); ++i) {
      const data::Example ex = source.get(i, 0);
      const float* p = ex.fields[0].data_ptr<float>();
      std::size_t best = 0;
      double best_d = 1e300;
      for (std::size_t c = 0; c < centres.size(); ++c) {
        double d = 0;
        for (int64_t k = 0; k < pixels; ++k)
          d += std::pow(p[k] - centres[c][static_cast<std::size_t>(k)], 2);
        if (d < best_d) {
          best_d = d;
          best = c;
        }
      }
      right += static_cast<int64_t>(best) == ex.fields[1].item<int64_t>();
    }
    return static_cast<double>(right) / source.size();
  };
  EXPECT_GT(accuracy(val, centroid), 0.95) << "chance is 0.25";
  // Without the signal, the same classifier is at chance.
  v.separable = false;
  EXPECT_LT(accuracy(SyntheticImages(v), centroid), 0.45);
}

TEST(SyntheticImages, RejectsBadOptions) {
  for (const auto& bad : std::vector<std::function<void(SyntheticImagesOptions&)>>{
           [](auto& o) { o.count = 0; }, [](auto& o) { o.image_size = 0; },
           [](auto& o) { o.num_classes = 0; }, [](auto& o) { o.offset = -1; }}) {
    SyntheticImagesOptions o;
    bad(o);
    EXPECT_THROW(SyntheticImages{o}, core::Error);
  }
}

}  // namespace
}  // namespace scaffold::imgcls
