// serialize_state / deserialize_state and the checkpoint files (docs/benchmark.md): a round trip
// restores parameters, Adam state, options, counters and the CPU generator exactly; anything that
// is not a checkpoint of this model (garbage, truncated, foreign archive, other version, other
// architecture) is a core::FileError naming its source, never a crash. The Trainer's use of them:
// test_trainer.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/string_utils.h>
#include <gtest/gtest.h>
#include <torch/optim/adam.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/sha256.hpp"
#include "kernels/probe_verdicts.hpp"
#include "test_util.hpp"
#include "train/checkpoint.hpp"
#include "train/checkpoint_envelope.hpp"
#include "unit/train/tensor_identical.hpp"
#include "workloads/scaffold/model/unet.hpp"

namespace scaffold::train {
namespace {

namespace fs = std::filesystem;

model::UNet3d small_model(uint64_t seed, int layers = 1) {
  torch::manual_seed(seed);
  model::UNetOptions o;
  o.in_channels = 3;
  o.n_classes = 3;
  o.layers = layers;
  o.base_channels = 4;
  o.group_norm_groups = 2;
  return model::UNet3d(o);
}

// A model with two Adam steps behind it, so every kind of state is non-trivial.
struct Trained {
  explicit Trained(uint64_t seed, double lr = 1e-2)
      : model(small_model(seed)), adam(model->parameters(), torch::optim::AdamOptions(lr)) {
    for (int step = 0; step < 2; ++step) {
      adam.zero_grad();
      model->forward(at::rand({1, 3, 4, 4, 4})).square().mean().backward();
      adam.step();
    }
  }
  model::UNet3d model;
  torch::optim::Adam adam;
};

TrainCounters sample_counters() {
  TrainCounters c;
  c.epoch = 12;
  c.total_optimizer_steps = 345;
  c.stop_value = 0.8125;
  c.val_loss_avg = 0.3;
  c.best_val_loss = 0.1 + 0.2;  // not a short decimal: must survive as a double
  return c;
}

using test::identical;

const torch::optim::AdamParamState& adam_state(const torch::optim::Optimizer& opt,
                                               const at::Tensor& p) {
  return static_cast<const torch::optim::AdamParamState&>(
      *opt.state().at(c10::guts::to_string(p.unsafeGetTensorImpl())));
}

void expect_same_state(model::UNet3d& actual, const torch::optim::Adam& actual_adam,
                       model::UNet3d& expected, const torch::optim::Adam& expected_adam) {
  const auto pa = actual->named_parameters();
  const auto pe = expected->parameters();
  ASSERT_EQ(pa.size(), pe.size());
  ASSERT_EQ(actual_adam.state().size(), expected_adam.state().size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const std::string name = pa[i].key();
    EXPECT_TRUE(identical(pa[i].value(), pe[i], name));
    const auto& sa = adam_state(actual_adam, pa[i].value());
    const auto& se = adam_state(expected_adam, pe[i]);
    EXPECT_EQ(sa.step(), se.step()) << name;
    EXPECT_TRUE(identical(sa.exp_avg(), se.exp_avg(), name + " exp_avg"));
    EXPECT_TRUE(identical(sa.exp_avg_sq(), se.exp_avg_sq(), name + " exp_avg_sq"));
  }
  const auto& oa =
      static_cast<const torch::optim::AdamOptions&>(actual_adam.param_groups()[0].options());
  const auto& oe =
      static_cast<const torch::optim::AdamOptions&>(expected_adam.param_groups()[0].options());
  EXPECT_EQ(oa.lr(), oe.lr());
  EXPECT_EQ(oa.betas(), oe.betas());
  EXPECT_EQ(oa.eps(), oe.eps());
}

void expect_same_counters(const TrainCounters& a, const TrainCounters& e) {
  EXPECT_EQ(a.epoch, e.epoch);
  EXPECT_EQ(a.total_optimizer_steps, e.total_optimizer_steps);
  EXPECT_EQ(a.stop_value, e.stop_value);
  EXPECT_EQ(a.val_loss_avg, e.val_loss_avg);
  EXPECT_EQ(a.best_val_loss, e.best_val_loss);
}

// The message of the core::FileError `fn` throws, or a note that it threw none.
template <typename Fn>
std::string file_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const core::FileError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(not a core::FileError: ") + e.what() + ")";
  }
  return "(no exception thrown)";
}

TEST(CheckpointState, InMemoryRoundTripRestoresEverythingExactly) {
  Trained source(1);
  const std::string bytes = serialize_state(*source.model, source.adam, sample_counters());
  const at::Tensor draw_after_save = at::rand({8});  // what the generator gives next

  // Other parameters and Adam moments. Same learning rate: LibTorch 1.13's Optimizer::load
  // restores per-parameter state only and keeps the target's group options, and the trainer sets
  // the LR from the epoch after every load (a closed form), so checkpoints need not carry it.
  Trained target(2);
  ASSERT_FALSE(at::equal(target.model->parameters()[0], source.model->parameters()[0]));
  const TrainCounters restored = deserialize_state(bytes, "memory", *target.model, target.adam);
  expect_same_counters(restored, sample_counters());
  expect_same_state(target.model, target.adam, source.model, source.adam);
  EXPECT_TRUE(identical(at::rand({8}), draw_after_save, "CPU generator draw after restore"));

  // Restored parameters are still the ones the optimiser updates (loaded in place).
  const at::Tensor p0 = target.model->parameters()[0].detach().clone();
  target.adam.zero_grad();
  target.model->forward(at::rand({1, 3, 4, 4, 4})).square().mean().backward();
  target.adam.step();
  EXPECT_FALSE(at::equal(target.model->parameters()[0], p0)) << "optimiser lost its parameters";
}

TEST(CheckpointState, FileRoundTripAndNoTemporaryLeftOver) {
  test::TempDir dir;
  const fs::path file = dir.path() / "sub" / "checkpoint_last";
  Trained source(3);
  save_checkpoint(file, *source.model, source.adam, sample_counters());
  ASSERT_TRUE(fs::exists(file));
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(file.parent_path())) ++entries;
  EXPECT_EQ(entries, 1) << "a temporary file was left next to the checkpoint";

  Trained target(4);
  expect_same_counters(load_checkpoint(file, *target.model, target.adam), sample_counters());
  expect_same_state(target.model, target.adam, source.model, source.adam);
}

// The kernel probes' verdicts travel in the file: a resume adopts them, so a new process runs the
// kernels the first one chose; a warm-up snapshot (in memory, the same process) leaves them be.
TEST(CheckpointState, AFileCarriesTheKernelVerdictsAndAResumeRestoresThem) {
  kernels::ProbeVerdicts& store = kernels::probe_verdicts();
  const std::string key =
      "checkpoint-test probe 7x7";  // this test's own key in the process's store
  ASSERT_EQ(store.choose(key, [] { return kernels::ProbeResult{"fast", {}}; }), "fast");
  test::TempDir dir;
  const fs::path file = dir.path() / "checkpoint_last";
  Trained source(5);
  save_checkpoint(file, *source.model, source.adam, sample_counters());
  const std::string bytes = serialize_state(*source.model, source.adam, sample_counters());

  // What another process measured for the same shape.
  ASSERT_EQ(store.restore(key + "\tslow\n", "another process"), 1u);
  const auto probe_again = [] { return kernels::ProbeResult{"probed again", {}}; };
  Trained target(6);
  deserialize_state(bytes, "warm-up snapshot", *target.model, target.adam);
  EXPECT_EQ(store.choose(key, probe_again), "slow") << "a snapshot restored the verdicts";
  load_checkpoint(file, *target.model, target.adam);
  EXPECT_EQ(store.choose(key, probe_again), "fast") << "the resume did not restore the verdicts";
  const std::vector<std::string> lines = store.restored_lines();
  EXPECT_NE(std::find(lines.begin(), lines.end(), key + " -> fast (restored from the checkpoint)"),
            lines.end());
}

TEST(CheckpointState, GarbageBytesAreAFileErrorNamingTheSource) {
  Trained target(5);
  for (const std::string& bytes : {std::string(), std::string("garbage"), std::string(4096, '\0'),
                                   std::string("PK\x03\x04")}) {
    const std::string msg = file_error_of(
        [&] { deserialize_state(bytes, "the-source.pth", *target.model, target.adam); });
    EXPECT_EQ(msg.rfind("the-source.pth: ", 0), 0u) << bytes.size() << " bytes: " << msg;
  }
}

TEST(CheckpointState, TruncatedBytesAreAFileError) {
  Trained source(6);
  const std::string bytes = serialize_state(*source.model, source.adam, sample_counters());
  Trained target(7);
  for (std::size_t keep : {bytes.size() / 2, bytes.size() - 1, std::size_t{100}}) {
    const std::string msg = file_error_of(
        [&] { deserialize_state(bytes.substr(0, keep), "cut", *target.model, target.adam); });
    EXPECT_EQ(msg.rfind("cut: ", 0), 0u) << keep << " of " << bytes.size() << " bytes: " << msg;
  }
}

// A checkpoint written before the counter was renamed stores it as "val_dice" (version 1 all
// the same): it loads, the value becoming stop_value. The archive is assembled here by hand with
// that key, as the old writer laid it out.
TEST(CheckpointState, AnOldCheckpointsValDiceLoadsAsTheStopValue) {
  Trained source(4);
  torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
  source.model->save(model_archive);
  source.adam.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("version", at::scalar_tensor(int64_t{1}, at::kLong));
  archive.write("epoch", at::scalar_tensor(int64_t{3}, at::kLong));
  archive.write("total_optimizer_steps", at::scalar_tensor(int64_t{30}, at::kLong));
  archive.write("val_dice", at::scalar_tensor(0.625, at::kDouble));
  archive.write("val_loss_avg", at::scalar_tensor(0.5, at::kDouble));
  archive.write("best_val_loss", at::scalar_tensor(0.25, at::kDouble));
  archive.write("rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  std::ostringstream out;
  archive.save_to(out);
  Trained target(5);
  const TrainCounters c =
      deserialize_state(checkpoint_envelope(out.str()), "old.pt", *target.model, target.adam);
  EXPECT_EQ(c.epoch, 3);
  EXPECT_EQ(c.total_optimizer_steps, 30);
  EXPECT_EQ(c.stop_value, 0.625);
  EXPECT_EQ(c.best_val_loss, 0.25);
  expect_same_state(target.model, target.adam, source.model, source.adam);
}

TEST(CheckpointState, ForeignArchiveOtherVersionAndOtherArchitectureAreFileErrors) {
  Trained target(8);
  auto archive_bytes = [](int64_t version, bool with_version) {
    torch::serialize::OutputArchive a;
    if (with_version) a.write("version", at::scalar_tensor(version, at::kLong));
    a.write("weights", at::ones({3}));
    std::ostringstream out;
    a.save_to(out);
    return out.str();
  };
  const std::string foreign = file_error_of(
      [&] { deserialize_state(archive_bytes(0, false), "foreign", *target.model, target.adam); });
  EXPECT_EQ(foreign.rfind("foreign: ", 0), 0u) << foreign;

  const std::string version = file_error_of(
      [&] { deserialize_state(archive_bytes(2, true), "v2", *target.model, target.adam); });
  EXPECT_EQ(version.rfind("v2: ", 0), 0u) << version;
  EXPECT_NE(version.find("version"), std::string::npos) << version;
  // The same archive in this format's envelope (header written here by hand) reaches the
  // version check itself.
  const std::string v2 = archive_bytes(2, true);
  const std::string enveloped = "scaffold-checkpoint sha256=" + core::sha256_hex(v2) +
                                " bytes=" + std::to_string(v2.size()) + "\n" + v2;
  const std::string version2 =
      file_error_of([&] { deserialize_state(enveloped, "v2e", *target.model, target.adam); });
  EXPECT_EQ(version2, "v2e: checkpoint format version differs from this scaffold's");

  // A checkpoint of a deeper U-Net does not fit this one.
  auto deep = small_model(9, /*layers=*/2);
  torch::optim::Adam deep_adam(deep->parameters(), torch::optim::AdamOptions(1e-3));
  const std::string deep_bytes = serialize_state(*deep, deep_adam, sample_counters());
  const std::string arch =
      file_error_of([&] { deserialize_state(deep_bytes, "deep", *target.model, target.adam); });
  EXPECT_EQ(arch.rfind("deep: ", 0), 0u) << arch;
}

// Same parameter names and count, other shapes (unet_base_channels 8 vs 4). Disabled: it fails
// today. Module::load() assigns each stored tensor with set_(), which adopts the stored shape, and
// Adam's load only checks parameter counts, so the checkpoint loads silently and the "4-channel"
// model becomes the 8-channel one (forward runs; count_parameters reports the wide count).
// PyTorch's strict load_state_dict refuses this. Enable once deserialize_state checks shapes.
TEST(CheckpointState, CheckpointOfAWiderModelIsAFileError) {
  Trained target(8);
  torch::manual_seed(9);
  model::UNetOptions o;
  o.n_classes = 3;
  o.layers = 1;
  o.base_channels = 8;
  o.group_norm_groups = 2;
  model::UNet3d wide(o);
  torch::optim::Adam wide_adam(wide->parameters(), torch::optim::AdamOptions(1e-3));
  const std::string bytes = serialize_state(*wide, wide_adam, sample_counters());
  const std::vector<int64_t> first_shape = target.model->parameters()[0].sizes().vec();
  const std::string msg =
      file_error_of([&] { deserialize_state(bytes, "wide", *target.model, target.adam); });
  EXPECT_EQ(msg.rfind("wide: ", 0), 0u) << msg;
  EXPECT_EQ(target.model->parameters()[0].sizes().vec(), first_shape)
      << "the model took the checkpoint's shapes";
}

// The file is one header line, "scaffold-checkpoint sha256=<hex> bytes=<n>", then the LibTorch
// archive; the digest is SHA-256 of exactly the archive bytes (checked here with the project's
// FIPS-tested SHA-256 on the bytes after the first newline).
TEST(CheckpointState, FileCarriesTheSha256OfItsArchive) {
  Trained source(12);
  const std::string bytes = serialize_state(*source.model, source.adam, sample_counters());
  const std::size_t eol = bytes.find('\n');
  ASSERT_NE(eol, std::string::npos);
  const std::string archive = bytes.substr(eol + 1);
  EXPECT_EQ(archive.substr(0, 4), std::string("PK\x03\x04", 4)) << "the archive follows the header";
  EXPECT_EQ(bytes.substr(0, eol), "scaffold-checkpoint sha256=" + core::sha256_hex(archive) +
                                      " bytes=" + std::to_string(archive.size()));
}

// A flipped byte anywhere in the archive (here: in the middle, inside stored tensor data, and in
// the last byte) is refused before any weight is read (issue 16, item 7); before the digest a
// flip inside tensor data loaded silently as different weights.
TEST(CheckpointState, FlippedByteIsRefusedByTheDigestAndLeavesTheModelAlone) {
  Trained source(13);
  const std::string bytes = serialize_state(*source.model, source.adam, sample_counters());
  Trained target(14);
  const std::vector<at::Tensor> before = [&] {
    std::vector<at::Tensor> out;
    for (const auto& p : target.model->parameters()) out.push_back(p.detach().clone());
    return out;
  }();
  const std::size_t eol = bytes.find('\n');
  for (std::size_t at : {eol + 1 + (bytes.size() - eol) / 2, bytes.size() - 1, eol + 40}) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    const std::string msg =
        file_error_of([&] { deserialize_state(flipped, "flipped", *target.model, target.adam); });
    EXPECT_EQ(msg.rfind("flipped: checkpoint fails its SHA-256 check", 0), 0u)
        << "byte " << at << ": " << msg;
  }
  const auto after = target.model->parameters();
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(at::equal(before[i], after[i])) << "parameter " << i << " changed";
}

// Intact but of another model: a CheckpointMismatch (the command is wrong, not the file), which a
// restart must not set aside as corrupt.
TEST(CheckpointState, AnotherModelIsAMismatchNotDamage) {
  Trained target(15);
  auto deep = small_model(16, /*layers=*/2);
  torch::optim::Adam deep_adam(deep->parameters(), torch::optim::AdamOptions(1e-3));
  const std::string deep_bytes = serialize_state(*deep, deep_adam, sample_counters());
  EXPECT_THROW(deserialize_state(deep_bytes, "deep", *target.model, target.adam),
               CheckpointMismatch);
  Trained source(17);
  std::string cut = serialize_state(*source.model, source.adam, sample_counters());
  cut.resize(cut.size() - 10);
  try {
    deserialize_state(cut, "cut", *target.model, target.adam);
    ADD_FAILURE() << "a cut checkpoint loaded";
  } catch (const CheckpointMismatch& e) {
    ADD_FAILURE() << "a cut checkpoint is damage, not a mismatch: " << e.what();
  } catch (const core::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

TEST(CheckpointState, MissingAndTruncatedFilesNameTheFile) {
  test::TempDir dir;
  Trained target(10);
  const fs::path missing = dir.path() / "checkpoint_last";
  const std::string m =
      file_error_of([&] { load_checkpoint(missing, *target.model, target.adam); });
  EXPECT_NE(m.find(missing.string()), std::string::npos) << m;

  const fs::path cut = dir.path() / "checkpoint_best";
  save_checkpoint(cut, *target.model, target.adam, sample_counters());
  const std::string bytes = core::read_file(cut);
  core::write_file_atomic(cut, std::string_view(bytes).substr(0, bytes.size() / 3));
  const std::string t = file_error_of([&] { load_checkpoint(cut, *target.model, target.adam); });
  EXPECT_EQ(t.rfind(cut.string() + ": ", 0), 0u) << t;
}

// async_save's writer: the background write lands the same bytes, in order (the second write to
// a file wins), creating the folder; a failed write is rethrown by wait() naming the file.
TEST(CheckpointWriter, BackgroundWritesLandInOrderAndFailuresSurface) {
  test::TempDir dir;
  for (bool background : {false, true}) {
    CheckpointWriter writer(background);
    EXPECT_EQ(writer.background(), background);
    const fs::path file = dir.path() / (background ? "bg" : "fg") / "checkpoint_last";
    writer.write(file, "first");
    writer.write(file, std::string(1 << 20, 'x'));  // waits for the first
    writer.wait();
    EXPECT_EQ(core::read_file(file), std::string(1 << 20, 'x')) << background;
  }
  CheckpointWriter writer(true);
  const fs::path blocked = dir.path() / "a_file";
  core::write_file_atomic(blocked, "not a folder");
  writer.write(blocked / "checkpoint_last", "bytes");
  try {
    writer.wait();
    FAIL() << "no error";
  } catch (const core::FileError& e) {
    EXPECT_NE(std::string(e.what()).find(blocked.string()), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(writer.wait());  // reported once
}

// The envelope has one form: the header the writer makes (lowercase digest as hashlib prints it,
// the length in plain decimal). Anything else is refused, so a fuzzed or hand-edited header
// cannot pass for an intact one.
TEST(CheckpointEnvelope, OneCanonicalHeaderAndEverythingElseRefused) {
  const std::string archive = "archive bytes";
  // sha256("archive bytes"), from Python's hashlib.
  const std::string digest = "cc9c340301ad4ba5e54aa24b442ff938d1ed84f7f32c4c5a73773c58af37bd1b";
  const std::string good = "scaffold-checkpoint sha256=" + digest + " bytes=13\n" + archive;
  EXPECT_EQ(checkpoint_envelope(archive), good);
  const OpenedEnvelope e = open_checkpoint_envelope(good, "x.pt");
  EXPECT_FALSE(e.bare_archive);
  EXPECT_EQ(e.archive, archive);
  std::string upper = digest;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const std::string& bad :
       {"scaffold-checkpoint sha256=" + digest + " bytes=013\n" + archive,  // leading zero
        "scaffold-checkpoint sha256=" + upper + " bytes=13\n" +
            archive,  // another spelling of the digest
        "scaffold-checkpoint sha256=" + digest + " bytes=+13\n" + archive,  // a sign
        "scaffold-checkpoint sha256=" + digest + " bytes=\n" + archive,     // no length
        "scaffold-checkpoint sha256=" + digest + " bytes=14\n" + archive,   // length
        good + "x",                                                         // extended
        "scaffold-checkpoint sha256=" + digest + " bytes=99999999999999999999\n"}) {
    try {
      (void)open_checkpoint_envelope(bad, "x.pt");
      ADD_FAILURE() << "accepted: " << bad.substr(0, 120);
    } catch (const core::FileError& err) {
      EXPECT_NE(std::string(err.what()).find("x.pt"), std::string::npos) << err.what();
    }
  }
  EXPECT_TRUE(open_checkpoint_envelope(std::string("PK\x03\x04rest", 8), "x.pt").bare_archive);
}

}  // namespace
}  // namespace scaffold::train
