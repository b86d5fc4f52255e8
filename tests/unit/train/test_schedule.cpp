// CosineWarmRestarts against known values, the closed form of docs/benchmark.md and a step-by-step
// replay of torch's CosineAnnealingWarmRestarts.step(); restarts, T_mult = 1 periodicity, disabled
// mode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "core/error.hpp"
#include "train/schedule.hpp"

namespace scaffold::train {
namespace {

constexpr double kPi = 3.141592653589793;
constexpr double kTol = 1e-15;  // absolute, on LRs of order 1e-3

double closed_form(double lr0, double eta_min, int64_t t_cur, int64_t t_i) {
  return eta_min +
         (lr0 - eta_min) *
             (1.0 + std::cos(kPi * static_cast<double>(t_cur) / static_cast<double>(t_i))) / 2.0;
}

TEST(Schedule, KnownValuesWithTheDefaults) {
  const CosineWarmRestarts s(1e-3, 1e-4, 10, 2);
  EXPECT_NEAR(s.lr_after(0), 1e-3, kTol);
  EXPECT_NEAR(s.lr_after(5), 5.5e-4, kTol);  // half-way through the first 10-epoch cycle
  EXPECT_NEAR(s.lr_after(9), closed_form(1e-3, 1e-4, 9, 10), kTol);
  EXPECT_NEAR(s.lr_after(10), 1e-3, kTol);  // restart; the next cycle is 20 epochs
  EXPECT_NEAR(s.lr_after(20), 5.5e-4, kTol);
  EXPECT_NEAR(s.lr_after(29), closed_form(1e-3, 1e-4, 19, 20), kTol);
  EXPECT_NEAR(s.lr_after(29), 1.0554024673218806e-4, 1e-18);  // math in Python
  EXPECT_NEAR(s.lr_after(30), 1e-3, kTol);                    // restart; 40 epochs
  EXPECT_NEAR(s.lr_after(50), 5.5e-4, kTol);
  EXPECT_NEAR(s.lr_after(70), 1e-3, kTol);  // restart; 80 epochs
  EXPECT_NEAR(s.lr_after(150), 1e-3, kTol);
  EXPECT_NEAR(s.lr_after(149), closed_form(1e-3, 1e-4, 79, 80), kTol);
}

// torch: T_cur += 1; if T_cur >= T_i: T_cur -= T_i, T_i *= T_mult; then the closed form.
TEST(Schedule, MatchesAStepByStepReplay) {
  for (const int64_t t_mult : {1, 2, 3}) {
    for (const int64_t t_0 : {1, 3, 10}) {
      const CosineWarmRestarts s(2e-3, 1e-5, t_0, t_mult);
      int64_t t_cur = 0, t_i = t_0;
      for (int64_t epoch = 0; epoch <= 500; ++epoch) {
        if (epoch > 0) {
          t_cur += 1;
          if (t_cur >= t_i) {
            t_cur -= t_i;
            t_i *= t_mult;
          }
        }
        const double want = closed_form(2e-3, 1e-5, t_cur, t_i);
        EXPECT_DOUBLE_EQ(s.lr_after(epoch), want)
            << "T_0 " << t_0 << " T_mult " << t_mult << " epoch " << epoch;
      }
    }
  }
}

TEST(Schedule, TMultOneIsPeriodic) {
  const CosineWarmRestarts s(1e-3, 0.0, 7, 1);
  for (int64_t e = 0; e < 50; ++e) EXPECT_NEAR(s.lr_after(e), s.lr_after(e + 7), kTol) << e;
  EXPECT_NEAR(s.lr_after(7 * 13), 1e-3, kTol);
  EXPECT_LT(s.lr_after(6), s.lr_after(5));
}

TEST(Schedule, DisabledIsConstant) {
  const CosineWarmRestarts s = CosineWarmRestarts::disabled(3e-4);
  EXPECT_TRUE(s.is_disabled());
  for (int64_t e = 0; e < 200; ++e) EXPECT_EQ(s.lr_after(e), 3e-4) << e;
  EXPECT_FALSE(CosineWarmRestarts(1e-3, 1e-4, 10, 2).is_disabled());
}

TEST(Schedule, RejectsBadPeriods) {
  EXPECT_THROW(CosineWarmRestarts(1e-3, 1e-4, 0, 2), core::Error);
  EXPECT_THROW(CosineWarmRestarts(1e-3, 1e-4, 10, 0), core::Error);
  EXPECT_THROW(CosineWarmRestarts(1e-3, 1e-4, 10, 2).lr_after(-1), core::Error);
}

}  // namespace
}  // namespace scaffold::train
