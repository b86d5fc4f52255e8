#include "kernels/probe_verdicts.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iterator>
#include <utility>

#include "core/error.hpp"

namespace scaffold::kernels {

namespace {

bool single_field(const std::string& s) {
  return !s.empty() && s.find_first_of("\t\n") == std::string::npos;
}

}  // namespace

std::string ProbeMeasurement::line() const {
  std::vector<std::string> times;
  times.reserve(result.timings.size());
  for (const ProbeTiming& t : result.timings)
    times.push_back(fmt::format("{} {:.2f} ms", t.kernel, t.ms));
  if (times.empty()) return key + " -> " + result.verdict;  // chosen without measuring
  return fmt::format("{}: {} -> {}", key, fmt::join(times, ", "), result.verdict);
}

std::string ProbeVerdicts::choose(const std::string& key,
                                  const std::function<ProbeResult()>& probe) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = verdicts_.find(key); it != verdicts_.end()) return it->second;
  ProbeResult result = probe();
  if (!single_field(key) || !single_field(result.verdict))
    throw core::Error("kernel probe: the key '" + key + "' or its verdict '" + result.verdict +
                      "' is empty or holds a tab or newline");
  verdicts_.emplace(key, result.verdict);
  std::string verdict = result.verdict;
  measured_.push_back(ProbeMeasurement{key, std::move(result)});
  return verdict;
}

std::string ProbeVerdicts::serialize() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::string text;
  for (const auto& [key, verdict] : verdicts_)
    text.append(key).append("\t").append(verdict) += '\n';
  return text;
}

std::size_t ProbeVerdicts::restore(const std::string& text, const std::string& source) {
  std::map<std::string, std::string> parsed;
  std::size_t line_no = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    const std::size_t tab = line.find('\t');
    std::string key = tab == std::string::npos ? std::string() : line.substr(0, tab);
    std::string verdict = tab == std::string::npos ? std::string() : line.substr(tab + 1);
    if (!single_field(key) || !single_field(verdict))
      throw core::Error(
          fmt::format("{}: kernel verdict line {} is '{}', expected '<probe and "
                      "shape><TAB><kernel>'",
                      source, line_no, line));
    parsed[std::move(key)] = std::move(verdict);
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, verdict] : parsed) {
    verdicts_[key] = verdict;
    restored_.insert(key);
  }
  return parsed.size();
}

std::vector<std::string> ProbeVerdicts::restored_lines() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> lines;
  for (const std::string& key : restored_)
    lines.push_back(key + " -> " + verdicts_.at(key) + " (restored from the checkpoint)");
  return lines;
}

std::vector<ProbeMeasurement> ProbeVerdicts::measurements() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return measured_;
}

std::vector<std::string> ProbeVerdicts::lines() const {
  std::vector<std::string> all;
  for (const ProbeMeasurement& m : measurements()) all.push_back(m.line());
  std::vector<std::string> restored = restored_lines();
  all.insert(all.end(), std::make_move_iterator(restored.begin()),
             std::make_move_iterator(restored.end()));
  return all;
}

ProbeVerdicts& probe_verdicts() {
  static ProbeVerdicts store;
  return store;
}

}  // namespace scaffold::kernels
