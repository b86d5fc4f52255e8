// Checkpoints (docs/benchmark.md): model, optimiser and the training counters in one LibTorch
// archive, written atomically. There is no scheduler or sampler state to save: the learning rate
// is a closed form of the epoch, and the data order is keyed by (seed, epoch). The CPU generator's
// state is saved anyway, so nothing random added later is lost on restart.
// Each archive is preceded by one line carrying the SHA-256 and length of the archive, checked
// before LibTorch reads a byte of it, so flipped bytes are a refused file, not corrupt weights.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "train/loop_result.hpp"

namespace scaffold::train {

// In-memory form, used for warm-up snapshots as well as files.
std::string serialize_state(torch::nn::Module& model, const torch::optim::Optimizer& optimizer,
                            const TrainCounters& counters);
// Loads into existing objects (same architecture and optimiser); `source` names it in errors.
// restore_kernel_verdicts: also adopt the kernel probes' verdicts stored with the state
// (kernels/probe_verdicts.hpp), as a resume from a file does; an in-process snapshot does not.
TrainCounters deserialize_state(const std::string& bytes, const std::string& source,
                                torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                bool restore_kernel_verdicts = false);

// A checkpoint that is intact but does not fit the model or optimiser of this command (another
// unet_base_channels, another optimizer): the command is wrong, not the file, so a restart must
// not set the file aside as corrupt.
class CheckpointMismatch : public core::FileError {
 public:
  using core::FileError::FileError;
};

void save_checkpoint(const std::filesystem::path& file, torch::nn::Module& model,
                     const torch::optim::Optimizer& optimizer, const TrainCounters& counters);
// Throws core::FileError naming the file when it is missing, truncated, fails its digest or is
// not a checkpoint; CheckpointMismatch when it is intact but of another model or optimiser.
// Restores the kernel verdicts stored in it.
TrainCounters load_checkpoint(const std::filesystem::path& file, torch::nn::Module& model,
                              torch::optim::Optimizer& optimizer);

// Writes checkpoint files (atomically, creating the folder), on a background thread when asked:
// ScaFFold's async_save. The caller serialises the state first (serialize_state: a CPU copy taken
// at once, so training may change the model afterwards); only the file write overlaps the next
// epoch. Writes stay in order: each waits for the one before. wait() rethrows the error of a
// failed background write (a core::FileError naming the file).
class CheckpointWriter {
 public:
  explicit CheckpointWriter(bool background = false) : background_(background) {}
  ~CheckpointWriter();  // waits for a write in flight; its error, if any, is logged
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void write(const std::filesystem::path& file, std::string bytes);
  void wait();
  bool background() const { return background_; }

 private:
  bool background_;
  std::thread thread_;
  std::exception_ptr error_;
};

}  // namespace scaffold::train
