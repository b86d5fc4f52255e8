#include "suite/phases.hpp"

#include <fmt/format.h>

namespace scaffold::suite {

PhaseDriver::Scope::Scope(PhaseDriver& d, const char* n)
    : driver(d), name(n), region(d.profiler_, n), start_mono_s(core::monotonic_s()) {}

PhaseDriver::Scope::~Scope() {
  const double end = core::monotonic_s();
  driver.phases_.push_back({name, end - start_mono_s, start_mono_s, end});
  if (driver.energy_) driver.energy_->add_phase(name, start_mono_s, end);
}

double PhaseDriver::seconds(const std::string& name) const {
  double s = 0.0;
  for (const PhaseTime& p : phases_)
    if (p.name == name) s += p.seconds;
  return s;
}

std::string PhaseDriver::summary() const {
  std::string out;
  for (const PhaseTime& p : phases_)
    out += fmt::format("{}{} {:.2f} s", out.empty() ? "" : ", ", p.name, p.seconds);
  return out;
}

}  // namespace scaffold::suite
