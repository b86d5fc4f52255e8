// Tests for ImageClassificationConfig: the defaults (written here, not read from the code), every
// range check and choice, the folder/data_dir cross-check, path resolution, the YAML round trip,
// the shipped configs and that ScaFFold's auxiliary and renamed keys do not leak into this schema.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "config/schema.hpp"
#include "core/error.hpp"
#include "workloads/image_classification/options.hpp"
#include "workloads/scaffold/schema.hpp"

namespace scaffold::config {
namespace {

namespace fs = std::filesystem;
using IC = ImageClassificationConfig;
using LoadedIC = LoadedConfigT<IC>;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing: " << (needle)

class ImageClassificationConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("scaffold_test_ic_config_" + std::to_string(::getpid()) +
                                        "_" + std::to_string(counter++) + "_" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  static LoadedIC load(std::vector<std::string> files, std::vector<FlagOverride> flags = {},
                       bool resolve_paths = false) {
    LoadRequest request;
    request.config_files = std::move(files);
    request.flags = std::move(flags);
    request.resolve_paths = resolve_paths;
    return load_config_as<IC>(request);
  }

  static std::string load_error(std::vector<std::string> files,
                                std::vector<FlagOverride> flags = {}) {
    try {
      load(std::move(files), std::move(flags));
    } catch (const core::Error& e) {
      std::string message = e.what();
      EXPECT_EQ(message.rfind("invalid configuration:\n", 0), 0u) << message;
      return message;
    }
    ADD_FAILURE() << "load_config_as did not throw";
    return "";
  }

  // The one line of `message` that mentions `needle` (fails unless exactly one does).
  static std::string line_with(const std::string& message, const std::string& needle) {
    std::istringstream in(message);
    std::vector<std::string> hits;
    for (std::string line; std::getline(in, line);)
      if (line.find(needle) != std::string::npos) hits.push_back(line);
    EXPECT_EQ(hits.size(), 1u) << "lines with '" << needle << "' in:\n" << message;
    return hits.empty() ? "" : hits[0];
  }

  static int problem_count(const std::string& message) {
    return static_cast<int>(std::count(message.begin(), message.end(), '\n'));
  }

  fs::path dir_;
};

// Every member, so a key that does not survive a trip is named.
void expect_same(const IC& a, const IC& b) {
  EXPECT_EQ(a.base_run_dir, b.base_run_dir);
  EXPECT_EQ(a.job_name, b.job_name);
  EXPECT_EQ(a.checkpoint_dir, b.checkpoint_dir);
  EXPECT_EQ(a.data_dir, b.data_dir);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.num_classes, b.num_classes);
  EXPECT_EQ(a.image_size, b.image_size);
  EXPECT_EQ(a.dataset, b.dataset);
  EXPECT_EQ(a.synthetic_train_images, b.synthetic_train_images);
  EXPECT_EQ(a.synthetic_val_images, b.synthetic_val_images);
  EXPECT_EQ(a.synthetic_separable, b.synthetic_separable);
  EXPECT_EQ(a.skip_bad_images, b.skip_bad_images);
  EXPECT_EQ(a.global_batch_size, b.global_batch_size);
  EXPECT_EQ(a.epochs, b.epochs);
  EXPECT_EQ(a.warmup_epochs, b.warmup_epochs);
  EXPECT_EQ(a.time_budget_s, b.time_budget_s);  // exact: floats must round-trip
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_EQ(a.learning_rate, b.learning_rate);
  EXPECT_EQ(a.momentum, b.momentum);
  EXPECT_EQ(a.weight_decay, b.weight_decay);
  EXPECT_EQ(a.lr_step_size, b.lr_step_size);
  EXPECT_EQ(a.lr_gamma, b.lr_gamma);
  EXPECT_EQ(a.precision, b.precision);
  EXPECT_EQ(a.tf32, b.tf32);
  EXPECT_EQ(a.loss_scale_init, b.loss_scale_init);
  EXPECT_EQ(a.loss_scale_growth_interval, b.loss_scale_growth_interval);
  EXPECT_EQ(a.channels_last, b.channels_last);
  EXPECT_EQ(a.zero_init_residual, b.zero_init_residual);
  EXPECT_EQ(a.conv_kernel, b.conv_kernel);
  EXPECT_EQ(a.norm_kernel, b.norm_kernel);
  EXPECT_EQ(a.optimizer_kernel, b.optimizer_kernel);
  EXPECT_EQ(a.dataloader_num_workers, b.dataloader_num_workers);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.device_sharing, b.device_sharing);
  EXPECT_EQ(a.checkpoint_interval, b.checkpoint_interval);
  EXPECT_EQ(a.progress_timeout_s, b.progress_timeout_s);
}

// The defaults (CARAML's, docs/image_classification.md), written out here.
void expect_caraml_defaults(const IC& c) {
  EXPECT_EQ(c.base_run_dir, "image_classification_runs");
  EXPECT_EQ(c.job_name, "image_classification");
  EXPECT_EQ(c.checkpoint_dir, "checkpoints");
  EXPECT_EQ(c.data_dir, "");
  EXPECT_EQ(c.seed, 42);
  EXPECT_EQ(c.model, "resnet50");
  EXPECT_EQ(c.num_classes, 1000);
  EXPECT_EQ(c.image_size, 224);
  EXPECT_EQ(c.dataset, "synthetic");
  EXPECT_EQ(c.synthetic_train_images, 9000);
  EXPECT_EQ(c.synthetic_val_images, 1000);
  EXPECT_FALSE(c.synthetic_separable);
  EXPECT_FALSE(c.skip_bad_images);
  EXPECT_EQ(c.global_batch_size, 64);
  EXPECT_EQ(c.epochs, 100);
  EXPECT_EQ(c.warmup_epochs, 5);
  EXPECT_EQ(c.time_budget_s, 0.0);
  EXPECT_EQ(c.optimizer, "SGD");
  EXPECT_EQ(c.learning_rate, 0.01);
  EXPECT_EQ(c.momentum, 0.0);
  EXPECT_EQ(c.weight_decay, 0.0);
  EXPECT_EQ(c.lr_step_size, 10);
  EXPECT_EQ(c.lr_gamma, 0.1);
  EXPECT_EQ(c.precision, "fp32");
  EXPECT_TRUE(c.tf32);
  EXPECT_EQ(c.loss_scale_init, 1.0);
  EXPECT_EQ(c.loss_scale_growth_interval, 100);
  EXPECT_TRUE(c.channels_last);
  EXPECT_FALSE(c.zero_init_residual);
  EXPECT_EQ(c.conv_kernel, "auto");       // extension: same arithmetic, a kernel chosen per machine
  EXPECT_EQ(c.norm_kernel, "auto");       // extension: fused BatchNorm + ReLU where it runs
  EXPECT_EQ(c.optimizer_kernel, "auto");  // extension: the one-pass SGD on a CPU
  EXPECT_EQ(c.dataloader_num_workers, 2);
  EXPECT_EQ(c.device, "auto");
  EXPECT_FALSE(c.device_sharing);
  EXPECT_EQ(c.checkpoint_interval, -1);
  EXPECT_EQ(c.progress_timeout_s, 1800);
}

const std::vector<std::string> kKeys = {"base_run_dir",
                                        "job_name",
                                        "checkpoint_dir",
                                        "data_dir",
                                        "seed",
                                        "model",
                                        "num_classes",
                                        "image_size",
                                        "dataset",
                                        "synthetic_train_images",
                                        "synthetic_val_images",
                                        "synthetic_separable",
                                        "skip_bad_images",
                                        "global_batch_size",
                                        "epochs",
                                        "warmup_epochs",
                                        "time_budget_s",
                                        "optimizer",
                                        "learning_rate",
                                        "momentum",
                                        "weight_decay",
                                        "lr_step_size",
                                        "lr_gamma",
                                        "precision",
                                        "tf32",
                                        "loss_scale_init",
                                        "loss_scale_growth_interval",
                                        "channels_last",
                                        "zero_init_residual",
                                        "conv_kernel",
                                        "norm_kernel",
                                        "optimizer_kernel",
                                        "dataloader_num_workers",
                                        "device",
                                        "device_sharing",
                                        "checkpoint_interval",
                                        "progress_timeout_s"};

// A valid config with every key away from its default (optimizer has one value).
IC non_default_config() {
  IC c;
  c.base_run_dir = "/tmp/ic runs";  // a space forces quoting
  c.job_name = "false";             // a YAML boolean word as a string
  c.checkpoint_dir = "ck: pt";
  c.data_dir = "/data/imagenet";
  c.seed = int64_t{1} << 40;
  c.model = "resnet101";
  c.num_classes = 17;
  c.image_size = 96;
  c.dataset = "folder";
  c.synthetic_train_images = 11;
  c.synthetic_val_images = 3;
  c.synthetic_separable = true;
  c.skip_bad_images = true;
  c.global_batch_size = 256;
  c.epochs = 7;
  c.warmup_epochs = 0;
  c.time_budget_s = 0.1 + 0.2;  // 0.30000000000000004
  c.learning_rate = 1e-05;
  c.momentum = 0.0;
  c.weight_decay = 5e-05;
  c.lr_step_size = 30;
  c.lr_gamma = 1.0 / 3.0;
  c.precision = "bf16";
  c.tf32 = false;
  c.loss_scale_init = 65536.0;
  c.loss_scale_growth_interval = 2000;
  c.channels_last = false;
  c.zero_init_residual = true;
  c.conv_kernel = "libtorch";  // precision bf16: auto or libtorch
  c.dataloader_num_workers = 0;
  c.device = "cpu";
  c.device_sharing = true;
  c.checkpoint_interval = 5;
  c.progress_timeout_s = 0;
  return c;
}

// ---- defaults, keys and shipped configs -----------------------------------------------------

TEST_F(ImageClassificationConfigTest, DefaultsAreCaramls) {
  expect_caraml_defaults(IC{});
  const LoadedIC loaded = load({});
  expect_caraml_defaults(loaded.config);
  EXPECT_TRUE(loaded.warnings.empty());
  ASSERT_EQ(loaded.origin.size(), kKeys.size());
  for (const auto& [key, origin] : loaded.origin) EXPECT_EQ(origin, "default") << key;
}

TEST_F(ImageClassificationConfigTest, KnownKeysInStructOrder) {
  EXPECT_EQ(known_keys<IC>(), kKeys);
  EXPECT_EQ(schema_of<IC>().size(), kKeys.size());
  // The untemplated helpers still mean ScaFFold's table (its count: test_config.cpp).
  EXPECT_EQ(known_keys<Config>(), known_keys<Config>());
}

TEST_F(ImageClassificationConfigTest, ShippedDefaultFileHasEveryKeyInOrder) {
  const std::string path = std::string(SCAFFOLD_SOURCE_DIR) + "/configs/image_classification.yml";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::vector<std::string> keys;
  const std::regex key_line(R"(^([A-Za-z_0-9]+):)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, key_line)) keys.push_back(m[1]);
    // One comment per key line.
    if (!line.empty() && line[0] != '#') {
      EXPECT_NE(line.find(" # "), std::string::npos) << line;
    }
  }
  EXPECT_EQ(keys, kKeys);
  const LoadedIC loaded = load({path});
  expect_caraml_defaults(loaded.config);
  EXPECT_TRUE(loaded.warnings.empty());
  for (const auto& [key, origin] : loaded.origin) EXPECT_EQ(origin, path) << key;
}

TEST_F(ImageClassificationConfigTest, QuickstartLoads) {
  const std::string path =
      std::string(SCAFFOLD_SOURCE_DIR) + "/configs/image_classification_quickstart.yml";
  const LoadedIC loaded = load({path});
  const IC& c = loaded.config;
  EXPECT_EQ(c.model, "resnet18");
  EXPECT_EQ(c.image_size, 32);
  EXPECT_EQ(c.num_classes, 10);
  EXPECT_EQ(c.dataset, "synthetic");
  EXPECT_EQ(c.synthetic_train_images, 512);
  EXPECT_EQ(c.synthetic_val_images, 128);
  EXPECT_TRUE(c.synthetic_separable);
  EXPECT_EQ(c.global_batch_size, 32);
  EXPECT_EQ(c.epochs, 3);
  EXPECT_EQ(c.warmup_epochs, 1);
  EXPECT_EQ(c.dataloader_num_workers, 1);
  EXPECT_EQ(c.precision, "fp32");
  EXPECT_TRUE(loaded.warnings.empty());
  EXPECT_EQ(loaded.origin.at("learning_rate"), "default");
}

TEST_F(ImageClassificationConfigTest, DocsNameEveryKey) {
  const std::string path = std::string(SCAFFOLD_SOURCE_DIR) + "/docs/config.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t section = text.find("## Image classification");
  ASSERT_NE(section, std::string::npos);
  const std::string tail = text.substr(section);
  for (const std::string& key : kKeys) EXPECT_CONTAINS(tail, "| `" + key + "` |");
}

// CARAML's defaults transcribed by hand from CARAML's trainer, image_classification/
// image_classification_torch.py (github.com/FZJ-JSC/CARAML, blob 7d1494b3), each with the source
// line it comes from, and compared with ours: the struct's and those loaded from no file.
// CARAML's values that are deliberately not ours (docs/image_classification.md) are not here:
// precision (CARAML fp16, which needs CUDA; ours fp32), seed (CARAML 1234; a different generator,
// so equal seeds would not give equal data), dataloader_num_workers (CARAML 0, JUBE threads/4).
struct CaramlDefault {
  const char* key;
  double caraml;       // the value in CARAML's file (booleans as 0/1)
  const char* source;  // the line of image_classification_torch.py it comes from
};
const std::vector<CaramlDefault> kCaramlDefaults = {
    {"learning_rate", 0.01, R"(parser.add_argument( "--lr", type=float, default=0.01,)"},
    // SGD's own defaults: momentum=0, weight_decay=0.
    {"momentum", 0.0, "optimizer = torch.optim.SGD(params,lr=args.lr)"},
    {"weight_decay", 0.0, "optimizer = torch.optim.SGD(params,lr=args.lr)"},
    {"lr_step_size", 10,
     "scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.1)"},
    {"lr_gamma", 0.1, "scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.1)"},
    {"loss_scale_init", 1, "scaler = torch.cuda.amp.GradScaler(init_scale=1,"},
    {"loss_scale_growth_interval", 100, "growth_interval=100,"},
    // fp32 sets no TF32 flag (only 'tf32' and 'fp16'/'bf16' do): PyTorch's defaults, cuDNN on.
    {"tf32", 1, "if args.precision == 'tf32': torch.backends.cuda.matmul.allow_tf32 = True"},
    {"epochs", 100, "parser.add_argument('--epochs', type=int, default=100,"},
    {"warmup_epochs", 5, "for epoch in range(5):  # warm up epochs"},
    // Per device in CARAML; ours is global and equal on one device.
    {"global_batch_size", 64, "parser.add_argument('--batch_size', type=int, default=64,"},
    // FakeData(size=10000); valid_length = len(dataset) // 10.
    {"synthetic_train_images", 9000, "dataset = datasets.FakeData(size=10000,"},
    {"synthetic_val_images", 1000, "valid_length = len(dataset) // 10"},
    // FakeData's default image_size (3, 224, 224).
    {"image_size", 224,
     "dataset = datasets.FakeData(size=10000, transform=transforms.ToTensor(),)"},
    {"channels_last", 1, "parser.add_argument('--channels_last', type=bool, default=True,"},
};

double value_of(const IC& c, const std::string& key) {
  if (key == "learning_rate") return c.learning_rate;
  if (key == "momentum") return c.momentum;
  if (key == "weight_decay") return c.weight_decay;
  if (key == "lr_step_size") return c.lr_step_size;
  if (key == "lr_gamma") return c.lr_gamma;
  if (key == "loss_scale_init") return c.loss_scale_init;
  if (key == "loss_scale_growth_interval") return c.loss_scale_growth_interval;
  if (key == "tf32") return c.tf32 ? 1 : 0;
  if (key == "epochs") return c.epochs;
  if (key == "warmup_epochs") return c.warmup_epochs;
  if (key == "global_batch_size") return c.global_batch_size;
  if (key == "synthetic_train_images") return c.synthetic_train_images;
  if (key == "synthetic_val_images") return c.synthetic_val_images;
  if (key == "image_size") return c.image_size;
  if (key == "channels_last") return c.channels_last ? 1 : 0;
  ADD_FAILURE() << "no such key in the table: " << key;
  return -1;
}

TEST_F(ImageClassificationConfigTest, DefaultsEqualCaramlsTrainer) {
  const IC loaded = load({}).config;
  for (const CaramlDefault& d : kCaramlDefaults) {
    EXPECT_EQ(value_of(IC{}, d.key), d.caraml) << d.key << " (CARAML: " << d.source << ")";
    EXPECT_EQ(value_of(loaded, d.key), d.caraml) << d.key << " loaded (CARAML: " << d.source << ")";
  }
  EXPECT_EQ(IC{}.model, "resnet50") << "parser.add_argument('--arch', default='resnet50',";
  EXPECT_EQ(IC{}.optimizer, "SGD") << "torch.optim.SGD";
}

TEST_F(ImageClassificationConfigTest, Tf32OffWithPrecisionTf32IsRefusedByName) {
  const std::string path = write("tf32.yml", "precision: tf32\ntf32: 0\n");
  const std::string message = load_error({path});
  EXPECT_EQ(problem_count(message), 1) << message;
  EXPECT_CONTAINS(line_with(message, "tf32 = 0"), "1 when precision is tf32");
  EXPECT_TRUE(load({write("ok.yml", "precision: tf32\ntf32: 1\n")}).config.tf32);
  EXPECT_FALSE(load({write("off.yml", "precision: fp32\ntf32: 0\n")}).config.tf32);
}

TEST_F(ImageClassificationConfigTest, AWinogradConvKernelOutsideFp32IsRefusedByName) {
  for (const char* kernel : {"winograd", "native_winograd", "probe"}) {
    const std::string path = write(std::string(kernel) + ".yml",
                                   "precision: bf16\nconv_kernel: " + std::string(kernel) + "\n");
    const std::string message = load_error({path});
    EXPECT_EQ(problem_count(message), 1) << message;
    EXPECT_CONTAINS(line_with(message, "conv_kernel = " + std::string(kernel)),
                    "auto or libtorch when precision is not fp32");
  }
  for (const char* kernel : {"auto", "libtorch"})
    EXPECT_EQ(load({write(std::string(kernel) + ".yml",
                          "precision: bf16\nconv_kernel: " + std::string(kernel) + "\n")})
                  .config.conv_kernel,
              kernel);
  EXPECT_EQ(load({write("w.yml", "precision: fp32\nconv_kernel: winograd\n")}).config.conv_kernel,
            "winograd");
}

TEST_F(ImageClassificationConfigTest, AFusedNormKernelOutsideFp32OrChannelsLastIsRefusedByName) {
  const std::string bf16 = load_error({write("bf16.yml", "precision: bf16\nnorm_kernel: fused\n")});
  EXPECT_EQ(problem_count(bf16), 1) << bf16;
  EXPECT_CONTAINS(line_with(bf16, "norm_kernel = fused"),
                  "auto or libtorch when precision is not fp32");
  const std::string nchw =
      load_error({write("nchw.yml", "channels_last: 0\nnorm_kernel: fused\n")});
  EXPECT_EQ(problem_count(nchw), 1) << nchw;
  EXPECT_CONTAINS(line_with(nchw, "norm_kernel = fused"),
                  "auto or libtorch when channels_last is 0");
  EXPECT_EQ(load({write("a.yml", "precision: bf16\nchannels_last: 0\nnorm_kernel: auto\n")})
                .config.norm_kernel,
            "auto");
  EXPECT_EQ(load({write("f.yml", "norm_kernel: fused\n")}).config.norm_kernel, "fused");
}

// ---- range checks ----------------------------------------------------------------------------

struct Rejected {
  const char* key;
  const char* value;    // as written in the file
  const char* allowed;  // the schema's allowed text, which the message must quote
};

// Every key's own check, one bad value each (BoundariesAccepted loads the values just inside).
TEST_F(ImageClassificationConfigTest, EveryRangeCheckRejectsNamingFileKeyValueAndAllowed) {
  const std::vector<Rejected> cases = {
      {"base_run_dir", "\"\"", "a non-empty path"},
      {"job_name", "a/b", "a non-empty name without '/'"},
      {"checkpoint_dir", "\"\"", "a non-empty path"},
      {"seed", "-1", "an integer >= 0"},
      {"model", "resnet51", "one of resnet18, resnet34, resnet50, resnet101, resnet152"},
      {"num_classes", "1", "an integer >= 2"},
      {"image_size", "31", "an integer in [32, 1024]"},
      {"image_size", "1025", "an integer in [32, 1024]"},
      {"dataset", "imagenet", "one of synthetic, synthetic_device, folder"},
      {"synthetic_train_images", "0", "an integer >= 1"},
      {"synthetic_val_images", "0", "an integer >= 1"},
      {"synthetic_separable", "2", "0, 1, true or false"},
      {"skip_bad_images", "yes", "0, 1, true or false"},
      {"global_batch_size", "0", "an integer >= 1"},
      {"epochs", "0", "an integer >= 1"},
      {"warmup_epochs", "-1", "an integer >= 0"},
      {"time_budget_s", "-0.5", "a number >= 0"},
      {"optimizer", "adam", "SGD, in any case: the only one so far"},
      {"learning_rate", "0", "a number > 0"},
      {"momentum", "1", "a number in [0, 1)"},
      {"momentum", "-0.1", "a number in [0, 1)"},
      {"weight_decay", "-1e-4", "a number >= 0"},
      {"lr_step_size", "0", "an integer >= 1"},
      {"lr_gamma", "0", "a number in (0, 1]"},
      {"lr_gamma", "1.5", "a number in (0, 1]"},
      {"precision", "fp8", "one of fp32, bf16, tf32, fp16"},
      {"tf32", "2", "0, 1, true or false"},
      {"loss_scale_init", "0", "a number > 0"},
      {"loss_scale_growth_interval", "0", "an integer >= 1"},
      {"channels_last", "on", "0, 1, true or false"},
      {"zero_init_residual", "-1", "0, 1, true or false"},
      {"conv_kernel", "fast", "one of auto, probe, winograd, native_winograd, libtorch"},
      {"norm_kernel", "fast", "one of auto, fused, libtorch"},
      {"optimizer_kernel", "fast", "one of auto, fused, libtorch"},
      {"dataloader_num_workers", "-1", "an integer >= 0"},
      {"device", "tpu", "one of auto, cpu, cuda"},
      {"checkpoint_interval", "-2", "an integer >= -1 (-1 or 0: no checkpoints)"},
      {"progress_timeout_s", "-1", "an integer >= 0"},
  };
  int n = 0;
  for (const Rejected& c : cases) {
    SCOPED_TRACE(std::string(c.key) + ": " + c.value);
    const std::string path =
        write("bad" + std::to_string(n++) + ".yml",
              "# one bad value\n" + std::string(c.key) + ": " + c.value + "\n");
    const std::string message = load_error({path});
    EXPECT_EQ(problem_count(message), 1) << message;
    const std::string line = line_with(message, std::string(c.key) + " = " + c.value + ":");
    EXPECT_EQ(line.rfind("  " + path + ":2: ", 0), 0u) << line;
    EXPECT_CONTAINS(line, std::string("expected ") + c.allowed);
  }
  // The allowed text of each key is what --help and the docs show.
  for (const Rejected& c : cases) EXPECT_EQ(find_key<IC>(c.key)->allowed, c.allowed) << c.key;
}

TEST_F(ImageClassificationConfigTest, BoundariesAccepted) {
  const std::string path = write("edge.yml",
                                 "seed: 0\n"
                                 "num_classes: 2\n"
                                 "image_size: 1024\n"
                                 "synthetic_train_images: 1\n"
                                 "synthetic_val_images: 1\n"
                                 "global_batch_size: 1\n"
                                 "epochs: 1\n"
                                 "warmup_epochs: 0\n"
                                 "time_budget_s: 0.5\n"
                                 "learning_rate: 1e-9\n"
                                 "momentum: 0\n"
                                 "weight_decay: 0\n"
                                 "lr_step_size: 1\n"
                                 "lr_gamma: 1\n"
                                 "dataloader_num_workers: 0\n"
                                 "checkpoint_interval: 0\n"
                                 "progress_timeout_s: 0\n");
  const IC c = load({path}).config;
  EXPECT_EQ(c.image_size, 1024);
  EXPECT_EQ(c.time_budget_s, 0.5);
  EXPECT_EQ(c.learning_rate, 1e-9);
  EXPECT_EQ(c.lr_gamma, 1.0);
  EXPECT_EQ(load({write("small.yml", "image_size: 32\n")}).config.image_size, 32);
  EXPECT_EQ(load({write("int.yml", "time_budget_s: 60\n")}).config.time_budget_s, 60.0);
}

TEST_F(ImageClassificationConfigTest, ChoicesAnyCaseStoredCanonically) {
  const IC c = load({write("a.yml",
                           "model: ResNet18\ndataset: SYNTHETIC_DEVICE\noptimizer: sgd\n"
                           "precision: BF16\ndevice: CUDA\n")})
                   .config;
  EXPECT_EQ(c.model, "resnet18");
  EXPECT_EQ(c.dataset, "synthetic_device");
  EXPECT_EQ(c.optimizer, "SGD");
  EXPECT_EQ(c.precision, "bf16");
  EXPECT_EQ(c.device, "cuda");
  for (const char* p : {"fp32", "bf16", "tf32", "fp16"})
    EXPECT_EQ(load({write(std::string(p) + ".yml", std::string("precision: ") + p + "\n")})
                  .config.precision,
              p);
}

TEST_F(ImageClassificationConfigTest, KindsCheckedAsForEveryStruct) {
  const std::string path = write("kinds.yml",
                                 "num_classes: 10.5\n"
                                 "image_size: \"64\"\n"
                                 "epochs: true\n"
                                 "learning_rate: .nan\n"
                                 "model: [resnet18, resnet50]\n"
                                 "seed:\n");
  const std::string message = load_error({path});
  EXPECT_EQ(problem_count(message), 6) << message;
  EXPECT_CONTAINS(line_with(message, "num_classes = 10.5"), "non-integer");
  EXPECT_CONTAINS(line_with(message, "image_size = \"64\""), "got a string");
  EXPECT_CONTAINS(line_with(message, "epochs = true"), "boolean");
  EXPECT_CONTAINS(line_with(message, "learning_rate = .nan"), "non-finite");
  EXPECT_CONTAINS(line_with(message, "model = [resnet18, resnet50]"),
                  "parameter sweeps are not supported");
  EXPECT_CONTAINS(line_with(message, "seed ="), "no value");
}

// ---- the folder dataset needs data_dir ------------------------------------------------------

TEST_F(ImageClassificationConfigTest, FolderDatasetNeedsDataDir) {
  const std::string path = write("folder.yml", "dataset: folder\n");
  const std::string message = load_error({path});
  EXPECT_EQ(problem_count(message), 1) << message;
  const std::string line = line_with(message, "data_dir");
  EXPECT_EQ(line.rfind("  default: data_dir = \"\": expected a non-empty path when dataset is "
                       "folder",
                       0),
            0u)
      << line;
  EXPECT_CONTAINS(line, "(dataset = folder from " + path + ":1)");

  // Given but empty: the file's line is named.
  const std::string empty = write("empty.yml", "dataset: folder\ndata_dir: \"\"\n");
  EXPECT_CONTAINS(line_with(load_error({empty}), "data_dir = \"\""), empty + ":2");

  // A bad dataset is reported once, without also blaming data_dir.
  const std::string bad = load_error({write("bad.yml", "dataset: imagefolder\n")});
  EXPECT_EQ(problem_count(bad), 1) << bad;

  // With data_dir the folder dataset loads; synthetic needs none.
  const LoadedIC ok = load({path}, {{"data_dir", "--data-dir", std::string("/data/set")}});
  EXPECT_EQ(ok.config.dataset, "folder");
  EXPECT_EQ(ok.config.data_dir, "/data/set");
  EXPECT_EQ(ok.origin.at("data_dir"), "--data-dir");
  EXPECT_EQ(load({write("s.yml", "dataset: synthetic_device\n")}).config.data_dir, "");
}

TEST_F(ImageClassificationConfigTest, PathKeysBecomeAbsoluteAndAnEmptyDataDirStaysEmpty) {
  const std::string path = write("a.yml", "base_run_dir: runs/./ic/\njob_name: j\n");
  const LoadedIC loaded = load({path}, {}, /*resolve_paths=*/true);
  EXPECT_EQ(loaded.config.base_run_dir, (fs::current_path() / "runs" / "ic").string());
  EXPECT_EQ(loaded.config.data_dir, "");                   // unused: not turned into the cwd
  EXPECT_EQ(loaded.config.checkpoint_dir, "checkpoints");  // a subdirectory of the run dir
  const std::string folder = write("b.yml", "dataset: folder\ndata_dir: imgs/../images\n");
  EXPECT_EQ(load({folder}, {}, true).config.data_dir, (fs::current_path() / "images").string());
}

// ---- key names: this schema has no ScaFFold history -------------------------------------------

TEST_F(ImageClassificationConfigTest, UnknownKeysHintOnlyAtThisSchemasKeys) {
  const std::string path = write("a.yml",
                                 "modle: resnet18\n"
                                 "batch_size: 32\n"
                                 "command: benchmark\n"
                                 "problem_scale: 5\n");
  const std::string message = load_error({path});
  EXPECT_EQ(problem_count(message), 4) << message;
  EXPECT_CONTAINS(line_with(message, "modle"), "did you mean 'model'?");
  // ScaFFold's rename note and auxiliary keys belong to Config's schema only.
  const std::string renamed = line_with(message, "batch_size = 32");
  EXPECT_CONTAINS(renamed, "unknown key");
  EXPECT_EQ(renamed.find("local_batch_size"), std::string::npos) << renamed;
  EXPECT_CONTAINS(line_with(message, "command = benchmark"), "unknown key");
  EXPECT_CONTAINS(line_with(message, "problem_scale = 5"), "unknown key");
  EXPECT_FALSE(is_aux_key<IC>("command"));
  EXPECT_TRUE(is_aux_key<Config>("command"));
  EXPECT_EQ(unknown_key_hint<IC>("batch_size"), "");
  EXPECT_EQ(unknown_key_hint<Config>("batch_size"), "it was renamed 'local_batch_size'");
  EXPECT_EQ(find_key<IC>("problem_scale"), nullptr);
  EXPECT_EQ(find_key<Config>("model"), nullptr);
}

// ---- flags --------------------------------------------------------------------------------

TEST_F(ImageClassificationConfigTest, FlagsWinEvenAtTheDefault) {
  const std::string path = write("a.yml", "epochs: 7\nchannels_last: 0\nmodel: resnet18\n");
  const LoadedIC loaded =
      load({path}, {{"epochs", "--epochs", int64_t{100}},
                    {"channels_last", "--channels-last", bool_flag_value("true")},
                    {"learning_rate", "--learning-rate", 0.1},
                    {"model", "--model", std::string("resnet50")}});
  EXPECT_EQ(loaded.config.epochs, 100);
  EXPECT_TRUE(loaded.config.channels_last);
  EXPECT_EQ(loaded.config.learning_rate, 0.1);
  EXPECT_EQ(loaded.config.model, "resnet50");
  EXPECT_EQ(loaded.origin.at("epochs"), "--epochs");
  EXPECT_EQ(loaded.origin.at("channels_last"), "--channels-last");
  EXPECT_EQ(loaded.origin.at("model"), "--model");
}

TEST_F(ImageClassificationConfigTest, BoolFlagTextReadAsABooleanKeyReadsAFile) {
  for (const char* yes : {"1", "true", "True", "TRUE"})
    EXPECT_EQ(bool_flag_value(yes), FlagValue(int64_t{1})) << yes;
  for (const char* no : {"0", "false", "False", "FALSE"})
    EXPECT_EQ(bool_flag_value(no), FlagValue(int64_t{0})) << no;
  // Anything else stays text, and loading names the flag, the value and what is allowed.
  const std::string message =
      load_error({}, {{"channels_last", "--channels-last", bool_flag_value("yes")},
                      {"skip_bad_images", "--skip-bad-images", bool_flag_value("2")}});
  EXPECT_EQ(problem_count(message), 2) << message;
  EXPECT_CONTAINS(line_with(message, "--channels-last"),
                  "channels_last = yes: expected 0, 1, true or false");
  EXPECT_CONTAINS(line_with(message, "--skip-bad-images"),
                  "skip_bad_images = 2: expected 0, 1, true or false");
}

// ---- YAML output -----------------------------------------------------------------------------

TEST_F(ImageClassificationConfigTest, ToYamlRoundTripsEveryKeyExactly) {
  const IC original = non_default_config();
  const std::string text = to_yaml(original);
  expect_same(from_yaml_text<IC>(text, "broadcast"), original);
  const std::string path = write("config.yaml", text);
  const LoadedIC loaded = load({path});
  expect_same(loaded.config, original);
  for (const auto& [key, origin] : loaded.origin) EXPECT_EQ(origin, path) << key;
  // Defaults too.
  expect_same(from_yaml_text<IC>(to_yaml(IC{}), "defaults"), IC{});
}

TEST_F(ImageClassificationConfigTest, ToYamlFormat) {
  const std::string text = to_yaml(IC{});
  EXPECT_EQ(text.rfind("# ", 0), 0u);
  EXPECT_CONTAINS(text, "`scaffold image_classification -c <this file>`");
  for (const char* line :
       {"\nbase_run_dir: image_classification_runs\n", "\ndata_dir: \"\"\n", "\nseed: 42\n",
        "\nmodel: resnet50\n", "\ntime_budget_s: 0.0\n", "\nlearning_rate: 0.01\n",
        "\nweight_decay: 0.0\n", "\nlr_gamma: 0.1\n", "\nchannels_last: 1\n", "\ntf32: 1\n",
        "\nloss_scale_init: 1.0\n", "\nloss_scale_growth_interval: 100\n",
        "\nsynthetic_separable: 0\n", "\ncheckpoint_interval: -1\n", "\nprecision: fp32\n"})
    EXPECT_CONTAINS(text, line);
  std::vector<std::string> keys;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') keys.push_back(line.substr(0, line.find(':')));
  EXPECT_EQ(keys, kKeys);
}

TEST_F(ImageClassificationConfigTest, YamlTextErrorsNameSource) {
  try {
    from_yaml_text<IC>("image_size: 8\n", "rank0-broadcast");
    FAIL() << "no error";
  } catch (const core::Error& e) {
    EXPECT_CONTAINS(e.what(),
                    "rank0-broadcast:1: image_size = 8: expected an integer in [32, 1024]");
  }
}

}  // namespace
}  // namespace scaffold::config
