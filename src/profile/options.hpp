// Profiling switches read from the environment (docs/profiling.md): PROFILE_TORCH turns the Chrome
// trace on, PROFILE_TORCH_WAIT/_WARMUP/_ACTIVE set the schedule in training batches. Parsing is a
// pure function of a getenv-like callback so tests never touch the real environment. Deciding
// which rank profiles (the first rank of each node) is the caller's job; profiles_this_rank()
// helps.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace scaffold::profile {

// torch.profiler.schedule(wait, warmup, active, repeat=1), in training batches.
struct ProfileSchedule {
  int64_t wait = 1;    // PROFILE_TORCH_WAIT, >= 0
  int64_t warmup = 1;  // PROFILE_TORCH_WARMUP, >= 0
  int64_t active = 3;  // PROFILE_TORCH_ACTIVE, >= 1
};

struct ProfileOptions {
  bool enabled = false;  // PROFILE_TORCH is 1/true/on/yes (any case, spaces ignored)
  ProfileSchedule schedule;
  bool record_shapes = false;  // PROFILE_TORCH_RECORD_SHAPES (operator events only)
  bool with_stack = false;     // PROFILE_TORCH_WITH_STACK (operator events only)
};

// Same signature as std::getenv: the variable's value, or nullptr when it is unset.
using GetEnv = std::function<const char*(const char* name)>;

// True for 1/true/on/yes in any case with surrounding spaces ignored; false for anything else
// (0, off, "", "2", ...). This is the current README's rule, not older code's "anything but off".
bool env_flag_is_on(std::string_view value);

// Reads the PROFILE_TORCH* variables through `getenv`. The schedule and the two flags are read
// only when PROFILE_TORCH is on; an unset or empty schedule variable keeps its default. A value
// that is not a whole number in range is a core::Error naming the variable and the value.
ProfileOptions parse_profile_options(const GetEnv& getenv);
// parse_profile_options over the process environment.
ProfileOptions profile_options_from_env();

// Whether this rank writes a trace: profiling is on and it is the first rank on its node
// (`rank % ranks_per_node == 0`, i.e. local rank 0).
inline bool profiles_this_rank(const ProfileOptions& options, int local_rank) {
  return options.enabled && local_rank == 0;
}

}  // namespace scaffold::profile
