// End-to-end tests of `scaffold image_classification` at a tiny size: a ResNet-18 on separable
// synthetic 32x32 images learns (validation accuracy far above chance), the run folder holds
// epoch_stats.csv and summary.json whose figures follow CARAML's definitions from the rows, and
// `scaffold report` prints the same numbers in CARAML's columns; stdout carries CARAML's lines,
// which CARAML's JUBE pattern reads; the energy of each window is the integral of a power that
// changes over time; tf32 is recorded. Also: an image folder of PNG files trains, and bad input
// fails with one clear message and no run folder.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <regex>
#include <sstream>
#include <thread>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "e2e/varying_power.hpp"
#include "test_util.hpp"
#include "workloads/image_classification/image_decode.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
using test::kBinary;
using test::run_command;
using test::TempDir;

// 256 training and 64 validation images of 4 separable classes; 2 warm-up + 3 timed epochs.
fs::path write_tiny_config(const fs::path& dir, const std::string& extra = "") {
  const fs::path cfg = dir / "tiny_ic.yml";
  std::ofstream(cfg)
      << "model: resnet18\nnum_classes: 4\nimage_size: 32\ndataset: synthetic\n"
      << "synthetic_train_images: 256\nsynthetic_val_images: 64\nsynthetic_separable: 1\n"
      << "global_batch_size: 32\nepochs: 3\nwarmup_epochs: 2\nlearning_rate: 0.05\n"
      << "dataloader_num_workers: 1\nchannels_last: 0\n"
      << "base_run_dir: " << (dir / "runs").string() << "\n"
      << extra;
  return cfg;
}

double counter(const nlohmann::json& summary, const std::string& name) {
  for (const auto& c : summary.at("counters"))
    if (c.at("name") == name) return c.at("value").get<double>();
  ADD_FAILURE() << "no counter " << name;
  return 0.0;
}

TEST(ImageClassification, LearnsSeparableImagesAndRecordsCaramlFigures) {
  TempDir dir;
  const auto r = run_command(kBinary + " image_classification --threads 2 -c " +
                             write_tiny_config(dir.path()).string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Average Images/s: "), std::string::npos) << r.output;
  const fs::path run = test::only_run_dir(dir.path());
  for (const char* f : {"config.yaml", "overrides.yaml", "base_config.yaml", "restart.sh",
                        "system.json", "summary.json", "epoch_stats.csv"})
    EXPECT_TRUE(fs::is_regular_file(run / f)) << f;

  const auto rows = test::csv_rows(run / "epoch_stats.csv");
  ASSERT_EQ(rows.size(), 1u + 2u + 3u) << "header, 2 warm-up and 3 timed epochs";
  // Columns: epoch,warmup,train_loss,train_top1,val_loss,val_top1,val_top5,lr,duration_s,train_s,
  // validation_s,train_images,val_images,median_step_s
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][0], std::to_string(i));
    EXPECT_EQ(rows[i][1], i <= 2 ? "1" : "0") << "row " << i;
    EXPECT_EQ(rows[i][11], "256");
    EXPECT_EQ(rows[i][12], "64");
  }
  // Chance is 25 %: the separable set must be learnt.
  const double last_top1 = std::stod(rows.back()[5]);
  EXPECT_GT(last_top1, 0.6) << core::read_file(run / "epoch_stats.csv");
  EXPECT_LT(std::stod(rows.back()[2]), std::stod(rows[1][2])) << "training loss falls";

  // summary.json: CARAML's images/s recomputed here from the timed rows.
  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  EXPECT_EQ(s.at("workload"), "image_classification");
  EXPECT_EQ(s.at("epochs"), 3);
  EXPECT_EQ(s.at("warmup_epochs"), 2);
  EXPECT_EQ(s.at("global_batch"), 32);
  EXPECT_EQ(s.at("local_batch"), 32);
  std::vector<double> per_epoch, train_per_epoch;
  double time_s = 0;
  for (std::size_t i = 3; i < rows.size(); ++i) {
    per_epoch.push_back((256.0 + 64.0) / std::stod(rows[i][8]));
    train_per_epoch.push_back(256.0 / std::stod(rows[i][9]));
    time_s += std::stod(rows[i][8]);
  }
  const double mean = std::accumulate(per_epoch.begin(), per_epoch.end(), 0.0) / 3.0;
  EXPECT_NEAR(counter(s, "images_per_s"), mean, 1e-9 * mean);
  std::sort(train_per_epoch.begin(), train_per_epoch.end());
  EXPECT_NEAR(counter(s, "train_images_per_s"), train_per_epoch[1], 1e-9 * train_per_epoch[1]);
  EXPECT_NEAR(s.at("time_s").get<double>(), time_s, 1e-9 * time_s);
  EXPECT_NEAR(counter(s, "val_top1"), last_top1, 1e-12);
  EXPECT_EQ(counter(s, "parameters"), 11178564.0)
      << "ResNet-18 with 4 classes: 11,689,512 - 508 x 996";
  EXPECT_NE(r.output.find(fmt::format("Average Images/s: {}", static_cast<long long>(mean))),
            std::string::npos)
      << r.output;

  // scaffold report: CARAML's columns with the same numbers.
  const auto rep = run_command(kBinary + " report --format csv " + run.string());
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  std::istringstream lines(rep.output);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  EXPECT_EQ(header.substr(0, 60),
            std::string("JobID,System,Version,Queue,Runtime(s),Model,Dataset,Nodes,Devices,")
                .substr(0, 60));
  EXPECT_NE(row.find(fmt::format(",{:.2f},", mean)), std::string::npos) << header << "\n" << row;
  EXPECT_NE(row.find(",resnet18,synthetic,"), std::string::npos) << row;
}

// Energy of every window against the closed-form integral of a power that changes over time
// (varying_power.hpp's ramp: 200 W rising by 25 W/s from the fixture's start). A window at the
// wrong place, a constant power times the duration, or a sum over the wrong windows give other
// energies. The windows' start_s count from the steady-clock origin the run logs.
//
// Tolerance: 8 W of average power per window. Linear interpolation between the sampler's
// readings is exact for a ramp; what remains is the fixture's lag (its value is P at its last
// rewrite, every 1 ms: 25 W/s x 0.2 s = 5 W even if the writer is descheduled for 200 ms). A
// window misplaced by d seconds is off by 25 W/s x d whatever its length, so one off by more
// than 0.32 s fails; the test checks that a 0.5 s shift would, window by window.
TEST(ImageClassification, EnergyOfEachWindowIsTheIntegralOfATimeVaryingPower) {
  TempDir dir;
  test::VaryingPowerFixture power(dir.path() / "fixture", test::PowerRamp{200.0, 25.0},
                                  test::PowerClock::steady);
  const auto r = run_command("SCAFFOLD_HWMON_ROOT=" + power.hwmon_root().string() +
                             " SCAFFOLD_POWERCAP_ROOT=/nonexistent " + kBinary +
                             " image_classification --threads 2 --epochs 3 --warmup-epochs 1 -c " +
                             write_tiny_config(dir.path()).string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m,
                                std::regex(R"(start_s counts from steady-clock time ([0-9.]+) s)")))
      << r.output;
  const double origin_s = std::stod(m[1]);
  const double tol_w = 8.0, shift_s = 0.5;

  const fs::path run = test::only_run_dir(dir.path());
  const auto windows = test::csv_rows(run / "energy_stats.csv");
  // columns: window,epoch,start_s,duration_s,energy_j,energy_wh,avg_power_w,peak_power_w,samples
  ASSERT_EQ(windows.size(), 1u + 1u + 3u * 2u)
      << "header, warm-up, train + validation per timed epoch";
  EXPECT_EQ(windows[1][0], "warmup");
  double timed_s = 0.0, timed_ref_j = 0.0, lowest_avg_w = 1e9, highest_avg_w = 0.0;
  int timed_windows = 0;
  for (std::size_t i = 1; i < windows.size(); ++i) {
    const double t0 = origin_s + std::stod(windows[i][2]), d = std::stod(windows[i][3]),
                 t1 = t0 + d;
    ASSERT_GT(d, 0.0) << "row " << i;
    const double ref_j = power.energy_j(t0, t1);
    EXPECT_NEAR(std::stod(windows[i][4]), ref_j, tol_w * d)
        << "row " << i << " (" << windows[i][0] << ") [" << t0 << ", " << t1 << "]";
    EXPECT_NEAR(std::stod(windows[i][6]), ref_j / d, tol_w) << "average power, row " << i;
    EXPECT_NEAR(std::stod(windows[i][7]), power.peak_w(t0, t1), tol_w) << "peak power, row " << i;
    ASSERT_GT(std::abs(power.energy_j(t0 + shift_s, t1 + shift_s) - ref_j), tol_w * d)
        << "a window misplaced by " << shift_s << " s must fail, row " << i;
    lowest_avg_w = std::min(lowest_avg_w, ref_j / d);
    highest_avg_w = std::max(highest_avg_w, ref_j / d);
    if (windows[i][0] == "train" || windows[i][0] == "validation") {
      timed_s += d;
      timed_ref_j += ref_j;
      ++timed_windows;
    }
  }
  EXPECT_EQ(timed_windows, 6) << "train + validation for each of the 3 timed epochs";
  ASSERT_GT(highest_avg_w - lowest_avg_w, 2 * tol_w)
      << "the windows must see different powers for this test to tell a wrong window from a right "
         "one";

  // summary.json: the timed windows' energy (warm-up excluded) against the independent integral;
  // images/Wh and J/image from the timed epochs' images.
  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  const double wh = s.at("energy_wh").get<double>();
  EXPECT_NEAR(wh, timed_ref_j / 3600.0, tol_w * timed_s / 3600.0);
  const double images = 3 * (256.0 + 64.0);
  EXPECT_NEAR(counter(s, "images_per_wh"), images / wh, 1e-9 * images / wh);
  EXPECT_NEAR(counter(s, "j_per_image"), wh * 3600.0 / images, 1e-9 * wh * 3600.0 / images);
  EXPECT_TRUE(fs::exists(run / "energy_phases.csv")) << "the phases are measured too";
}

// CARAML's lines on stdout (not through the logger, which writes to stderr). The JUBE pattern is
// transcribed from CARAML's image_classification/image_classification_torch_benchmark.xml
// (patternset "pattern", the GPU variant: `Average Images/s: ${jube_pat_fp}`), with $jube_pat_fp
// expanded to JUBE's definition (jube2/pattern.py, get_jube_pattern:
// ([+-]?(?:\d*\.?\d+(?:[eE][-+]?\d+)?|\d+\.))). That is the only pattern CARAML's JUBE file
// applies to the trainer's output (the others read `time -p`, sbatch and the combine step). The
// other lines are CARAML's print0 calls in image_classification_torch.py, matched with the same
// float macro. Every value is checked against summary.json and epoch_stats.csv. Also: the tf32
// key is recorded in system.json, summary.json and the report's TF32 column, as "none(cpu)" here.
// Whether /proc/cpuinfo lists AVX-512 F, BW, VL and DQ (oneDNN's avx512_core).
bool cpu_has_avx512_core() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    line += ' ';
    for (const char* f : {" avx512f ", " avx512bw ", " avx512vl ", " avx512dq "})
      if (line.find(f) == std::string::npos) return false;
    return true;
  }
  return false;
}

TEST(ImageClassification, StdoutHasCaramlsLinesThatItsJubePatternReads) {
  TempDir dir;
  const fs::path err = dir.path() / "stderr.txt";
  // OPENBLAS_CORETYPE set as this VM's environment sets it: system.json must say so.
  const auto r = run_command("(OPENBLAS_CORETYPE=Haswell " + kBinary +
                             " image_classification --threads 2 -c " +
                             write_tiny_config(dir.path()).string() + " 2>" + err.string() + ")");
  ASSERT_EQ(r.exit_code, 0) << r.output << core::read_file(err);
  const std::string& out = r.output;  // stdout only
  const std::string fp = R"(([+-]?(?:\d*\.?\d+(?:[eE][-+]?\d+)?|\d+\.)))";
  const auto all = [&](const std::string& pattern) {
    std::vector<std::smatch> found;
    const std::regex re(pattern);
    for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
         ++it)
      found.push_back(*it);
    return found;
  };
  const fs::path run = test::only_run_dir(dir.path());
  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  const auto rows = test::csv_rows(run / "epoch_stats.csv");
  ASSERT_EQ(rows.size(), 1u + 2u + 3u);

  // CARAML's JUBE pattern: one match, int() of the mean images/s (truncated: within [x - 1, x]).
  const auto average = all("Average Images/s: " + fp);
  ASSERT_EQ(average.size(), 1u) << out;
  const double images_per_s = counter(s, "images_per_s");
  EXPECT_LE(std::stod(average[0][1]), images_per_s);
  EXPECT_GT(std::stod(average[0][1]), images_per_s - 1.0);
  EXPECT_EQ(core::read_file(err).find("Average Images/s"), std::string::npos) << "on stdout only";

  // print0(f'Training for {args.epochs} epoch(s) took {np.round(..., 3)} s'): the timed epochs
  // and their time (summary's time_s, printed to 3 decimals: within 0.5 ms).
  const auto training = all(R"(Training for (\d+) epoch\(s\) took )" + fp + " s");
  ASSERT_EQ(training.size(), 1u) << out;
  EXPECT_EQ(std::stoi(training[0][1]), s.at("epochs").get<int>());
  EXPECT_NEAR(std::stod(training[0][2]), s.at("time_s").get<double>(), 5e-4 + 1e-9);
  // print0(f'End of warm-up epochs (took {np.round(..., 3)} s)...'): wall time from the first
  // warm-up epoch's start to the last one's end, at least their durations' sum and at most 0.2 s
  // (the epoch bookkeeping between them) plus 5 % more.
  const auto warmup = all(R"(End of warm-up epochs \(took )" + fp + R"( s\)\.\.\.)");
  ASSERT_EQ(warmup.size(), 1u) << out;
  const double warmup_sum = std::stod(rows[1][8]) + std::stod(rows[2][8]);
  EXPECT_GE(std::stod(warmup[0][1]), warmup_sum - 5e-4);
  EXPECT_LE(std::stod(warmup[0][1]), 1.05 * warmup_sum + 0.2);
  // The grid table: one row, the last (3rd) timed epoch, Images/s = 320 / its duration (.0f).
  const auto grid = all(R"(\|\s+(\d+) \|\s+(\d+) \|\s+([0-9]+\.[0-9]{3}) \|)");
  ASSERT_EQ(grid.size(), 1u) << out;
  EXPECT_EQ(grid[0][1], "3");
  const double last_s = std::stod(rows[5][8]);
  EXPECT_NEAR(std::stod(grid[0][2]), 320.0 / last_s, 0.5 + 1e-9);
  EXPECT_NEAR(std::stod(grid[0][3]), last_s, 5e-4 + 1e-9);
  EXPECT_NE(out.find("|   Epoch |   Images/s |   Time (s) |\n"), std::string::npos) << out;
  // The opening lines.
  EXPECT_EQ(all("No GPUs Detected, using CPU").size(), 1u) << out;
  EXPECT_EQ(all("Creating datasets took " + fp + " s").size(), 1u) << out;
  EXPECT_EQ(all(R"(Starting training with 320 images\.\.\.)").size(), 1u) << out;
  EXPECT_EQ(all(R"(Starting warm-up epochs \.\.\.)").size(), 1u) << out;

  // tf32 (default 1) on a CPU: recorded, and recorded as having no effect. conv_kernel auto on a
  // CPU in fp32: the probe, its measurements and what each 3x3 stride-1 call ran.
  const nlohmann::json sys = nlohmann::json::parse(core::read_file(run / "system.json"));
  const auto kernels = sys.at("kernels").get<std::vector<std::string>>();
#if defined(__x86_64__)
  // The host's fields reach the run's file (cpu_isa was once collected and never written).
  const std::string isa = sys.at("cpu_isa").get<std::string>();
  EXPECT_EQ(isa.rfind("family ", 0), 0u) << isa;
#endif
  const bool dnnl = SCAFFOLD_TEST_WITH_DNNL != 0;  // the build links oneDNN (tests/e2e/CMakeLists)
  // norm_kernel auto with channels_last 0 (this run's NCHW): LibTorch's BatchNorm + ReLU;
  // optimizer_kernel auto on a CPU: the one-pass SGD.
  // The probe with or without oneDNN (our Winograd needs none).
  EXPECT_EQ(kernels, (std::vector<std::string>{"tf32=1", "tf32_effect=none(cpu)", "conv3x3=probe",
                                               "bn_relu=libtorch", "optimizer=fused_sgd"}));
  EXPECT_EQ(s.at("params").at("conv_kernel"), "probe");
  EXPECT_EQ(s.at("params").at("norm_kernel"), "libtorch");
  EXPECT_EQ(s.at("params").at("optimizer_kernel"), "fused");  // auto on a CPU
  const std::string blas = sys.at("blas").get<std::string>();
  EXPECT_EQ(blas.rfind("OpenBLAS ", 0), 0u) << blas;  // the build's BLAS (scripts/install-deps)
  const std::string forced = "; core Haswell, set by OPENBLAS_CORETYPE=Haswell";
  ASSERT_GE(blas.size(), forced.size()) << blas;
  EXPECT_EQ(blas.substr(blas.size() - forced.size()), forced) << blas;
  const auto run_kernels = sys.at("kernels_run").get<std::vector<std::string>>();
  // Ops in the order they first ran: the stem's BatchNorm + ReLU, then the first 3x3 conv.
  // ResNet-18's 17 BatchNorm + ReLU pairs count in each training step (validation's are not
  // counted): 256 images / 32 a step x (2 warm-up + 3 timed epochs) = 40 steps.
  ASSERT_EQ(run_kernels.size(), 2u) << sys.dump();
  EXPECT_EQ(run_kernels[0], "bn_relu=libtorch x" + std::to_string(17 * (256 / 32) * (2 + 3)));
  EXPECT_EQ(run_kernels[1].rfind("conv3x3=", 0), 0u) << run_kernels[1];
  if (dnnl && cpu_has_avx512_core()) {  // oneDNN's Winograd needs it
    // ResNet-18 at 32x32: 3x3 stride-1 layers at 8x8, 4x4, 2x2 and 1x1, for the training batch
    // (32) and the validation batch (32 too: one shape each).
    const auto probes = sys.at("kernel_probes").get<std::vector<std::string>>();
    ASSERT_EQ(probes.size(), 4u) << sys.dump();
    EXPECT_EQ(probes[0].rfind("conv x 32x64x8x8 nchw Float w 64x64x3x3 s1x1 p1x1: winograd ", 0),
              0u)
        << probes[0];
  }
  EXPECT_EQ(s.at("params").at("tf32"), "1");
  EXPECT_EQ(s.at("params").at("tf32_effect"), "none(cpu)");
  const auto rep = run_command(kBinary + " report --format csv " + run.string());
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  std::istringstream lines(rep.output);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  const auto cells = [](const std::string& line) {  // empty cells kept, the last one too
    std::vector<std::string> v(1);
    for (const char c : line) {
      if (c == ',')
        v.emplace_back();
      else
        v.back().push_back(c);
    }
    return v;
  };
  const auto titles = cells(header), values = cells(row);
  const auto at = std::find(titles.begin(), titles.end(), "TF32");
  ASSERT_NE(at, titles.end()) << header;
  ASSERT_EQ(titles.size(), values.size()) << header << "\n" << row;
  EXPECT_EQ(values[static_cast<std::size_t>(at - titles.begin())], "none(cpu)") << row;
}

// synthetic_device: only labels come from the loader, the images are drawn on the device from
// seeds that follow from the example ids; the run is deterministic for the seed.
TEST(ImageClassification, SyntheticImagesDrawnOnTheDeviceAreDeterministic) {
  std::vector<std::vector<std::vector<std::string>>> runs;
  for (int i = 0; i < 2; ++i) {
    TempDir dir;
    const auto r =
        run_command(kBinary +
                    " image_classification --threads 1 --dataset synthetic_device --epochs 1 "
                    "--warmup-epochs 0 --synthetic-train-images 64 --synthetic-val-images 32 "
                    // A fixed convolution kernel: the default probe may choose differently in
                    // two processes (a measurement), and the two kernels round differently.
                    "--conv-kernel libtorch -c " +
                    write_tiny_config(dir.path()).string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    runs.push_back(test::csv_rows(test::only_run_dir(dir.path()) / "epoch_stats.csv"));
  }
  ASSERT_EQ(runs[0].size(), 2u);
  EXPECT_EQ(runs[0][1][11], "64");
  EXPECT_EQ(runs[0][1][12], "32");
  for (std::size_t c : {2u, 3u, 4u, 5u, 6u})  // losses and accuracies; not the wall times
    EXPECT_EQ(runs[0][1][c], runs[1][1][c])
        << "column " << c << " differs between two runs of one seed";
}

// Two classes told apart by brightness, 8 training and 4 validation images each, under data/.
void write_two_class_folder(const fs::path& data) {
  for (const char* split : {"train", "val"})
    for (const char* cls : {"dark", "light"}) fs::create_directories(data / split / cls);
  const auto write_png = [](const fs::path& file, int value) {
    imgcls::Image image;
    image.width = 40;
    image.height = 30;
    image.channels = 3;
    image.pixels.assign(40 * 30 * 3, static_cast<uint8_t>(value));
    imgcls::encode_png(image, file);
  };
  for (int i = 0; i < 8; ++i) {
    write_png(data / "train" / "dark" / fmt::format("{}.png", i), 20 + i);
    write_png(data / "train" / "light" / fmt::format("{}.png", i), 220 - i);
  }
  for (int i = 0; i < 4; ++i) {
    write_png(data / "val" / "dark" / fmt::format("{}.png", i), 30 + i);
    write_png(data / "val" / "light" / fmt::format("{}.png", i), 210 - i);
  }
}

TEST(ImageClassification, TrainsOnAnImageFolderOfPngs) {
  TempDir dir;
  const fs::path data = dir.path() / "images";
  write_two_class_folder(data);
  // A second config file layered over the tiny one (later files win key by key).
  const fs::path folder_cfg = dir.path() / "folder.yml";
  std::ofstream(folder_cfg) << "dataset: folder\ndata_dir: " << data.string()
                            << "\nnum_classes: 2\nglobal_batch_size: 4\n";
  const std::string cfg = write_tiny_config(dir.path()).string() + " -c " + folder_cfg.string();
  const auto r = run_command(
      kBinary + " image_classification --threads 2 --epochs 2 --warmup-epochs 1 -c " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = test::csv_rows(test::only_run_dir(dir.path()) / "epoch_stats.csv");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1][11], "16");
  EXPECT_EQ(rows[1][12], "8");

  // A class count that does not match the folders, and a corrupt image: one clear error each.
  const auto wrong =
      run_command(kBinary + " image_classification --threads 1 --num-classes 3 -c " + cfg);
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("holds 2 class folders but num_classes is 3"), std::string::npos)
      << wrong.output;
  std::ofstream(data / "train" / "dark" / "broken.png") << "not a png";
  const auto broken = run_command(
      kBinary + " image_classification --threads 1 --epochs 1 --warmup-epochs 0 -c " + cfg);
  EXPECT_EQ(broken.exit_code, 1) << broken.output;
  EXPECT_NE(broken.output.find("broken.png"), std::string::npos) << broken.output;
  const auto skipped = run_command(kBinary +
                                   " image_classification --threads 1 --epochs 1 --warmup-epochs 0 "
                                   "--skip-bad-images 1 -c " +
                                   cfg);
  EXPECT_EQ(skipped.exit_code, 0) << skipped.output;
  EXPECT_NE(skipped.output.find("unreadable image(s) were skipped"), std::string::npos)
      << skipped.output;
}

// A class folder holding `self -> .` (and one holding a link two levels up, to the split's
// root): the run ends (under a timeout, so a regression fails instead of hanging), warns once per
// link naming it, and trains on each image once.
TEST(ImageClassification, LinkLoopsInAnImageFolderAreSkippedWithAWarningNamingThem) {
  TempDir dir;
  const fs::path data = dir.path() / "images";
  write_two_class_folder(data);
  fs::create_directory_symlink(".", data / "train" / "dark" / "self");
  fs::create_directories(data / "train" / "light" / "sub");
  fs::create_directory_symlink("../..", data / "train" / "light" / "sub" / "up2");
  const fs::path folder_cfg = dir.path() / "folder.yml";
  std::ofstream(folder_cfg) << "dataset: folder\ndata_dir: " << data.string()
                            << "\nnum_classes: 2\nglobal_batch_size: 4\n";
  const std::string cfg = write_tiny_config(dir.path()).string() + " -c " + folder_cfg.string();
  const auto r =
      run_command("timeout -k 5 120 " + kBinary +
                  " image_classification --threads 2 --epochs 1 --warmup-epochs 0 -c " + cfg);
  ASSERT_NE(r.exit_code, 124) << "the run did not end within 120 s (a symlink loop?)";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const fs::path& link :
       {data / "train" / "dark" / "self", data / "train" / "light" / "sub" / "up2"}) {
    const std::string warning = link.string() + ": symbolic link to '";
    const std::size_t at = r.output.find(warning);
    EXPECT_NE(at, std::string::npos) << warning << "\n" << r.output;
    EXPECT_EQ(r.output.find(warning, at + 1), std::string::npos) << "warned once: " << r.output;
  }
  EXPECT_NE(r.output.find("leads back to a folder that contains it (a loop); skipped"),
            std::string::npos)
      << r.output;
  const auto rows = test::csv_rows(test::only_run_dir(dir.path()) / "epoch_stats.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1][11], "16") << "each training image once";
  EXPECT_EQ(rows[1][12], "8");
}

// The scheduler's warning signal (SIGUSR2) mid-run: the step in flight finishes, the epochs done
// so far are complete on disk, the record says time_limit, the exit status is 3, and restart.sh
// continues from the last completed epoch (saved at the stop although checkpoint_interval is 2).
TEST(ImageClassification, AWarningSignalStopsCleanlyAndRestartResumes) {
  TempDir dir;
  const fs::path cfg = write_tiny_config(dir.path(), "checkpoint_interval: 2\n");
  const pid_t pid = test::spawn_scaffold(
      {"image_classification", "--threads", "1", "--epochs", "50", "-c", cfg.string()});
  ASSERT_GT(pid, 0);
  const fs::path run =
      test::wait_for_csv_lines(dir.path(), "epoch_stats.csv", 4, std::chrono::seconds(120));
  ASSERT_FALSE(run.empty());
  const int status = test::signal_and_wait(pid, SIGUSR2);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by a signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 3);
  const auto rows = test::csv_rows(run / "epoch_stats.csv");
  ASSERT_GE(rows.size(), 4u);
  const long long done = std::stoll(rows.back()[0]);
  EXPECT_EQ(done, static_cast<long long>(rows.size() - 1)) << "consecutive epochs";
  EXPECT_LT(done, 52) << "stopped before the end";
  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  EXPECT_EQ(s.at("status"), "time_limit");
  EXPECT_EQ(s.at("epochs").get<long long>(), done - 2);
  EXPECT_TRUE(fs::exists(run / "checkpoints" / "checkpoint_last"));

  // Resume: the epochs continue from the stop (2 warm-up + 50 timed in the original command,
  // here capped at done + 1 timed epoch more).
  const auto resumed = run_command("bash " + (run / "restart.sh").string() + " --epochs " +
                                   std::to_string(done - 2 + 1));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find(
                fmt::format("resumed from {}", (run / "checkpoints" / "checkpoint_last").string())),
            std::string::npos)
      << resumed.output;
  const auto after = test::csv_rows(run / "epoch_stats.csv");
  ASSERT_EQ(after.size(), rows.size() + 1) << core::read_file(run / "epoch_stats.csv");
  EXPECT_EQ(std::stoll(after.back()[0]), done + 1);
  for (std::size_t i = 1; i < rows.size(); ++i)
    EXPECT_EQ(after[i], rows[i]) << "row " << i << " kept";
}

TEST(ImageClassification, BadInputIsOneClearErrorAndNoRunFolder) {
  TempDir dir;
  const fs::path cfg = write_tiny_config(dir.path());
  const auto model =
      run_command(kBinary + " image_classification --model resnet19 -c " + cfg.string());
  EXPECT_EQ(model.exit_code, 1) << model.output;
  EXPECT_NE(model.output.find("model"), std::string::npos) << model.output;
  EXPECT_NE(model.output.find("resnet19"), std::string::npos) << model.output;
  const auto batch = run_command(test::mpiexec(2) + kBinary +
                                 " image_classification --global-batch-size 33 -c " + cfg.string());
  EXPECT_NE(batch.exit_code, 0) << batch.output;
  EXPECT_NE(batch.output.find("global_batch_size 33 does not split over 2"), std::string::npos)
      << batch.output;
  EXPECT_FALSE(fs::exists(dir.path() / "runs")) << "nothing written before the checks";
}

}  // namespace
}  // namespace scaffold

namespace scaffold {
namespace {

// Sizes that cannot fit are refused by name before the data or the run folder exist; an image
// folder found bad after the run folder was made leaves no half-made folder behind.
TEST(ImageClassification, ASizeThatCannotFitIsRefusedAndBadDataLeavesNoRunFolder) {
  TempDir dir;
  const std::string cfg = write_tiny_config(dir.path()).string();
  const std::vector<std::pair<std::string, std::string>> cases{
      {"--image-size 1024 --global-batch-size 100000", "global_batch_size"},
      {"--num-classes 2000000000", "num_classes"}};
  for (const auto& [flags, key] : cases) {
    const auto r = run_command(kBinary + " image_classification " + flags + " -c " + cfg);
    EXPECT_EQ(r.exit_code, 1) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find("needs at least"), std::string::npos) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(key), std::string::npos) << flags << "\n" << r.output;
    EXPECT_EQ(r.output.find("frame #"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(fs::exists(dir.path() / "runs")) << "nothing written before the check";
  fs::create_directories(dir.path() / "images" / "train" / "empty_class");
  fs::create_directories(dir.path() / "images" / "val");
  const auto r = run_command(kBinary + " image_classification --dataset folder --data-dir " +
                             (dir.path() / "images").string() + " -c " + cfg);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("empty_class"), std::string::npos) << r.output;
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(dir.path() / "runs") || fs::is_empty(dir.path() / "runs", ec))
      << r.output;
}

}  // namespace
}  // namespace scaffold
