// The pure parts: counter tracking (wraps, resets), trapezoid integration against known power
// curves, windows with interpolated edges, failed reads, counter-derived power, and the total rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "energy/sensor.hpp"
#include "energy/trace.hpp"
#include "unit/energy/energy_test_util.hpp"

namespace scaffold::energy {
namespace {

using test::close;

SensorInfo sensor(const std::string& name, SensorKind kind, bool counter = false,
                  bool from_counter = false, double range_j = 0.0) {
  SensorInfo s;
  s.name = name;
  s.source = "test";
  s.kind = kind;
  s.has_counter = counter;
  s.power_from_counter = from_counter;
  s.counter_range_j = range_j;
  return s;
}

SensorReading power(double w) {
  return {w, kNaN};
}
SensorReading both(double w, double j) {
  return {w, j};
}
SensorReading counter(double j) {
  return {kNaN, j};
}

// ------------------------------------------------------------------------------ counter

TEST(CounterTracker, AccumulatesAndHandlesWrapAroundTheRange) {
  CounterTracker c(100.0);
  EXPECT_TRUE(std::isnan(c.energy_j()));
  EXPECT_EQ(c.update(90.0), 0.0);
  EXPECT_EQ(c.update(95.0), 5.0);
  EXPECT_EQ(c.update(10.0), 20.0);  // 95 -> 100 = 0 -> 10
  EXPECT_EQ(c.update(kNaN), 20.0);  // a failed read changes nothing
  EXPECT_EQ(c.update(40.0), 50.0);
  EXPECT_EQ(c.wraps(), 1);
  EXPECT_TRUE(c.valid());
}

TEST(CounterTracker, ABackwardStepWithoutRangeIsAResetAndInvalidates) {
  CounterTracker c;  // NVML-like: no wrap range
  c.update(1000.0);
  EXPECT_EQ(c.update(1500.0), 500.0);
  EXPECT_TRUE(std::isnan(c.update(3.0)));
  EXPECT_FALSE(c.valid());
  EXPECT_TRUE(std::isnan(c.update(10.0)));
}

TEST(CounterTracker, LargeRawValuesKeepMicrojouleResolution) {
  // RAPL: energy_uj ~2.6e11 µJ near the wrap; 1 µJ steps must survive the conversion to J.
  CounterTracker c(262143.328850);
  c.update(262143.328000);
  EXPECT_TRUE(close("delta across the wrap", c.update(0.000001), 0.000851, 1e-9));
}

// ------------------------------------------------------------------------------ integration

TEST(PowerTrace, TrapezoidIsExactForPiecewiseLinearPower) {
  // Breakpoints at the samples, uneven spacing: trapezoid integration is exact.
  const std::vector<double> t = {0.0, 0.1, 0.35, 0.4, 1.0, 1.7};
  const std::vector<double> p = {100.0, 300.0, 300.0, 50.0, 80.0, 20.0};
  PowerTrace trace({sensor("s", SensorKind::Accelerator)});
  double want = 0.0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    trace.add(t[i], 1e9 + t[i], {power(p[i])});
    if (i > 0) want += 0.5 * (p[i] + p[i - 1]) * (t[i] - t[i - 1]);
  }
  const SensorWindow w = trace.sensor_window(0, 0.0, 1.7);
  EXPECT_TRUE(close("integrated J", w.integrated_j, want, 1e-9));
  EXPECT_TRUE(std::isnan(w.counter_j));
  EXPECT_EQ(w.energy_j, w.integrated_j);
  EXPECT_TRUE(close("average W", w.average_w, want / 1.7, 1e-9));
  EXPECT_EQ(w.peak_w, 300.0);
  EXPECT_EQ(w.samples, 6u);
}

TEST(PowerTrace, TrapezoidAgainstAQuadraticPowerCurveHasTheTheoreticalError) {
  // P(t) = 100 + 50 t^2 W on [0, 1] s, sampled every 10 ms: exact energy 100 + 50/3 J; the
  // trapezoid rule overestimates a convex curve by h^2/12 * (P'(1) - P'(0)) = 1e-4/12 * 100 J.
  PowerTrace trace({sensor("s", SensorKind::Accelerator)});
  const int n = 100;
  for (int i = 0; i <= n; ++i) {
    const double t = i / double(n);
    trace.add(t, t, {power(100.0 + 50.0 * t * t)});
  }
  const double exact = 100.0 + 50.0 / 3.0;
  const double got = trace.energy_between_j(0, 0.0, 1.0);
  const double expected_error = 1e-4 / 12.0 * 100.0;
  std::printf("quadratic curve: integrated %.9f J, exact %.9f J, error %.3e J (theory %.3e J)\n",
              got, exact, got - exact, expected_error);
  EXPECT_TRUE(close("trapezoid error", got - exact, expected_error, 1e-9));
}

TEST(PowerTrace, WindowsInterpolateAtTheEdgesAndClipToTheRecordedSpan) {
  PowerTrace trace({sensor("s", SensorKind::Accelerator)});
  trace.add(0.0, 0.0, {power(100.0)});
  trace.add(1.0, 1.0, {power(200.0)});
  trace.add(2.0, 2.0, {power(200.0)});
  // [0.5, 1.5]: P(0.5) = 150 W; 0.5 s at mean 175 W + 0.5 s at 200 W = 87.5 + 100 J.
  SensorWindow w = trace.sensor_window(0, 0.5, 1.5);
  EXPECT_TRUE(close("inner window J", w.integrated_j, 187.5, 1e-9));
  EXPECT_TRUE(close("inner window avg W", w.average_w, 187.5, 1e-9));
  EXPECT_EQ(w.peak_w, 200.0);
  EXPECT_EQ(w.samples, 1u);
  // [0.25, 0.75]: all inside one segment; peak is the interpolated right edge (175 W).
  w = trace.sensor_window(0, 0.25, 0.75);
  EXPECT_TRUE(close("one-segment window J", w.integrated_j, 0.5 * 150.0, 1e-9));
  EXPECT_TRUE(close("one-segment peak W", w.peak_w, 175.0, 1e-9));
  // [-1, 0.5]: clipped to [0, 0.5].
  w = trace.sensor_window(0, -1.0, 0.5);
  EXPECT_TRUE(close("clipped window J", w.integrated_j, 62.5, 1e-9));
  EXPECT_TRUE(close("covered s", w.covered_s, 0.5, 1e-12));
  // Entirely outside: no data, NaN rather than a misleading 0.
  w = trace.sensor_window(0, 3.0, 4.0);
  EXPECT_TRUE(std::isnan(w.integrated_j));
  EXPECT_TRUE(std::isnan(w.energy_j));
  EXPECT_EQ(w.covered_s, 0.0);
  // Reversed window: nothing.
  EXPECT_TRUE(std::isnan(trace.sensor_window(0, 1.5, 0.5).energy_j));
  // Windows add up.
  EXPECT_TRUE(close("additivity",
                    trace.energy_between_j(0, 0.0, 0.7) + trace.energy_between_j(0, 0.7, 2.0),
                    trace.energy_between_j(0, 0.0, 2.0), 1e-9));
}

TEST(PowerTrace, AFailedReadIsBridgedMarkedAndShownEmpty) {
  PowerTrace trace({sensor("a", SensorKind::Accelerator), sensor("b", SensorKind::Accelerator)});
  trace.add(0.0, 0.0, {power(100.0), power(10.0)});
  trace.add(1.0, 1.0, {power(kNaN), power(10.0)});
  trace.add(2.0, 2.0, {power(300.0), power(10.0)});
  EXPECT_TRUE(close("bridged J", trace.energy_between_j(0, 0.0, 2.0), 400.0, 1e-9));
  EXPECT_TRUE(trace.sensors()[0].failed);
  EXPECT_EQ(trace.sensors()[0].failed_reads, 1);
  EXPECT_FALSE(trace.sensors()[1].failed);
  EXPECT_TRUE(std::isnan(trace.power_w(1, 0)));
  EXPECT_EQ(trace.power_w(1, 1), 10.0);
  EXPECT_EQ(trace.sensor_window(0, 0.0, 2.0).samples, 2u);
}

TEST(PowerTrace, BothCounterAndIntegratedEnergyAreReported) {
  PowerTrace trace({sensor("gpu", SensorKind::Accelerator, true)});
  trace.add(0.0, 0.0, {both(100.0, 5000.0)});
  trace.add(1.0, 1.0, {both(100.0, 5101.0)});
  trace.add(2.0, 2.0, {both(100.0, 5203.0)});
  const SensorWindow w = trace.sensor_window(0, 0.0, 2.0);
  EXPECT_TRUE(close("integrated J", w.integrated_j, 200.0, 1e-9));
  EXPECT_TRUE(close("counter J", w.counter_j, 203.0, 1e-9));
  EXPECT_EQ(w.energy_j, w.counter_j);
  // Counter windows interpolate linearly: [0.5, 1.5] = 50.5 + 51 J.
  EXPECT_TRUE(close("counter window J", trace.sensor_window(0, 0.5, 1.5).counter_j, 101.5, 1e-9));
}

TEST(PowerTrace, CounterDerivedPowerIntegratesToTheCounterAcrossAWrap) {
  // RAPL-like: raw 90, 10, 40 J at t = 0, 1, 3 with a 100 J range: +20 J then +30 J.
  PowerTrace trace({sensor("pkg", SensorKind::CpuPackage, true, true, 100.0)});
  trace.add(0.0, 0.0, {counter(90.0)});
  trace.add(1.0, 1.0, {counter(10.0)});
  trace.add(3.0, 3.0, {counter(40.0)});
  EXPECT_TRUE(std::isnan(trace.power_w(0, 0)));  // no interval before the first reading
  EXPECT_EQ(trace.power_w(1, 0), 20.0);
  EXPECT_EQ(trace.power_w(2, 0), 15.0);
  SensorWindow w = trace.sensor_window(0, 0.0, 3.0);
  EXPECT_TRUE(close("counter J", w.counter_j, 50.0, 1e-12));
  EXPECT_TRUE(close("integrated J", w.integrated_j, 50.0, 1e-12));
  EXPECT_EQ(w.peak_w, 20.0);
  // [0.5, 2]: 0.5 s at 20 W + 1 s at 15 W.
  w = trace.sensor_window(0, 0.5, 2.0);
  EXPECT_TRUE(close("window integrated J", w.integrated_j, 25.0, 1e-12));
  EXPECT_TRUE(close("window counter J", w.counter_j, 25.0, 1e-12));
  EXPECT_EQ(w.peak_w, 20.0);
  EXPECT_EQ(trace.sensor_window(0, 1.5, 2.5).peak_w, 15.0);
}

TEST(PowerTrace, ACounterResetIsMarkedAndTheCounterDropped) {
  PowerTrace trace({sensor("gpu", SensorKind::Accelerator, true)});
  trace.add(0.0, 0.0, {both(100.0, 5000.0)});
  trace.add(1.0, 1.0, {both(100.0, 5100.0)});
  trace.add(2.0, 2.0, {both(100.0, 20.0)});  // driver reload
  EXPECT_TRUE(trace.sensors()[0].counter_reset);
  EXPECT_TRUE(trace.sensors()[0].failed);
  const SensorWindow w = trace.sensor_window(0, 0.0, 2.0);
  EXPECT_TRUE(std::isnan(w.counter_j));
  EXPECT_TRUE(close("falls back to integrated J", w.energy_j, 200.0, 1e-9));
}

// ------------------------------------------------------------------------------ totals

TEST(SelectTotal, ModuleSensorsSupersedeTheirPartsAndTheGpus) {
  std::vector<SensorInfo> s = {sensor("nvml:0", SensorKind::Accelerator),
                               sensor("hwmon:Module Power Socket 0", SensorKind::Module),
                               sensor("hwmon:Grace Power Socket 0", SensorKind::CpuPackage),
                               sensor("hwmon:CPU Power Socket 0", SensorKind::Part),
                               sensor("hwmon:amdgpu/PPT", SensorKind::Other)};
  select_total(s);
  EXPECT_FALSE(s[0].in_total);
  EXPECT_TRUE(s[1].in_total);
  EXPECT_FALSE(s[2].in_total);
  EXPECT_FALSE(s[3].in_total);
  EXPECT_FALSE(s[4].in_total);
}

TEST(SelectTotal, WithoutModulesGpusAndCpuPackagesAreSummedNotParts) {
  std::vector<SensorInfo> s = {
      sensor("nvml:0", SensorKind::Accelerator), sensor("nvml:1", SensorKind::Accelerator),
      sensor("rapl:package-0", SensorKind::CpuPackage),
      sensor("rapl:package-0/dram", SensorKind::Part), sensor("rapl:psys", SensorKind::Other)};
  select_total(s);
  EXPECT_TRUE(s[0].in_total);
  EXPECT_TRUE(s[1].in_total);
  EXPECT_TRUE(s[2].in_total);
  EXPECT_FALSE(s[3].in_total);
  EXPECT_FALSE(s[4].in_total);
}

TEST(SelectTotal, RepeatedNamesAreMadeUnique) {
  std::vector<SensorInfo> s = {sensor("x", SensorKind::Other), sensor("x", SensorKind::Other),
                               sensor("y", SensorKind::Other), sensor("x", SensorKind::Other)};
  make_names_unique(s);
  EXPECT_EQ(s[0].name, "x");
  EXPECT_EQ(s[1].name, "x #2");
  EXPECT_EQ(s[2].name, "y");
  EXPECT_EQ(s[3].name, "x #3");
}

TEST(PowerTrace, TotalIsCounterBasedOnlyWhenEverySummedSensorHasACounter) {
  std::vector<SensorInfo> s = {sensor("gpu0", SensorKind::Accelerator, true),
                               sensor("gpu1", SensorKind::Accelerator, true),
                               sensor("dram", SensorKind::Part, false)};
  select_total(s);
  PowerTrace trace(s);
  trace.add(0.0, 0.0, {both(100.0, 0.0), both(50.0, 0.0), power(7.0)});
  trace.add(2.0, 2.0, {both(100.0, 210.0), both(50.0, 98.0), power(7.0)});
  WindowSummary w = trace.window(0.0, 2.0);
  EXPECT_EQ(w.total_sensors, 2);
  EXPECT_TRUE(w.total_from_counter);
  EXPECT_TRUE(close("total counter J", w.total_j, 308.0, 1e-9));
  EXPECT_TRUE(close("total integrated J", w.total_integrated_j, 300.0, 1e-9));  // dram not summed

  // One summed sensor without a counter: the total is integrated, for every sensor alike.
  s[1].has_counter = false;
  PowerTrace mixed(s);
  mixed.add(0.0, 0.0, {both(100.0, 0.0), power(50.0), power(7.0)});
  mixed.add(2.0, 2.0, {both(100.0, 210.0), power(50.0), power(7.0)});
  w = mixed.window(0.0, 2.0);
  EXPECT_FALSE(w.total_from_counter);
  EXPECT_TRUE(std::isnan(w.total_counter_j));
  EXPECT_TRUE(close("total integrated J", w.total_j, 300.0, 1e-9));
  EXPECT_EQ(mixed.energy_between_j(0.0, 2.0), w.total_j);
}

TEST(PowerTrace, NothingSummedGivesNaNTotals) {
  PowerTrace trace({sensor("fan", SensorKind::Other)});
  trace.add(0.0, 0.0, {power(3.0)});
  trace.add(1.0, 1.0, {power(3.0)});
  const WindowSummary w = trace.whole();
  EXPECT_EQ(w.total_sensors, 0);
  EXPECT_TRUE(std::isnan(w.total_j));
  EXPECT_TRUE(close("per-sensor J still there", w.sensors[0].integrated_j, 3.0, 1e-12));
}

}  // namespace
}  // namespace scaffold::energy
