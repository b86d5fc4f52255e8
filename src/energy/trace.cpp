// PowerTrace and CounterTracker: integration, windows and totals over recorded samples.
#include "energy/trace.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "core/timer.hpp"

namespace scaffold::energy {

double monotonic_now_s() {
  return core::monotonic_s();
}  // one time base with the trainer

double wall_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// ------------------------------------------------------------------------------ counter

double CounterTracker::update(double raw_j) {
  if (std::isnan(raw_j) || !valid_) return energy_j();
  if (std::isnan(first_)) {
    first_ = previous_ = raw_j;
    return energy_j();
  }
  double delta = raw_j - previous_;
  if (delta < 0.0) {
    if (range_j_ > 0.0) {
      delta += range_j_;  // wrapped past the range back to 0
      ++wraps_;
    } else {
      valid_ = false;  // reset: what happened in between is unknown
      return energy_j();
    }
  }
  accumulated_j_ += delta;
  previous_ = raw_j;
  return energy_j();
}

double CounterTracker::energy_j() const {
  return (std::isnan(first_) || !valid_) ? kNaN : accumulated_j_;
}

// ------------------------------------------------------------------------------ trace

PowerTrace::PowerTrace(std::vector<SensorInfo> sensors) : sensors_(std::move(sensors)) {
  series_.reserve(sensors_.size());
  for (const auto& s : sensors_) {
    Series series;
    series.counter = CounterTracker(s.counter_range_j);
    series_.push_back(std::move(series));
  }
}

void PowerTrace::add(double t_s, double wall_s, const std::vector<SensorReading>& readings) {
  SCAFFOLD_CHECK(readings.size() == sensors_.size(), "one reading per sensor");
  SCAFFOLD_CHECK(t_s_.empty() || t_s >= t_s_.back(), "trace samples in time order");
  t_s_.push_back(t_s);
  wall_s_.push_back(wall_s);
  for (std::size_t i = 0; i < sensors_.size(); ++i) {
    SensorInfo& info = sensors_[i];
    Series& s = series_[i];
    const SensorReading& r = readings[i];
    bool failed = false;
    double shown_w = kNaN;
    if (info.has_counter) {
      if (std::isnan(r.counter_j) || info.counter_reset) {
        failed = true;
      } else {
        const double e = s.counter.update(r.counter_j);
        if (!s.counter.valid()) {
          info.counter_reset = true;
          failed = true;
        } else if (s.counter_t_s.empty() || t_s > s.counter_t_s.back()) {
          if (info.power_from_counter) {
            if (s.counter_t_s.empty()) {
              s.t_s.push_back(t_s);
              s.power_w.push_back(kNaN);  // no interval before the first reading
              s.cum_j.push_back(0.0);
            } else {
              shown_w = (e - s.counter_j.back()) / (t_s - s.counter_t_s.back());
              s.t_s.push_back(t_s);
              s.power_w.push_back(shown_w);
              s.cum_j.push_back(e);
            }
          }
          s.counter_t_s.push_back(t_s);
          s.counter_j.push_back(e);
        }
      }
    }
    if (!info.power_from_counter) {
      if (std::isnan(r.power_w)) {
        failed = true;
      } else {
        shown_w = r.power_w;
        const double cum = s.t_s.empty() ? 0.0
                                         : s.cum_j.back() + 0.5 * (s.power_w.back() + r.power_w) *
                                                                (t_s - s.t_s.back());
        s.t_s.push_back(t_s);
        s.power_w.push_back(r.power_w);
        s.cum_j.push_back(cum);
      }
    }
    if (failed) {
      info.failed = true;
      ++info.failed_reads;
    }
    power_rows_.push_back(shown_w);
  }
}

double PowerTrace::power_w(std::size_t sample, std::size_t sensor) const {
  return power_rows_[sample * sensors_.size() + sensor];
}

double PowerTrace::first_t_s() const {
  return t_s_.empty() ? kNaN : t_s_.front();
}
double PowerTrace::last_t_s() const {
  return t_s_.empty() ? kNaN : t_s_.back();
}

// Index k with t[k] <= x < t[k+1], for t.front() <= x < t.back().
static std::size_t segment_of(const std::vector<double>& t, double x) {
  return static_cast<std::size_t>(std::upper_bound(t.begin(), t.end(), x) - t.begin()) - 1;
}

double PowerTrace::interpolate(const std::vector<double>& t, const std::vector<double>& v,
                               double x) {
  if (t.empty()) return kNaN;
  if (x <= t.front()) return v.front();
  if (x >= t.back()) return v.back();
  const std::size_t k = segment_of(t, x);
  const double h = t[k + 1] - t[k];
  return v[k] + (v[k + 1] - v[k]) * (x - t[k]) / h;
}

// ∫ power from the series' first point to t (t clipped to the series' span).
double PowerTrace::integral_at(const Series& s, bool step, double t) const {
  const auto& T = s.t_s;
  if (T.empty()) return kNaN;
  if (t <= T.front()) return 0.0;
  if (t >= T.back()) return s.cum_j.back();
  const std::size_t k = segment_of(T, t);
  const double dt = t - T[k];
  if (step) return s.cum_j[k] + s.power_w[k + 1] * dt;
  const double slope = (s.power_w[k + 1] - s.power_w[k]) / (T[k + 1] - T[k]);
  return s.cum_j[k] + s.power_w[k] * dt + 0.5 * slope * dt * dt;
}

SensorWindow PowerTrace::sensor_window(std::size_t sensor, double t0_s, double t1_s) const {
  SensorWindow w;
  const SensorInfo& info = sensors_.at(sensor);
  const Series& s = series_[sensor];
  if (!(t1_s >= t0_s)) return w;  // also NaN bounds
  const bool step = info.power_from_counter;
  const auto& T = s.t_s;
  if (!T.empty() && t0_s <= T.back() && t1_s >= T.front()) {
    const double a = std::max(t0_s, T.front());
    const double b = std::min(t1_s, T.back());
    w.covered_s = b - a;
    w.integrated_j = integral_at(s, step, b) - integral_at(s, step, a);
    if (w.covered_s > 0.0) w.average_w = w.integrated_j / w.covered_s;
    const auto lo = std::lower_bound(T.begin(), T.end(), a);  // first point >= a
    const auto hi = std::upper_bound(T.begin(), T.end(), b);  // first point > b
    w.samples = static_cast<std::size_t>(hi - lo);
    double peak = -std::numeric_limits<double>::infinity();
    const auto at = [&](std::vector<double>::const_iterator it) {
      return s.power_w[static_cast<std::size_t>(it - T.begin())];
    };
    if (step) {
      // power_w[k] holds over (T[k-1], T[k]]: the intervals overlapping (a, b) are those ending
      // after a, up to the first one ending at or after b.
      if (b > a) {
        const auto last = std::lower_bound(T.begin(), T.end(), b);
        for (auto it = std::upper_bound(T.begin(), T.end(), a); it <= last && it != T.end(); ++it)
          if (!std::isnan(at(it))) peak = std::max(peak, at(it));
      }
    } else {
      for (auto it = lo; it != hi; ++it) peak = std::max(peak, at(it));
      peak = std::max({peak, interpolate(T, s.power_w, a), interpolate(T, s.power_w, b)});
    }
    if (std::isfinite(peak)) w.peak_w = peak;
  }
  const auto& C = s.counter_t_s;
  if (info.has_counter && !info.counter_reset && !C.empty() && t0_s <= C.back() &&
      t1_s >= C.front()) {
    const double a = std::max(t0_s, C.front());
    const double b = std::min(t1_s, C.back());
    w.counter_j = interpolate(C, s.counter_j, b) - interpolate(C, s.counter_j, a);
  }
  w.energy_j = std::isnan(w.counter_j) ? w.integrated_j : w.counter_j;
  return w;
}

WindowSummary PowerTrace::window(double t0_s, double t1_s) const {
  WindowSummary out;
  out.t0_s = t0_s;
  out.t1_s = t1_s;
  double sum_integrated = 0.0, sum_counter = 0.0;
  bool any_integrated = false, all_counters = true;
  for (std::size_t i = 0; i < sensors_.size(); ++i) {
    out.sensors.push_back(sensor_window(i, t0_s, t1_s));
    if (!sensors_[i].in_total) continue;
    const SensorWindow& w = out.sensors.back();
    ++out.total_sensors;
    if (!std::isnan(w.integrated_j)) {
      sum_integrated += w.integrated_j;
      any_integrated = true;
    }
    if (std::isnan(w.counter_j)) {
      all_counters = false;
    } else {
      sum_counter += w.counter_j;
    }
  }
  if (any_integrated) out.total_integrated_j = sum_integrated;
  if (out.total_sensors > 0 && all_counters) out.total_counter_j = sum_counter;
  out.total_from_counter = !std::isnan(out.total_counter_j);
  out.total_j = out.total_from_counter ? out.total_counter_j : out.total_integrated_j;
  return out;
}

double PowerTrace::energy_between_j(double t0_s, double t1_s) const {
  return window(t0_s, t1_s).total_j;
}

double PowerTrace::energy_between_j(std::size_t sensor, double t0_s, double t1_s) const {
  return sensor_window(sensor, t0_s, t1_s).energy_j;
}

double PowerTrace::average_power_w(std::size_t sensor, double t0_s, double t1_s) const {
  return sensor_window(sensor, t0_s, t1_s).average_w;
}

double PowerTrace::peak_power_w(std::size_t sensor, double t0_s, double t1_s) const {
  return sensor_window(sensor, t0_s, t1_s).peak_w;
}

}  // namespace scaffold::energy
