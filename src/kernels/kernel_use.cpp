// KernelUse: the tally of kernel_use.hpp, and the one log line per fallback.
#include "kernels/kernel_use.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/log.hpp"

namespace scaffold::kernels {

KernelUse::Op& KernelUse::op_entry(std::string_view name) {
  const auto it =
      std::find_if(ops_.begin(), ops_.end(), [&](const Op& o) { return o.name == name; });
  if (it != ops_.end()) return *it;
  ops_.push_back(Op{std::string(name), {}, false});
  return ops_.back();
}

void KernelUse::chose(std::string_view op, std::vector<std::string> kernels) {
  const std::lock_guard<std::mutex> lock(mutex_);
  Op& o = op_entry(op);
  o.chosen = std::move(kernels);
  o.chosen_set = true;
}

void KernelUse::ran(std::string_view op, std::string_view kernel, std::string_view why) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = std::find_if(counts_.begin(), counts_.end(),
                               [&](const Count& c) { return c.op == op && c.kernel == kernel; });
  if (it != counts_.end()) {
    ++it->calls;
    return;
  }
  counts_.push_back(Count{std::string(op), std::string(kernel), 1});
  // The first call of this (op, kernel): a fallback when the op's choice does not include it.
  const Op& o = op_entry(op);
  if (!o.chosen_set || std::find(o.chosen.begin(), o.chosen.end(), kernel) != o.chosen.end())
    return;
  std::string line = fmt::format("{}: {} instead of {}", op, kernel, fmt::join(o.chosen, "/"));
  if (!why.empty()) line += fmt::format(" ({})", why);
  LOG_INFO("kernel fallback, {} (logged once; system.json kernels_run counts the calls)", line);
  fallbacks_.push_back(std::move(line));
}

std::vector<KernelUse::Count> KernelUse::counts() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

std::vector<std::string> KernelUse::summary() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> ops;  // in first-run order
  for (const Count& c : counts_)
    if (std::find(ops.begin(), ops.end(), c.op) == ops.end()) ops.push_back(c.op);
  std::vector<std::string> lines;
  for (const std::string& op : ops) {
    std::vector<std::string> parts;
    for (const Count& c : counts_)
      if (c.op == op) parts.push_back(fmt::format("{} x{}", c.kernel, c.calls));
    lines.push_back(fmt::format("{}={}", op, fmt::join(parts, ", ")));
  }
  return lines;
}

std::vector<std::string> KernelUse::fallbacks() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return fallbacks_;
}

}  // namespace scaffold::kernels
