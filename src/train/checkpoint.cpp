#include "train/checkpoint.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <sstream>

#include "core/error.hpp"
#include "core/fs.hpp"

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
  put(archive, "val_dice", c.val_dice);
  put(archive, "val_loss_avg", c.val_loss_avg);
  put(archive, "best_val_loss", c.best_val_loss);
  archive.write("rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

TrainCounters deserialize_state(const std::string& bytes, const std::string& source,
                                torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  try {
    torch::serialize::InputArchive archive, model_archive, optimizer_archive;
    archive.load_from(bytes.data(), bytes.size());
    if (get_int(archive, "version") != kCheckpointVersion)
      throw core::FileError(source, "checkpoint format version differs from this scaffold's");
    archive.read("model", model_archive);
    archive.read("optimizer", optimizer_archive);
    model.load(model_archive);
    optimizer.load(optimizer_archive);
    TrainCounters c;
    c.epoch = get_int(archive, "epoch");
    c.total_optimizer_steps = get_int(archive, "total_optimizer_steps");
    c.val_dice = get_double(archive, "val_dice");
    c.val_loss_avg = get_double(archive, "val_loss_avg");
    c.best_val_loss = get_double(archive, "best_val_loss");
    at::Tensor rng;
    archive.read("rng_cpu", rng);
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(rng);
    return c;
  } catch (const core::Error&) {
    throw;
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
  return deserialize_state(core::read_file(file), file.string(), model, optimizer);
}

}  // namespace scaffold::train
