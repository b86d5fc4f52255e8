// PowerSampler: the sampling thread (absolute deadlines on steady_clock), marks and jitter.
#include "energy/sampler.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>

#include "core/log.hpp"

namespace scaffold::energy {

namespace {

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size()))) - 1;
  return sorted[std::min(k, sorted.size() - 1)];
}

}  // namespace

PowerSampler::PowerSampler(std::vector<OpenSource> sources, SamplerOptions options)
    : options_(options), sources_(std::move(sources)) {
  if (!(options_.interval_s > 0.0) || !std::isfinite(options_.interval_s))
    throw core::Error("power sampling interval must be a positive number of seconds, got " +
                      std::to_string(options_.interval_s));
  std::vector<SensorInfo> all;
  for (const auto& s : sources_) {
    SCAFFOLD_CHECK(s.source != nullptr, "an opened power source");
    first_sensor_.push_back(all.size());
    buffers_.emplace_back(s.sensors.size());
    all.insert(all.end(), s.sensors.begin(), s.sensors.end());
  }
  make_names_unique(all);
  select_total(all);
  source_warned_.assign(sources_.size(), false);
  sensor_warned_.assign(all.size(), false);
  readings_.resize(all.size());
  trace_ = PowerTrace(std::move(all));
}

PowerSampler::~PowerSampler() {
  try {
    stop();
  } catch (const std::exception& e) {
    LOG_ERROR("power sampler: {}", e.what());
  }
}

double PowerSampler::take_sample() {
  const double t_before = monotonic_now_s();
  const double wall_before = wall_now_s();
  for (std::size_t j = 0; j < sources_.size(); ++j) {
    auto& buffer = buffers_[j];
    std::fill(buffer.begin(), buffer.end(), SensorReading{});
    try {
      sources_[j].source->sample(buffer);
    } catch (const std::exception& e) {
      std::fill(buffer.begin(), buffer.end(), SensorReading{});
      if (!source_warned_[j]) {
        source_warned_[j] = true;
        LOG_WARN(
            "power source {} failed to sample ({}); its sensors are marked failed, sampling "
            "continues",
            sources_[j].source->method(), e.what());
      }
    }
    std::copy(buffer.begin(), buffer.end(),
              readings_.begin() + static_cast<std::ptrdiff_t>(first_sensor_[j]));
  }
  // The readings were taken between the two clock reads: stamp them in the middle.
  const double t_after = monotonic_now_s();
  const double t = 0.5 * (t_before + t_after);
  std::lock_guard<std::mutex> lock(data_mutex_);
  trace_.add(t, wall_before + (t - t_before), readings_);
  const auto& sensors = trace_.sensors();
  for (std::size_t i = 0; i < sensors.size(); ++i) {
    if (sensors[i].failed && !sensor_warned_[i]) {
      sensor_warned_[i] = true;
      LOG_WARN(
          "power sensor {} failed a read{}; marked failed, sampling continues", sensors[i].name,
          sensors[i].counter_reset ? " (its energy counter went backwards: counter not used)" : "");
    }
  }
  return t;
}

void PowerSampler::start() {
  {
    std::lock_guard<std::mutex> lock(control_mutex_);
    SCAFFOLD_CHECK(!started_, "PowerSampler::start is called once");
    started_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(sample_mutex_);
    sampling_ = true;
    take_sample();
  }
  thread_ = std::thread([this] { run(); });
}

void PowerSampler::run() {
  using clock = std::chrono::steady_clock;
  const auto interval = std::chrono::duration_cast<clock::duration>(
      std::chrono::duration<double>(options_.interval_s));
  auto deadline = clock::now() + interval;
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(control_mutex_);
        if (wake_.wait_until(lock, deadline, [this] { return stop_requested_; })) return;
      }
      const auto woke = clock::now();
      const double late_s = std::chrono::duration<double>(woke - deadline).count();
      {
        std::lock_guard<std::mutex> lock(sample_mutex_);
        take_sample();
      }
      std::size_t skipped = 0;
      deadline += interval;
      const auto now = clock::now();
      if (deadline <= now) {  // a sample overran: skip to the next deadline still ahead
        skipped = static_cast<std::size_t>((now - deadline) / interval) + 1;
        deadline += interval * static_cast<clock::rep>(skipped);
      }
      std::lock_guard<std::mutex> lock(data_mutex_);
      late_s_.push_back(late_s);
      missed_ += skipped;
    }
  } catch (const std::exception& e) {
    LOG_ERROR("power sampler thread stopped: {}", e.what());
  }
}

void PowerSampler::stop() {
  {
    std::lock_guard<std::mutex> lock(control_mutex_);
    if (!started_ || stopped_) return;
    stopped_ = true;
    stop_requested_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(sample_mutex_);
    take_sample();
    sampling_ = false;
  }
  for (auto& s : sources_) {
    try {
      s.source->finalize();
    } catch (const std::exception& e) {
      LOG_WARN("power source {}: finalize failed: {}", s.source->method(), e.what());
    }
  }
}

bool PowerSampler::running() const {
  return sampling_;
}

double PowerSampler::mark(const std::string& name) {
  std::lock_guard<std::mutex> sample_lock(sample_mutex_);
  const double t = sampling_ ? take_sample() : monotonic_now_s();
  std::lock_guard<std::mutex> lock(data_mutex_);
  marks_.push_back({name, t});
  return t;
}

std::vector<Mark> PowerSampler::marks() const {
  std::lock_guard<std::mutex> lock(data_mutex_);
  return marks_;
}

std::optional<double> PowerSampler::mark_time_s(const std::string& name) const {
  std::lock_guard<std::mutex> lock(data_mutex_);
  for (auto it = marks_.rbegin(); it != marks_.rend(); ++it)
    if (it->name == name) return it->t_s;
  return std::nullopt;
}

std::vector<SensorInfo> PowerSampler::sensors() const {
  std::lock_guard<std::mutex> lock(data_mutex_);
  return trace_.sensors();
}

double PowerSampler::energy_between_j(double t0_s, double t1_s) const {
  std::lock_guard<std::mutex> lock(data_mutex_);
  return trace_.energy_between_j(t0_s, t1_s);
}

double PowerSampler::energy_between_j(std::size_t sensor, double t0_s, double t1_s) const {
  std::lock_guard<std::mutex> lock(data_mutex_);
  return trace_.energy_between_j(sensor, t0_s, t1_s);
}

double PowerSampler::average_power_w(std::size_t sensor, double t0_s, double t1_s) const {
  std::lock_guard<std::mutex> lock(data_mutex_);
  return trace_.average_power_w(sensor, t0_s, t1_s);
}

double PowerSampler::peak_power_w(std::size_t sensor, double t0_s, double t1_s) const {
  std::lock_guard<std::mutex> lock(data_mutex_);
  return trace_.peak_power_w(sensor, t0_s, t1_s);
}

WindowSummary PowerSampler::window(double t0_s, double t1_s) const {
  std::lock_guard<std::mutex> lock(data_mutex_);
  return trace_.window(t0_s, t1_s);
}

WindowSummary PowerSampler::window(const std::string& from_mark, const std::string& to_mark) const {
  const auto t0 = mark_time_s(from_mark);
  const auto t1 = mark_time_s(to_mark);
  if (!t0 || !t1) {
    std::string known;
    for (const auto& m : marks()) known += (known.empty() ? "" : ", ") + m.name;
    throw core::Error("no energy mark named '" + (!t0 ? from_mark : to_mark) +
                      "' (marks so far: " + (known.empty() ? "none" : known) + ")");
  }
  return window(*t0, *t1);
}

WindowSummary PowerSampler::whole() const {
  std::lock_guard<std::mutex> lock(data_mutex_);
  return trace_.whole();
}

PowerTrace PowerSampler::trace() const {
  std::lock_guard<std::mutex> lock(data_mutex_);
  return trace_;
}

JitterStats PowerSampler::jitter() const {
  std::vector<double> late;
  JitterStats out;
  {
    std::lock_guard<std::mutex> lock(data_mutex_);
    late = late_s_;
    out.missed_deadlines = missed_;
  }
  out.scheduled_samples = late.size();
  if (late.empty()) return out;
  std::sort(late.begin(), late.end());
  double sum = 0.0;
  for (double x : late) sum += x;
  out.late_mean_s = sum / static_cast<double>(late.size());
  out.late_p50_s = percentile(late, 0.50);
  out.late_p99_s = percentile(late, 0.99);
  out.late_max_s = late.back();
  return out;
}

}  // namespace scaffold::energy
