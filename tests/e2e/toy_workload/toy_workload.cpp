// The smallest possible fifth workload, built from the registry seam only (docs/architecture.md,
// "Adding a workload"): a linear regression with its own option struct and schema (on the config
// engine), its own WorkloadRun (the driver's hooks), its own per-epoch CSV and result table, and a
// main() that hands scaffold's command line the registry's workloads plus this one. Nothing in
// src/config, src/suite or src/cli knows it. test_toy_workload.cpp drives the resulting binary
// (scaffold_toy) as a user would: it trains, writes summary.json, appears in `report`, and stops
// cleanly on a signal.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/app.hpp"
#include "config/engine.hpp"
#include "config/schema_rules.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "report/epoch_log.hpp"
#include "report/record_table.hpp"
#include "suite/driver.hpp"
#include "train/loop.hpp"
#include "workloads/registry.hpp"

namespace scaffold::toy {

// y = 2 x0 - 3 x1 + 0.5 x2 + 1, learnt by a Linear(3, 1) with SGD.
struct ToyConfig {
  std::string base_run_dir = "runs";
  std::string job_name = "toy";
  std::string checkpoint_dir = "checkpoints";
  int64_t seed = 7;
  std::string device = "cpu";
  bool device_sharing = true;
  int checkpoint_interval = 1;
  int progress_timeout_s = 0;
  int epochs = 5;
  int samples = 64;
  int batch_size = 8;
  double learning_rate = 0.1;
  int step_delay_ms = 0;  // a pause per step, so a test can signal a run in flight
};

}  // namespace scaffold::toy

namespace scaffold::config {

SchemaT<toy::ToyConfig> build_schema(SchemaFor<toy::ToyConfig>) {
  using T = toy::ToyConfig;
  using rules::at_least_0;
  using rules::at_least_1;
  using rules::bind_key;
  SchemaT<T> s;
  s.command = "toy";
  s.keys = {
      rules::base_run_dir_key<T>(),
      rules::job_name_key<T>(),
      rules::checkpoint_dir_key<T>(),
      rules::seed_key<T>(),
      rules::device_key<T>(false),
      rules::device_sharing_key<T>(false),
      rules::checkpoint_interval_key<T>(),
      rules::progress_timeout_key<T>(false),
      bind_key("epochs", &T::epochs, "epochs", "an integer >= 1", at_least_1),
      bind_key("samples", &T::samples, "training examples", "an integer >= 1", at_least_1),
      bind_key("batch_size", &T::batch_size, "examples per step", "an integer >= 1", at_least_1),
      bind_key(
          "learning_rate", &T::learning_rate, "SGD's learning rate", "a number > 0",
          +[](const double& v) { return v > 0; }),
      bind_key("step_delay_ms", &T::step_delay_ms, "a pause per step (ms)", "an integer >= 0",
               at_least_0)};
  return s;
}

SCAFFOLD_CONFIG_STRUCT(toy::ToyConfig);

}  // namespace scaffold::config

namespace scaffold::toy {
namespace {

constexpr const char* kName = "toy";

// Example i: x from a seeded stream, y from the fixed line.
class LineSource : public data::ExampleSource {
 public:
  LineSource(int count, int offset) : count_(count), offset_(offset) {}
  std::size_t size() const override { return static_cast<std::size_t>(count_); }
  data::Example get(std::size_t index, uint64_t) const override {
    const double i = static_cast<double>(index) + offset_;
    const at::Tensor x = at::tensor(std::vector<float>{static_cast<float>(std::sin(1.3 * i)),
                                                       static_cast<float>(std::cos(0.7 * i)),
                                                       static_cast<float>(std::sin(0.31 * i))});
    const at::Tensor y = (2 * x[0] - 3 * x[1] + 0.5 * x[2] + 1).reshape({1});
    return {{x, y}, std::to_string(index)};
  }

 private:
  int count_, offset_;
};

class LineTask : public train::TrainingTask {
 public:
  LineTask(const LineSource& train, const LineSource& val) : train_(train), val_(val) {}
  torch::nn::Module& module() override { return *linear_; }
  const data::ExampleSource& training_set() const override { return train_; }
  const data::ExampleSource& validation_set() const override { return val_; }
  std::vector<std::string> training_sum_names() const override { return {"squared_error"}; }
  std::vector<std::string> validation_sum_names() const override { return {"squared_error"}; }
  train::TrainForward train_forward(const data::Batch& b) override {
    const at::Tensor error = linear_->forward(b.fields[0]) - b.fields[1];
    const at::Tensor loss = error.pow(2).mean();
    return {loss, error.detach().pow(2).sum().reshape({1})};
  }
  at::Tensor validation_sums(const data::Batch& b) override {
    return (linear_->forward(b.fields[0]) - b.fields[1]).pow(2).sum().reshape({1});
  }
  train::EpochMetrics epoch_metrics(int64_t, const train::PassSums& train,
                                    const train::PassSums& val) const override {
    train::EpochMetrics m;
    const double train_mse = train.sums[0] / std::max(train.samples, 1.0);
    const double val_mse = val.sums[0] / std::max(val.samples, 1.0);
    m.values = {{"train_mse", train_mse}, {"val_mse", val_mse}};
    m.stop_value = -val_mse;
    m.val_loss = val_mse;
    return m;
  }

 private:
  const LineSource& train_;
  const LineSource& val_;
  torch::nn::Linear linear_{3, 1};
};

struct Row {
  int64_t epoch = 0;
  double train_mse = 0, val_mse = 0, seconds = 0;
};
// toy_stats.csv, declared once: header, lines and the strict reader follow.
const report::StepCsvColumns<Row>& toy_columns() {
  using report::NumberRange;
  static const report::StepCsvColumns<Row> columns(
      {report::integer_column("epoch", &Row::epoch, 1),
       report::number_column("train_mse", &Row::train_mse, NumberRange::kNotNegative),
       report::number_column("val_mse", &Row::val_mse, NumberRange::kNotNegative),
       report::number_column("seconds", &Row::seconds, NumberRange::kFinite)});
  return columns;
}

class ToyRun : public suite::WorkloadRun {
 public:
  explicit ToyRun(const ToyConfig& cfg) : cfg_(cfg) {}
  void layout(suite::RunEnv&) override {}
  core::MemoryEstimate memory_estimate(const suite::RunEnv&) const override { return {}; }
  void prepare_data(suite::RunEnv&) override {
    train_ = std::make_unique<LineSource>(cfg_.samples, 0);
    val_ = std::make_unique<LineSource>(16, cfg_.samples);
  }
  void build(suite::RunEnv& env) override {
    torch::manual_seed(static_cast<uint64_t>(cfg_.seed));
    task_ = std::make_unique<SlowTask>(*train_, *val_);
    train::LoopOptions lo;
    lo.local_batch_size = cfg_.batch_size;
    lo.max_epochs = cfg_.epochs;
    const double lr = cfg_.learning_rate;
    lo.make_optimizer = [lr](const std::vector<at::Tensor>& p) {
      return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(lr));
    };
    lo.lr_after = [lr](int64_t) { return lr; };
    lo.checkpoint_interval = cfg_.checkpoint_interval;
    lo.checkpoint_dir = env.run_dir / cfg_.checkpoint_dir;
    lo.seed = static_cast<uint64_t>(cfg_.seed);
    lo.loader_workers = 0;
    task_->delay_ms = cfg_.step_delay_ms;
    const dist::ProcessGrid grid(env.comm.size(), env.comm.rank(), {1}, {2});
    loop_ = std::make_unique<train::TrainingLoop>(*task_, std::move(lo), env.device, env.comm, grid,
                                                  train::LoopParallelism{});
    log_ = std::make_unique<report::EpochLog<Row>>(env.run_dir / "toy_stats.csv", toy_columns());
  }
  train::TrainingLoop* loop() override { return loop_.get(); }
  void resume_rows(suite::RunEnv&, const train::TrainCounters& start) override {
    log_->resume([&](const Row& r) { return r.epoch <= start.epoch; });
  }
  void on_epoch(suite::RunEnv& env, const train::LoopEpoch& e) override {
    LOG_INFO("toy epoch {}: val_mse {:.5f}", e.epoch, e.metrics.values[1].second);
    if (env.comm.rank() == 0)
      log_->append({e.epoch, e.metrics.values[0].second, e.metrics.values[1].second, e.duration_s});
  }
  bool finish(suite::RunEnv&, const train::LoopResult& result, const suite::EnergyResult&,
              report::RunRecord& rec) override {
    const auto& rows = log_->rows();
    rec.global_batch = rec.local_batch = cfg_.batch_size;
    rec.precision = "fp32";
    if (rows.empty()) return false;
    double seconds = 0;
    for (const Row& r : rows) seconds += r.seconds;
    rec.epochs = static_cast<int64_t>(rows.size());
    rec.time_s = seconds;
    rec.counters = {{"val_mse", rows.back().val_mse, "", "validation mean squared error"},
                    {"first_val_mse", rows.front().val_mse, "", "after the first epoch"},
                    {"median_step_s", core::median(result.step_times_s), "s", "median step"}};
    return true;
  }

 private:
  ToyConfig cfg_;
  std::unique_ptr<LineSource> train_, val_;
  struct SlowTask : LineTask {
    using LineTask::LineTask;
    int delay_ms = 0;
    train::TrainForward train_forward(const data::Batch& b) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      return LineTask::train_forward(b);
    }
  };
  std::unique_ptr<SlowTask> task_;
  std::unique_ptr<train::TrainingLoop> loop_;
  std::unique_ptr<report::EpochLog<Row>> log_;
};

std::unique_ptr<suite::WorkloadRun> start(const ToyConfig& cfg, const cli::WorkloadArgs&) {
  return std::make_unique<ToyRun>(cfg);
}

report::WorkloadTable toy_table() {
  report::WorkloadTable t;
  t.workload = kName;
  t.columns = {{"Run", [](const report::RunRecord& r) { return r.run; }, report::Align::kLeft},
               {"Epochs", [](const report::RunRecord& r) { return std::to_string(r.epochs); }},
               {"val_mse", [](const report::RunRecord& r) {
                  return report::fixed_text(report::counter_value(r, "val_mse"), 6);
                }}};
  return t;
}

}  // namespace

suite::Workload toy_workload() {
  return suite::make_workload<ToyConfig>(kName, "a linear regression (test workload)", start,
                                         toy_table());
}

}  // namespace scaffold::toy

int main(int argc, char** argv) {
  using namespace scaffold;
  std::vector<suite::Workload> list = workloads::suite_workloads();
  list.push_back(toy::toy_workload());
  return cli::run_scaffold(argc, argv, list, workloads::workload_tools());
}
