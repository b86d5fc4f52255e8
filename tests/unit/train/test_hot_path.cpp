// No host/device synchronisation in the training hot path (ScaFFold's test_perf_hotpath;
// issue 14): the step functions of the loop, the tasks' forward passes, the gradient clip
// and the CUDA step seam are read from the source and must not call synchronize(), item(),
// .cpu(), a copy to the CPU, LibTorch's clip_grad_norm_ or the per-epoch readers outside a marked
// region. The check is shown to catch each pattern on a planted regression. A run-time count of
// host reads during real training steps is in workloads/scaffold/test_segmentation_task.cpp
// (HotPath*).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "unit/train/hot_path_check.hpp"

namespace scaffold::test {
namespace {

std::string read_source(const std::string& relative) {
  const std::string path = std::string(SCAFFOLD_SOURCE_DIR) + "/" + relative;
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string describe(const std::vector<HotPathFinding>& findings) {
  std::string out;
  for (const HotPathFinding& f : findings)
    out += "\n  " + f.function + ": line " + std::to_string(f.line) + " calls '" + f.pattern +
           "': " + f.text;
  return out;
}

void expect_clean(const std::string& file, const std::vector<std::string>& functions) {
  const std::vector<HotPathFinding> findings = check_hot_path(read_source(file), functions);
  EXPECT_TRUE(findings.empty())
      << file << ": host/device synchronisation in the hot path (mark a deliberate "
      << "one with `// hot-path-allowed: why`):" << describe(findings);
}

TEST(HotPath, TheLoopsStepFunctionsDoNotWaitForTheDevice) {
  expect_clean(
      "src/train/loop.cpp",
      {"TrainingLoop::train_step", "TrainingLoop::train_epoch", "TrainingLoop::unscale_gradients",
       "TrainingLoop::broadcast_buffers", "TrainingLoop::stop_agreed"});
}

TEST(HotPath, TheTasksForwardPassesAndTheClipDoNotWaitForTheDevice) {
  expect_clean("src/workloads/scaffold/segmentation_task.cpp", {"train_forward", "after_step"});
  expect_clean("src/workloads/image_classification/task.cpp",
               {"ClassificationTask::train_forward", "ClassificationTask::inputs",
                "ClassificationTask::logits", "topk_correct"});
  expect_clean("src/workloads/scaffold/loss.cpp", {"segmentation_loss"});
  expect_clean("src/train/grad_clip.cpp", {"clip_grad_norm"});
}

TEST(HotPath, TheStepSeamWaitsOnlyInCollect) {
  // CUDA implementation: marks and copies are stream-ordered; collect_s() is the one wait.
  const std::string cuda = read_source("src/train/device_stream_cuda.cpp");
  EXPECT_TRUE(
      check_hot_path(cuda, {"void start", "void stop", "void prefetch", "Batch take"}).empty())
      << describe(check_hot_path(cuda, {"void start", "void stop", "void prefetch", "Batch take"}));
  const auto collect = check_hot_path(cuda, {"std::vector<double> collect_s"});
  ASSERT_EQ(collect.size(), 1u) << "collect_s should hold the seam's one synchronize()"
                                << describe(collect);
  EXPECT_EQ(collect[0].pattern, "synchronize(");
  expect_clean("src/train/device_stream.cpp",
               {"void start", "void stop", "void prefetch", "Batch take"});
}

// The check itself: each forbidden call planted in a step body is found, on its line; a marked
// line or region is not; comments and strings do not count; a renamed function is reported.
TEST(HotPath, TheCheckFindsAPlantedSynchronisation) {
  for (const std::string& call : hot_path_forbidden()) {
    const std::string source =
        "void Loop::train_step(Batch& b, Tensor* s) {\n"
        "  auto x = f(b);\n"
        "  if (x.defined()) {\n"
        "    auto y = " +
        call +
        "0);\n"
        "  }\n"
        "}\n"
        "void Loop::other() { x." +
        call + "); }\n";
    const auto findings = check_hot_path(source, {"Loop::train_step"});
    ASSERT_EQ(findings.size(), 1u) << call << describe(findings);
    EXPECT_EQ(findings[0].line, 4) << call;
    EXPECT_EQ(findings[0].pattern, call);
  }
  const std::string allowed =
      "void Loop::train_epoch() {\n"
      "  step();  // synchronize() in a comment\n"
      "  log(\"x.item() in a string\");\n"
      "  bool ok = !bad.item<bool>();  // hot-path-allowed: the fp16 scaler's check\n"
      "  // hot-path-allowed: begin (after the epoch)\n"
      "  auto t = clock->collect_s();\n"
      "  out = host_doubles(sums);\n"
      "  // hot-path-allowed: end\n"
      "  torch::cuda::synchronize();\n"
      "}\n";
  const auto findings = check_hot_path(allowed, {"Loop::train_epoch"});
  ASSERT_EQ(findings.size(), 1u) << describe(findings);
  EXPECT_EQ(findings[0].line, 9);
  EXPECT_EQ(findings[0].pattern, "synchronize(");
  const auto missing = check_hot_path(allowed, {"Loop::renamed_step"});
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].pattern, "(function not found)");
}

}  // namespace
}  // namespace scaffold::test
