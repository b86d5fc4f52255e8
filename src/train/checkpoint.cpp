#include "train/checkpoint.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <sstream>
#include <string_view>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "kernels/probe_verdicts.hpp"
#include "train/checkpoint_envelope.hpp"

namespace scaffold::train {
namespace {

constexpr int64_t kCheckpointVersion = 1;

void put(torch::serialize::OutputArchive& a, const char* key, double v) {
  a.write(key, at::scalar_tensor(v, at::kDouble));
}
void put(torch::serialize::OutputArchive& a, const char* key, int64_t v) {
  a.write(key, at::scalar_tensor(v, at::kLong));
}
double get_double(torch::serialize::InputArchive& a, const char* key) {
  at::Tensor t;
  a.read(key, t);
  return t.item<double>();
}
int64_t get_int(torch::serialize::InputArchive& a, const char* key) {
  at::Tensor t;
  a.read(key, t);
  return t.item<int64_t>();
}
// Keys added after version 1 was written: absent in older files, which keep `fallback`.
template <typename T>
T get_optional(torch::serialize::InputArchive& a, const char* key, T fallback) {
  at::Tensor t;
  return a.try_read(key, t) ? t.item<T>() : fallback;
}

// LibTorch's Module::load adopts the stored tensors' shapes, so a checkpoint of another U-Net
// (say, another unet_base_channels) would load silently. Compare every parameter and buffer first.
void check_shapes(torch::serialize::InputArchive& archive, const torch::nn::Module& module,
                  const std::string& prefix, const std::string& source) {
  auto check = [&](const std::string& name, const at::Tensor& mine, bool is_buffer) {
    at::Tensor stored;
    if (!archive.try_read(name, stored, is_buffer))
      throw CheckpointMismatch(source,
                               "checkpoint has no " + prefix + name + ": it is of another model");
    if (stored.sizes() != mine.sizes() || stored.scalar_type() != mine.scalar_type())
      throw CheckpointMismatch(source,
                               c10::str(prefix, name, " is ", stored.scalar_type(), stored.sizes(),
                                        " in the checkpoint but ", mine.scalar_type(), mine.sizes(),
                                        " in this model (was the model configuration changed?)"));
  };
  for (const auto& p : module.named_parameters(/*recurse=*/false)) check(p.key(), p.value(), false);
  for (const auto& b : module.named_buffers(/*recurse=*/false)) check(b.key(), b.value(), true);
  for (const auto& child : module.named_children()) {
    torch::serialize::InputArchive child_archive;
    if (!archive.try_read(child.key(), child_archive))
      throw CheckpointMismatch(
          source, "checkpoint has no module " + prefix + child.key() + ": it is of another model");
    check_shapes(child_archive, *child.value(), prefix + child.key() + ".", source);
  }
}

// The archive inside `bytes` after checking its envelope (checkpoint_envelope.hpp); throws
// FileError, or CheckpointMismatch for an older scaffold's bare archive (not damage).
std::string_view open_envelope(const std::string& bytes, const std::string& source) {
  const OpenedEnvelope e = open_checkpoint_envelope(bytes, source);
  if (!e.bare_archive) return e.archive;
  // A bare archive: an older scaffold's checkpoint (intact, not this format) or a damaged or
  // foreign one. Only the first is not for setting aside.
  bool older_scaffold = false;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(bytes.data(), bytes.size());
    at::Tensor version;
    older_scaffold = archive.try_read("version", version);
  } catch (const std::exception&) {
  }
  if (older_scaffold)
    throw CheckpointMismatch(source,
                             "written by an older scaffold version, without a digest; resume "
                             "it with that version, or start a new run");
  throw core::FileError(source,
                        "not a scaffold checkpoint (a bare archive without its header line)");
}

}  // namespace

std::string serialize_state(torch::nn::Module& model, const torch::optim::Optimizer& optimizer,
                            const TrainCounters& c) {
  torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
  model.save(model_archive);
  optimizer.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  put(archive, "version", kCheckpointVersion);
  put(archive, "epoch", c.epoch);
  put(archive, "total_optimizer_steps", c.total_optimizer_steps);
  put(archive, "stop_value", c.stop_value);
  put(archive, "val_loss_avg", c.val_loss_avg);
  put(archive, "best_val_loss", c.best_val_loss);
  put(archive, "loss_scale", c.loss_scale);
  put(archive, "loss_scale_good_steps", c.loss_scale_good_steps);
  put(archive, "loss_scale_hysteresis_left", c.loss_scale_hysteresis_left);
  archive.write("rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  // The kernel probes' verdicts (kernels/probe_verdicts.hpp): a resumed run runs the kernels the
  // first process chose, so its losses are the uninterrupted run's.
  archive.write("kernel_verdicts", c10::IValue(kernels::probe_verdicts().serialize()));
  std::ostringstream out;
  archive.save_to(out);
  return checkpoint_envelope(out.str());
}

TrainCounters deserialize_state(const std::string& bytes, const std::string& source,
                                torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                bool restore_kernel_verdicts) {
  try {
    torch::serialize::InputArchive archive, model_archive, optimizer_archive;
    const std::string_view payload = open_envelope(bytes, source);
    archive.load_from(payload.data(), payload.size());
    if (get_int(archive, "version") != kCheckpointVersion)
      throw CheckpointMismatch(source, "checkpoint format version differs from this scaffold's");
    archive.read("model", model_archive);
    archive.read("optimizer", optimizer_archive);
    check_shapes(model_archive, model, "", source);
    model.load(model_archive);
    try {
      optimizer.load(optimizer_archive);
    } catch (const c10::Error& e) {  // the file passed its digest: another optimiser's state
      throw CheckpointMismatch(source,
                               std::string("its optimiser state does not fit this optimizer "
                                           "(was the optimizer changed?): ") +
                                   e.what_without_backtrace());
    }
    TrainCounters c;
    c.epoch = get_int(archive, "epoch");
    c.total_optimizer_steps = get_int(archive, "total_optimizer_steps");
    // Checkpoints written before the loop served every workload name it val_dice.
    at::Tensor stop_value;
    c.stop_value = archive.try_read("stop_value", stop_value) ? stop_value.item<double>()
                                                              : get_double(archive, "val_dice");
    c.val_loss_avg = get_double(archive, "val_loss_avg");
    c.best_val_loss = get_double(archive, "best_val_loss");
    c.loss_scale = get_optional<double>(archive, "loss_scale", 0.0);
    c.loss_scale_good_steps = get_optional<int64_t>(archive, "loss_scale_good_steps", 0);
    c.loss_scale_hysteresis_left = get_optional<int64_t>(archive, "loss_scale_hysteresis_left", 0);
    at::Tensor rng;
    archive.read("rng_cpu", rng);
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(rng);
    // Absent in checkpoints written before the verdicts were kept: their shapes are probed again.
    c10::IValue verdicts;
    if (restore_kernel_verdicts && archive.try_read("kernel_verdicts", verdicts)) {
      if (!verdicts.isString()) throw core::FileError(source, "kernel_verdicts is not text");
      kernels::probe_verdicts().restore(verdicts.toStringRef(), source);
    }
    return c;
  } catch (const core::Error&) {
    throw;
  } catch (const c10::Error& e) {  // LibTorch's text without its 25-frame stack trace
    throw core::FileError(
        source, std::string("not a readable scaffold checkpoint: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw core::FileError(source, std::string("not a readable scaffold checkpoint: ") + e.what());
  }
}

void save_checkpoint(const std::filesystem::path& file, torch::nn::Module& model,
                     const torch::optim::Optimizer& optimizer, const TrainCounters& counters) {
  core::create_directories(file.parent_path());
  core::write_file_atomic(file, serialize_state(model, optimizer, counters));
}

TrainCounters load_checkpoint(const std::filesystem::path& file, torch::nn::Module& model,
                              torch::optim::Optimizer& optimizer) {
  return deserialize_state(core::read_file(file), file.string(), model, optimizer,
                           /*restore_kernel_verdicts=*/true);
}

void CheckpointWriter::write(const std::filesystem::path& file, std::string bytes) {
  wait();
  auto job = [file, bytes = std::move(bytes)] {
    core::create_directories(file.parent_path());
    core::write_file_atomic(file, bytes);
  };
  if (!background_) {
    job();
    return;
  }
  thread_ = std::thread([this, job = std::move(job)] {
    try {
      job();
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void CheckpointWriter::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

CheckpointWriter::~CheckpointWriter() {
  try {
    wait();
  } catch (const std::exception& e) {
    LOG_ERROR("background checkpoint write failed: {}", e.what());
  }
}

}  // namespace scaffold::train
