// .npy writer/reader: header layout, round trips, and rejection of truncated or foreign files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/npy.hpp"
#include "test_util.hpp"

namespace scaffold::core {
namespace {

TEST(Npy, HeaderIsFormat10AlignedAndNumpyStyle) {
  const std::string h = npy_header(DType::Float32, {8192, 3});
  ASSERT_GE(h.size(), 10u);
  EXPECT_EQ(h.substr(0, 6), std::string("\x93NUMPY", 6));
  EXPECT_EQ(h[6], 1);
  EXPECT_EQ(h[7], 0);
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.back(), '\n');
  EXPECT_NE(h.find("{'descr': '<f4', 'fortran_order': False, 'shape': (8192, 3), }"),
            std::string::npos);
  EXPECT_NE(npy_header(DType::UInt16, {5}).find("'shape': (5,)"), std::string::npos);
}

TEST(Npy, RoundTripsEveryDtypeWeUse) {
  test::TempDir dir;
  const std::vector<float> f{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  write_npy(dir.path() / "f.npy", DType::Float32, {2, 3}, f.data());
  std::vector<int64_t> shape;
  EXPECT_EQ(read_npy<float>(dir.path() / "f.npy", &shape), f);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 3}));

  const std::vector<uint16_t> u{0, 1, 65535};
  write_npy(dir.path() / "u.npy", DType::UInt16, {3}, u.data());
  EXPECT_EQ(read_npy<uint16_t>(dir.path() / "u.npy", &shape), u);
  EXPECT_EQ(shape, (std::vector<int64_t>{3}));
}

TEST(Npy, RejectsTruncatedWrongDtypeAndGarbage) {
  test::TempDir dir;
  const std::vector<double> d(12, 1.0);
  const auto path = dir.path() / "d.npy";
  write_npy(path, DType::Float64, {4, 3}, d.data());
  EXPECT_THROW(read_npy<float>(path, nullptr), FileError);  // wrong dtype

  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 8);
  try {
    read_npy_info(path);
    FAIL() << "truncated file accepted";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  write_file_atomic(dir.path() / "g.npy", std::string("not numpy at all"));
  EXPECT_THROW(read_npy_info(dir.path() / "g.npy"), FileError);
  EXPECT_THROW(read_npy_info(dir.path() / "missing.npy"), FileError);
}

}  // namespace
}  // namespace scaffold::core
