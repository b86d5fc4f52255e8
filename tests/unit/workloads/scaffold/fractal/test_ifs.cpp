// IFS sampling, probabilities, category CSVs and the instance weight table.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "fractal_util.hpp"
#include "workloads/scaffold/fractal/ifs.hpp"

namespace scaffold::fractal {
namespace {

TEST(Ifs, ProbabilitiesSumToOneAndFollowAbsDeterminant) {
  // det(M0) = 0.9 * 0.5 * 0.5; det(M1) = -0.3 * -0.5 * 0.5 (diagonal matrices).
  const IfsParams p = test::diagonal_category(0.9, -0.3);
  const double d0 = 0.9 * 0.5 * 0.5, d1 = 0.3 * 0.5 * 0.5;
  EXPECT_NEAR(map_determinant(p.maps[0]), d0, 1e-15);
  EXPECT_NEAR(map_determinant(p.maps[1]), -0.3 * -0.5 * 0.5, 1e-15);
  EXPECT_NEAR(p.maps[0][kProbabilityColumn], d0 / (d0 + d1), 1e-15);
  EXPECT_NEAR(p.maps[1][kProbabilityColumn], d1 / (d0 + d1), 1e-15);

  for (uint64_t attempt = 0; attempt < 200; ++attempt) {
    const IfsParams c = sample_candidate(42, attempt);
    const double p0 = c.maps[0][kProbabilityColumn], p1 = c.maps[1][kProbabilityColumn];
    ASSERT_NEAR(p0 + p1, 1.0, 1e-12);
    const double a0 = std::fabs(map_determinant(c.maps[0])),
                 a1 = std::fabs(map_determinant(c.maps[1]));
    ASSERT_NEAR(p0, a0 / (a0 + a1), 1e-12);
    for (const auto& map : c.maps)
      for (int k = 0; k < kAffineParams; ++k) {
        ASSERT_GE(map[k], -1.0);
        ASSERT_LT(map[k], 1.0);
      }
  }
}

TEST(Ifs, CandidatesDependOnlyOnSeedAndAttempt) {
  EXPECT_EQ(sample_candidate(42, 5), sample_candidate(42, 5));
  EXPECT_FALSE(sample_candidate(42, 5) == sample_candidate(42, 6));
  EXPECT_FALSE(sample_candidate(42, 5) == sample_candidate(43, 5));
}

TEST(Ifs, CategoryCsvIsTwoByThirteenAndRoundTripsExactly) {
  const IfsParams c = sample_candidate(7, 3);
  const std::string csv = category_to_csv(c);
  int lines = 0, commas = 0;
  for (char ch : csv) {
    lines += ch == '\n';
    commas += ch == ',';
  }
  EXPECT_EQ(lines, 2);
  EXPECT_EQ(commas, 2 * 12);
  EXPECT_NE(csv.find("e-01,"), std::string::npos) << csv;  // %.18e style
  EXPECT_EQ(category_from_csv(csv, "x.csv"), c);
}

TEST(Ifs, CategoryCsvRejectsBadShapesNamingTheFile) {
  EXPECT_THROW(category_from_csv("1,2,3\n", "bad.csv"), core::FileError);
  std::string one_row = category_to_csv(sample_candidate(1, 1));
  one_row = one_row.substr(0, one_row.find('\n') + 1);
  try {
    category_from_csv(one_row, "short.csv");
    FAIL();
  } catch (const core::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("short.csv"), std::string::npos);
  }
  std::string with_nan = category_to_csv(sample_candidate(1, 1));
  with_nan.replace(0, with_nan.find(','), "nan");
  EXPECT_THROW(category_from_csv(with_nan, "nan.csv"), core::FileError);
}

TEST(Ifs, WeightTableIsTheShippedOneWithItsQuirk) {
  const auto& w = instance_weight_table();
  ASSERT_EQ(w.size(), 145u);
  for (int k = 0; k < kAffineParams; ++k) EXPECT_EQ(w[6][k], 1.0) << "row 6 is the unscaled row";
  EXPECT_DOUBLE_EQ(w[0][0], 0.4);
  EXPECT_DOUBLE_EQ(w[12][0], 1.6);
  // Row 13 starts parameter 1 at 0.4; each parameter p >= 1 has rows 13 + 12 (p - 1) ...
  EXPECT_DOUBLE_EQ(w[13][1], 0.4);
  EXPECT_DOUBLE_EQ(w[13][0], 1.0);
  // The quirk: row 108 scales parameter 8 by 0.6 where the pattern says 1.6.
  EXPECT_DOUBLE_EQ(w[108][8], 0.6);
  EXPECT_DOUBLE_EQ(w[99][8], 0.6);  // parameter 8 starts at row 97: 0.4, 0.5, 0.6, ...
  EXPECT_DOUBLE_EQ(w[107][8], 1.5);
  EXPECT_DOUBLE_EQ(w[144][11], 1.6);
}

TEST(Ifs, WeightsApplyToAffineColumnsOnly) {
  const IfsParams base = sample_candidate(42, 0);
  InstanceWeights w;
  w.fill(2.0);
  const IfsParams scaled = apply_weights(base, w);
  for (int t = 0; t < kMaps; ++t) {
    for (int k = 0; k < kAffineParams; ++k) EXPECT_EQ(scaled.maps[t][k], 2.0 * base.maps[t][k]);
    EXPECT_EQ(scaled.maps[t][kProbabilityColumn], base.maps[t][kProbabilityColumn]);
  }
  const InstanceWeights half = attenuate(w, 0.5), unit = attenuate(w, 0.0),
                        same = attenuate(w, 1.0);
  EXPECT_EQ(half[3], 1.5);
  EXPECT_EQ(unit[3], 1.0);
  EXPECT_EQ(same[3], 2.0);
}

}  // namespace
}  // namespace scaffold::fractal
