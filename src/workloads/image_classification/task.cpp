#include "workloads/image_classification/task.hpp"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <cmath>
#include <mutex>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "nn/autocast.hpp"

// at::Context's TF32 switches arrived in LibTorch 1.7.
#if TORCH_VERSION_MAJOR > 1 || (TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR >= 7)
#define SCAFFOLD_HAS_TF32_SWITCHES 1
#else
#define SCAFFOLD_HAS_TF32_SWITCHES 0
#endif

namespace scaffold::imgcls {

std::string Tf32State::effect() const {
  if (!applies) return "none(" + reason + ")";
  if (cudnn && cublas) return "cudnn+cublas";
  if (cudnn) return "cudnn";
  if (cublas) return "cublas";
  return "off";
}

Tf32State apply_tf32(bool tf32, const std::string& precision, c10::Device device) {
  if (precision == "tf32" && !tf32)
    throw core::Error("precision: tf32 needs tf32: 1 (tf32: 0 turns TF32 off)");
  Tf32State s;
  s.requested = tf32;
  if (!device.is_cuda()) {
    s.reason = device.str();
    return s;
  }
#if SCAFFOLD_HAS_TF32_SWITCHES
  at::globalContext().setAllowTF32CuDNN(tf32);
  at::globalContext().setAllowTF32CuBLAS(tf32 && precision == "tf32");
  s.applies = true;
  s.cudnn = at::globalContext().allowTF32CuDNN();
  s.cublas = at::globalContext().allowTF32CuBLAS();
#else
  s.reason = "LibTorch < 1.7";
#endif
  return s;
}

DeviceSyntheticLabels::DeviceSyntheticLabels(int64_t count, int64_t num_classes, uint64_t seed,
                                             int64_t offset)
    : count_(count), num_classes_(num_classes), seed_(seed), offset_(offset) {}

uint64_t DeviceSyntheticLabels::key_of(int64_t example) const {
  return core::stream_key({seed_, 0x6465766963ULL, static_cast<uint64_t>(example)});
}

int64_t DeviceSyntheticLabels::image_seed(const std::string& id) const {
  constexpr const char* kPrefix = "synthetic_device:";
  if (id.rfind(kPrefix, 0) != 0)
    throw core::Error(fmt::format("'{}' is not a synthetic_device example", id));
  // 62 bits: a non-negative int64 for the generator.
  return static_cast<int64_t>(key_of(std::stoll(id.substr(std::string(kPrefix).size()))) >> 2);
}

data::Example DeviceSyntheticLabels::get(std::size_t index, uint64_t /*draw*/) const {
  const uint64_t key = key_of(offset_ + static_cast<int64_t>(index));
  core::Xoshiro256p rng(key);
  const auto label = static_cast<int64_t>(rng.below(static_cast<uint64_t>(num_classes_)));
  return {{at::scalar_tensor(label, at::kLong)},
          fmt::format("synthetic_device:{}", offset_ + static_cast<int64_t>(index))};
}

at::Tensor topk_correct(const at::Tensor& logits, const at::Tensor& labels, int64_t k) {
  const int64_t kk = std::min<int64_t>(k, logits.size(1));
  const at::Tensor top = std::get<1>(logits.topk(kk, /*dim=*/1));  // (B, k)
  return top.eq(labels.unsqueeze(1)).any(1).sum().to(at::kDouble);
}

std::vector<std::string> tf32_kernel_entries(const Tf32State& state) {
  return {fmt::format("tf32={}", state.requested ? 1 : 0), "tf32_effect=" + state.effect()};
}

ClassificationTask::ClassificationTask(ResNet model, const data::ExampleSource& train_set,
                                       const data::ExampleSource& val_set, c10::Device device,
                                       ClassificationTaskOptions options)
    : model_(std::move(model)),
      train_set_(train_set),
      val_set_(val_set),
      device_(device),
      options_(std::move(options)) {
  const std::string& p = options_.precision;
  if (p != "fp32" && p != "bf16" && p != "tf32" && p != "fp16")
    throw core::Error(fmt::format("precision: '{}' is not one of fp32, bf16, tf32, fp16", p));
  if ((p == "tf32" || p == "fp16") && !device_.is_cuda())
    throw core::Error(
        fmt::format("precision: {} needs a CUDA device (this run trains on {}); use fp32 or bf16",
                    p, device_.str()));
  if (options_.channels_last) set_memory_format(*model_, at::MemoryFormat::ChannelsLast);
}

std::pair<at::Tensor, at::Tensor> ClassificationTask::inputs(const data::Batch& batch) const {
  // Image sources give {image (B, 3, S, S), label (B)}; synthetic_device gives {label}.
  at::Tensor images;
  const at::Tensor labels = options_.synthetic_device ? batch.fields[0] : batch.fields[1];
  if (options_.synthetic_device) {
    // One generator draw per batch, seeded by the batch's first example: deterministic for a
    // given batch composition, and drawn where it is used. The seed follows from the example's
    // host-side id, so no step reads a device value.
    const auto& source = dynamic_cast<const DeviceSyntheticLabels&>(train_set_);
    const int64_t seed = source.image_seed(batch.ids.at(0));
    at::Generator gen = at::globalContext().defaultGenerator(device_);
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_current_seed(static_cast<uint64_t>(seed));
    }
    const int64_t b = batch.fields[0].size(0), s = options_.image_size;
    images = at::randn({b, 3, s, s}, gen, at::TensorOptions().device(device_));
  } else {
    images = batch.fields[0];
  }
  if (options_.channels_last) images = images.contiguous(at::MemoryFormat::ChannelsLast);
  return {images, labels};
}

at::Tensor ClassificationTask::logits(const at::Tensor& images) {
  nn::AutocastState s = nn::AutocastState::current().disabled();
  if (options_.precision == "bf16") {
    (device_.is_cuda() ? s.cuda_enabled : s.cpu_enabled) = true;
    (device_.is_cuda() ? s.cuda_dtype : s.cpu_dtype) = at::kBFloat16;
  } else if (options_.precision == "fp16") {
    s.cuda_enabled = true;
    s.cuda_dtype = at::kHalf;
  }
  nn::AutocastGuard amp(s);
  return model_->forward(images);
}

train::TrainForward ClassificationTask::train_forward(const data::Batch& batch) {
  const auto [images, labels] = inputs(batch);
  at::Tensor out;
  {
    SCAFFOLD_PROFILE_REGION(options_.profiler, "predict");
    out = logits(images).to(at::kFloat);  // (B, K)
  }
  SCAFFOLD_PROFILE_REGION(options_.profiler, "calculate_loss");
  const at::Tensor loss = at::cross_entropy_loss(out, labels);
  const double b = static_cast<double>(images.size(0));
  return {loss,
          at::stack({loss.detach().to(at::kDouble) * b, topk_correct(out.detach(), labels, 1)})};
}

at::Tensor ClassificationTask::validation_sums(const data::Batch& batch) {
  const auto [images, labels] = inputs(batch);
  const at::Tensor out = logits(images).to(at::kFloat);
  const at::Tensor loss = at::cross_entropy_loss(out, labels);
  const double b = static_cast<double>(images.size(0));
  return at::stack(
      {loss.to(at::kDouble) * b, topk_correct(out, labels, 1), topk_correct(out, labels, 5)});
}

void ClassificationTask::after_step() {
  at::autocast::clear_cache();
}

void ClassificationTask::after_validation() {
  at::autocast::clear_cache();
}

train::EpochMetrics ClassificationTask::epoch_metrics(int64_t epoch, const train::PassSums& train,
                                                      const train::PassSums& val) const {
  const double n_train = std::max(train.samples, 1.0), n_val = std::max(val.samples, 1.0);
  if (!std::isfinite(train.sums[0]) || !std::isfinite(val.sums[0]))
    throw core::Error(
        fmt::format("training diverged at epoch {}: training loss {}, validation loss {} (lower "
                    "learning_rate, or use fp32)",
                    epoch, train.sums[0] / n_train, val.sums[0] / n_val));
  train::EpochMetrics m;
  m.values = {{"train_loss", train.sums[0] / n_train},
              {"train_top1", train.sums[1] / n_train},
              {"val_loss", val.sums[0] / n_val},
              {"val_top1", val.sums[1] / n_val},
              {"val_top5", val.sums[2] / n_val}};
  m.stop_value = val.sums[1] / n_val;
  m.val_loss = val.sums[0] / n_val;
  return m;
}

}  // namespace scaffold::imgcls
