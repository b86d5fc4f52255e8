// The LibTorch bridge: operator events appear only for the active batches, on the training
// thread's track and on the trace's clock (inside the scaffold region that ran them).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "profile/profiler.hpp"
#include "profile/torch_ops.hpp"
#include "test_util.hpp"

namespace scaffold::profile {
namespace {

TEST(TorchOperators, OnlyActiveBatchesInsideTheirRegions) {
  test::TempDir dir;
  ProfileOptions options;
  options.enabled = true;
  options.schedule = {1, 1, 2};
  options.record_shapes = true;
  Profiler profiler(true, options.schedule);
  record_torch_operators(profiler, options);

  const torch::Tensor w = torch::randn({32, 32}, torch::requires_grad());
  {
    SCAFFOLD_PROFILE_REGION(&profiler, "init_model");
    (void)torch::relu(w);  // Setup: regions record, operators do not
  }
  for (int batch = 0; batch < 5; ++batch) {
    profiler.step();
    SCAFFOLD_PROFILE_REGION(&profiler, "run_training_batch");
    const torch::Tensor loss = torch::mm(w, w).sum();
    loss.backward();
  }
  ASSERT_TRUE(profiler.write_chrome_trace(dir.path() / "trace.json"));

  const auto trace = nlohmann::json::parse(core::read_file(dir.path() / "trace.json"));
  std::vector<std::pair<double, double>> batches;  // recorded run_training_batch [begin, end)
  std::vector<nlohmann::json> mms;
  bool relu = false;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    if (e.at("name") == "run_training_batch")
      batches.emplace_back(e.at("ts").get<double>(),
                           e.at("ts").get<double>() + e.at("dur").get<double>());
    if (e.at("name") == "aten::mm") mms.push_back(e);
    if (e.at("name") == "aten::relu") relu = true;
  }
  EXPECT_EQ(batches.size(), 2u) << "batches 2 and 3 of wait 1, warm-up 1, active 2";
  EXPECT_FALSE(relu) << "Setup is not operator-profiled";
  ASSERT_GE(mms.size(), 2u) << "forward mm of each active batch (backward adds more)";
  // LibTorch stamps whole microseconds on another clock: allow a few µs of slack.
  constexpr double kSlackUs = 5.0;
  int forward_inside = 0;
  for (const auto& mm : mms) {
    const double begin = mm.at("ts").get<double>();
    const double end = begin + mm.at("dur").get<double>();
    // Count each operator once: with the slack, one at the edge between two adjacent batch
    // regions lies "inside" both.
    for (const auto& [b, e] : batches) {
      if (begin >= b - kSlackUs && end <= e + kSlackUs) {
        ++forward_inside;
        break;
      }
    }
    EXPECT_EQ(mm.at("cat"), "cpu_op");
    if (mm.at("tid").get<int64_t>() == Profiler::current_thread_id()) {
      EXPECT_TRUE(mm.contains("args")) << "record_shapes gives Input Dims: " << mm.dump();
    }
  }
  EXPECT_EQ(forward_inside, static_cast<int>(mms.size()))
      << "every operator lies inside a recorded batch region";
}

}  // namespace
}  // namespace scaffold::profile
