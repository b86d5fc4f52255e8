// A power fixture whose power changes over time, for the end-to-end energy tests: a one-sensor
// GH200-shaped hwmon tree (`Module Power Socket 0`, summed into the total) whose power1_average a
// helper thread rewrites (temporary file + rename, as the sysfs reader expects of a live
// attribute) every millisecond with P(t) = mean + amplitude * sin(2 pi t / period). The test
// integrates P itself, in closed form, over the windows the program reports; a program that got
// its windows, its interpolation or its sums wrong gives energies that differ from that integral.
// Not a model of real hardware: the shape is chosen so that no two windows see the same power.
//
// Or a ramp, P(t) = start + slope * (t - t_made), t_made the fixture's construction: its slope is
// the same everywhere, so a window misplaced by d seconds is off by slope * d in average power
// whatever its length and wherever it lies (a sine lets long windows average out), and linear
// interpolation between samples is exact for it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace scaffold::test {

// Which clock P(t) reads: the steady clock (CLOCK_MONOTONIC, the time base of scaffold's energy
// windows) or the system clock (unix seconds, as power.csv's unix_time_s).
enum class PowerClock { steady, system };

// The ramp's shape: watts at construction, and watts added per second after it.
struct PowerRamp {
  double start_w = 200.0;
  double slope_w_per_s = 25.0;
};

class VaryingPowerFixture {
 public:
  static constexpr double kPi = 3.14159265358979323846;

  VaryingPowerFixture(const std::filesystem::path& dir, double mean_w, double amplitude_w,
                      double period_s, PowerClock clock)
      : dir_(dir), mean_w_(mean_w), amplitude_w_(amplitude_w), period_s_(period_s), clock_(clock) {
    start();
  }
  VaryingPowerFixture(const std::filesystem::path& dir, PowerRamp ramp, PowerClock clock)
      : dir_(dir),
        mean_w_(ramp.start_w),
        amplitude_w_(0.0),
        period_s_(1.0),
        clock_(clock),
        ramp_(true),
        slope_w_per_s_(ramp.slope_w_per_s) {
    ramp_origin_s_ = now_s();
    start();
  }

 private:
  void start() {
    namespace fs = std::filesystem;
    const fs::path device = hwmon_root() / "hwmon2" / "device";
    fs::create_directories(device);
    fs::create_directories(dir_ / "tmp");  // temporaries outside the tree the sampler scans
    std::ofstream(hwmon_root() / "hwmon2" / "name") << "power_meter\n";
    std::ofstream(device / "power1_oem_info") << "Module Power Socket 0\n";
    write_value();  // present before any reader looks
    writer_ = std::thread([this] {
      while (!stop_.load()) {
        write_value();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }

 public:
  ~VaryingPowerFixture() {
    stop_.store(true);
    writer_.join();
  }
  VaryingPowerFixture(const VaryingPowerFixture&) = delete;
  VaryingPowerFixture& operator=(const VaryingPowerFixture&) = delete;

  std::filesystem::path hwmon_root() const { return dir_ / "hwmon"; }

  // Seconds on the fixture's clock (the same clock a child process reads).
  double now_s() const {
    using namespace std::chrono;
    return clock_ == PowerClock::steady
               ? duration<double>(steady_clock::now().time_since_epoch()).count()
               : duration<double>(system_clock::now().time_since_epoch()).count();
  }
  double power_w(double t) const {
    if (ramp_) return mean_w_ + slope_w_per_s_ * (t - ramp_origin_s_);
    return mean_w_ + amplitude_w_ * std::sin(omega() * t);
  }
  // The exact integral of P over [t0, t1] in joules.
  double energy_j(double t0, double t1) const {
    if (ramp_)
      return mean_w_ * (t1 - t0) + 0.5 * slope_w_per_s_ *
                                       ((t1 - ramp_origin_s_) * (t1 - ramp_origin_s_) -
                                        (t0 - ramp_origin_s_) * (t0 - ramp_origin_s_));
    return mean_w_ * (t1 - t0) +
           amplitude_w_ / omega() * (std::cos(omega() * t0) - std::cos(omega() * t1));
  }
  // The highest P(t) for t in [t0, t1]: an end point, or a crest of the sine inside.
  double peak_w(double t0, double t1) const {
    double peak = std::max(power_w(t0), power_w(t1));
    if (ramp_) return peak;
    const double first_crest = (std::ceil((t0 / period_s_) - 0.25) + 0.25) * period_s_;
    if (first_crest <= t1) peak = mean_w_ + amplitude_w_;
    return peak;
  }
  double mean_w() const { return mean_w_; }
  double amplitude_w() const { return amplitude_w_; }
  double omega() const { return 2.0 * kPi / period_s_; }
  double slope_w_per_s() const { return slope_w_per_s_; }

 private:
  void write_value() {
    namespace fs = std::filesystem;
    const fs::path tmp = dir_ / "tmp" / "power1_average";
    {
      std::ofstream out(tmp);
      out << static_cast<long long>(std::llround(power_w(now_s()) * 1e6)) << "\n";  // µW, as hwmon
    }
    std::error_code ec;
    fs::rename(tmp, hwmon_root() / "hwmon2" / "device" / "power1_average", ec);
    if (ec) ADD_FAILURE() << "fixture: " << ec.message();
  }

  std::filesystem::path dir_;
  double mean_w_, amplitude_w_, period_s_;
  PowerClock clock_;
  bool ramp_ = false;
  double slope_w_per_s_ = 0.0, ramp_origin_s_ = 0.0;
  std::atomic<bool> stop_{false};
  std::thread writer_;
};

}  // namespace scaffold::test
