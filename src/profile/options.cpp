#include "profile/options.hpp"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <string>

#include "core/error.hpp"

namespace scaffold::profile {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool env_flag(const GetEnv& getenv, const char* name) {
  const char* value = getenv(name);
  return value != nullptr && env_flag_is_on(value);
}

// An unset or blank variable keeps `fallback`; anything else must be a whole number >= minimum.
int64_t env_count(const GetEnv& getenv, const char* name, int64_t fallback, int64_t minimum) {
  const char* raw = getenv(name);
  if (raw == nullptr) return fallback;
  const std::string_view text = trim(raw);
  if (text.empty()) return fallback;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < minimum)
    throw core::Error(std::string(name) + "='" + raw +
                      "' is not valid: expected a whole number of " +
                      "training batches >= " + std::to_string(minimum));
  return value;
}

}  // namespace

bool env_flag_is_on(std::string_view value) {
  std::string lower(trim(value));
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "1" || lower == "true" || lower == "on" || lower == "yes";
}

ProfileOptions parse_profile_options(const GetEnv& getenv) {
  ProfileOptions options;
  options.enabled = env_flag(getenv, "PROFILE_TORCH");
  if (!options.enabled) return options;
  const ProfileSchedule defaults;
  // torch.profiler.schedule's own limits: wait and warmup may be 0, active must be positive.
  options.schedule.wait = env_count(getenv, "PROFILE_TORCH_WAIT", defaults.wait, 0);
  options.schedule.warmup = env_count(getenv, "PROFILE_TORCH_WARMUP", defaults.warmup, 0);
  options.schedule.active = env_count(getenv, "PROFILE_TORCH_ACTIVE", defaults.active, 1);
  options.record_shapes = env_flag(getenv, "PROFILE_TORCH_RECORD_SHAPES");
  options.with_stack = env_flag(getenv, "PROFILE_TORCH_WITH_STACK");
  return options;
}

ProfileOptions profile_options_from_env() {
  return parse_profile_options([](const char* name) { return std::getenv(name); });
}

}  // namespace scaffold::profile
