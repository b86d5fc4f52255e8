// The verdicts of this process's kernel probes, per shape, in one store that a checkpoint carries.
//
// Some kernel choices are measured, not ruled: oneDNN's sgemm against LibTorch's products (GPT),
// oneDNN's Winograd convolution against LibTorch's (ResNet), the FNO's DFT against its FFT. Each
// probe times both kernels the first time a shape comes, in this process, and keeps the winner.
// Two processes can reach different verdicts for the same shape (the two are often within the
// machine's noise), and the kernels round differently: a run resumed in a new process then drifts
// from the uninterrupted run in the 7th digit. The checkpoint stores every verdict (serialize), the
// resumed process restores them before its first step (restore), and every shape the first
// process met runs the kernel it ran there. Shapes first met after the checkpoint are probed
// afresh. docs/reliability.md, "Checkpoints and restarts".
//
// A key names the probe and the shape, as its system.json line starts (e.g. "gemm 1024x768 by
// 2304x768"), a verdict the kernel chosen ("onednn"). The store also keeps each measurement's line
// (system.json's kernel_probes, which the suite's driver writes for every workload). No tensor
// code; safe to call from any thread.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace scaffold::kernels {

// What a probe measured: each kernel's time and the kernel it chose.
struct ProbeTiming {
  std::string kernel;
  double ms = 0.0;
};
struct ProbeResult {
  std::string verdict;
  std::vector<ProbeTiming> timings;
};
// One probe this process ran. line() is its system.json kernel_probes line, "<key>: <kernel> <ms>
// ms, <kernel> <ms> ms -> <verdict>", e.g. "gemm 1024x768 by 768x768: y libtorch 4.10 ms, y onednn
// 3.20 ms, ... -> y=onednn dx=libtorch dw=native" (a timing's kernel may name what it timed, a
// verdict several choices); "<key> -> <verdict>" for a probe that chose without timing anything.
struct ProbeMeasurement {
  std::string key;
  ProbeResult result;
  std::string line() const;
};

class ProbeVerdicts {
 public:
  // The verdict for `key`: the stored one, else probe()'s, stored with its line. The lock is held
  // while probe() runs, so one thread measures a shape and the others wait for its verdict (a
  // probe must not ask the store again). Keys and verdicts are single lines without '\t'.
  std::string choose(const std::string& key, const std::function<ProbeResult()>& probe);

  // Every verdict as "key\tverdict" lines, sorted by key: what a checkpoint stores.
  std::string serialize() const;
  // Adds serialize()'s verdicts, replacing those of the same keys (a shape probed in this process
  // before the restore takes the checkpoint's kernel from now on). A line that is not
  // "key\tverdict" is a core::Error naming `source`, the line and what was expected; nothing is
  // restored then. Returns how many verdicts were restored.
  std::size_t restore(const std::string& text, const std::string& source);
  // system.json's kernel_probes lines of the restored verdicts, "<key> -> <verdict> (restored
  // from the checkpoint)", sorted by key.
  std::vector<std::string> restored_lines() const;
  // The probes this process ran, in the order they ran.
  std::vector<ProbeMeasurement> measurements() const;
  // system.json's kernel_probes: the measurements' lines, then restored_lines().
  std::vector<std::string> lines() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::string> verdicts_;
  std::set<std::string> restored_;  // keys of verdicts_ that came from restore()
  std::vector<ProbeMeasurement> measured_;
};

// This process's store.
ProbeVerdicts& probe_verdicts();

}  // namespace scaffold::kernels
