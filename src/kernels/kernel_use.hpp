// What ran: for each op with a choice of kernels, how many calls each kernel took in this process.
// The kernel a run chooses (a config key resolved before the model is built) is not always the
// one that runs: a kernel that cannot take an input (another dtype, layout or device) hands it to
// the next one, and some choices are a policy by shape (Winograd where it pays, oneDNN for the
// rest). The model's call sites count here; the run writes the counts into system.json
// (kernels_run) when training ends, and the first call that leaves an op's chosen kernels is
// logged once, with its reason. No tensor code: a tally of names, safe to call from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace scaffold::kernels {

class KernelUse {
 public:
  // The kernels `op` was chosen to run (e.g. conv: {"winograd", "onednn"}): any other kernel that
  // runs it is a fallback.
  void chose(std::string_view op, std::vector<std::string> kernels);
  // One call of `op` ran `kernel`. A kernel outside the op's chosen ones is logged the first time
  // (naming `why` when given) and remembered in fallbacks().
  void ran(std::string_view op, std::string_view kernel, std::string_view why = {});

  struct Count {
    std::string op;
    std::string kernel;
    int64_t calls = 0;
  };
  // Every (op, kernel) that ran, in the order each first ran.
  std::vector<Count> counts() const;
  // Each op that ran, "<op>=<kernel> x<calls>[, <kernel> x<calls>...]", ops in the order they
  // first ran: system.json's kernels_run, e.g. "conv=winograd x180, onednn x60".
  std::vector<std::string> summary() const;
  // One line per fallback (op, kernel) seen, "<op>: <kernel> instead of <chosen> (<why>)".
  std::vector<std::string> fallbacks() const;

 private:
  struct Op {
    std::string name;
    std::vector<std::string> chosen;
    bool chosen_set = false;
  };
  Op& op_entry(std::string_view name);  // under mutex_

  mutable std::mutex mutex_;
  std::vector<Op> ops_;
  std::vector<Count> counts_;
  std::vector<std::string> fallbacks_;
};

}  // namespace scaffold::kernels
