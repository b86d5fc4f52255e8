// The schema table: every Config key with its kind, help, allowed values and range checks, and
// the scalar rules shared by files and flags (what counts as an integer, a number, a boolean).
// Scalars follow YAML 1.2's core schema, not PyYAML's 1.1 quirks: 1e-3 is a number here, and
// yes/no/on/off are not booleans. Merging sources and reporting problems live in load.cpp.
#include "config/schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "core/pyfloat.hpp"

namespace scaffold::config {
namespace {

// ---- scalar classification ------------------------------------------------------------------

enum class ScalarType { kInteger, kFloat, kNonFinite, kBool, kString };

struct Scalar {
  ScalarType type = ScalarType::kString;
  int64_t i = 0;
  double d = 0.0;
  bool b = false;
  bool overflow = false;  // an integer literal outside int64
};

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// [-+]? ( digits ( . digits? )? | . digits ) ( [eE] [-+]? digits )?
bool looks_like_float(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  const std::size_t e = s.find_first_of("eE");
  std::string_view mantissa = s.substr(0, e);
  if (e != std::string_view::npos) {
    std::string_view exponent = s.substr(e + 1);
    if (!exponent.empty() && (exponent[0] == '-' || exponent[0] == '+')) exponent.remove_prefix(1);
    if (!all_digits(exponent)) return false;
  }
  const std::size_t dot = mantissa.find('.');
  if (dot == std::string_view::npos) return all_digits(mantissa);
  const std::string_view whole = mantissa.substr(0, dot);
  const std::string_view frac = mantissa.substr(dot + 1);
  if (whole.empty() && frac.empty()) return false;
  return (whole.empty() || all_digits(whole)) && (frac.empty() || all_digits(frac));
}

Scalar classify(const RawValue& v) {
  Scalar out;
  if (v.quoted) return out;  // a quoted YAML scalar or a string flag is always a string
  std::string_view s = v.scalar;
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    out.type = ScalarType::kBool;
    out.b = s[0] == 't' || s[0] == 'T';
    return out;
  }
  std::string_view unsigned_part = s;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) unsigned_part.remove_prefix(1);
  if (unsigned_part == ".inf" || unsigned_part == ".Inf" || unsigned_part == ".INF" ||
      s == ".nan" || s == ".NaN" || s == ".NAN") {
    out.type = ScalarType::kNonFinite;
    return out;
  }
  // std::from_chars takes no leading '+'.
  std::string_view digits = (!s.empty() && s[0] == '+') ? s.substr(1) : s;
  if (all_digits(unsigned_part)) {
    out.type = ScalarType::kInteger;
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), out.i);
    out.overflow = r.ec == std::errc::result_out_of_range;
    if (out.overflow) std::from_chars(digits.data(), digits.data() + digits.size(), out.d);
    return out;
  }
  if (looks_like_float(s)) {
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), out.d);
    out.type =
        (r.ec == std::errc() && std::isfinite(out.d)) ? ScalarType::kFloat : ScalarType::kNonFinite;
    return out;
  }
  return out;
}

std::string got(const Scalar& s) {
  switch (s.type) {
    case ScalarType::kBool:
      return " (got a boolean)";
    case ScalarType::kFloat:
      return " (got a non-integer number)";
    case ScalarType::kNonFinite:
      return " (got a non-finite number)";
    case ScalarType::kInteger:
      return " (out of range)";
    case ScalarType::kString:
      return " (got a string)";
  }
  return "";
}

// Null, list and mapping values for a single-valued key; "" when `v` is a scalar.
std::string shape_error(const KeySpec& spec, const RawValue& v) {
  switch (v.form) {
    case RawValue::Form::kScalar:
      return "";
    case RawValue::Form::kNull:
      return "no value given; expected " + spec.allowed;
    case RawValue::Form::kList:
      return "parameter sweeps are not supported: give a single value and launch one run per "
             "setting (e.g. with the JUBE campaigns)";
    case RawValue::Form::kMap:
      return "expected " + spec.allowed + ", not a mapping";
  }
  return "";
}

// ---- storing a RawValue into each member type -----------------------------------------------

Assigned store(const KeySpec& spec, int64_t& out, const RawValue& v) {
  if (auto e = shape_error(spec, v); !e.empty()) return {e, ""};
  const Scalar s = classify(v);
  if (s.type == ScalarType::kInteger && !s.overflow) {
    out = s.i;
    return {};
  }
  if (s.type == ScalarType::kFloat && spec.floor_numbers) {
    const double floored = std::floor(s.d);
    if (floored < -9.0e18 || floored > 9.0e18)
      return {"expected " + spec.allowed + " (out of range)", ""};
    out = static_cast<int64_t>(floored);
    if (floored == s.d) return {};
    return {"", fmt::format("not an integer; floored to {} (as ScaFFold does)", out)};
  }
  return {"expected " + spec.allowed + got(s), ""};
}

Assigned store(const KeySpec& spec, int& out, const RawValue& v) {
  int64_t wide = 0;
  Assigned a = store(spec, wide, v);
  if (!a.error.empty()) return a;
  if (wide < INT_MIN || wide > INT_MAX) return {"expected " + spec.allowed + " (out of range)", ""};
  out = static_cast<int>(wide);
  return a;
}

Assigned store(const KeySpec& spec, double& out, const RawValue& v) {
  if (auto e = shape_error(spec, v); !e.empty()) return {e, ""};
  const Scalar s = classify(v);
  if (s.type == ScalarType::kInteger) {
    out = s.overflow ? s.d : static_cast<double>(s.i);
    return {};
  }
  if (s.type == ScalarType::kFloat) {
    out = s.d;
    return {};
  }
  return {"expected " + spec.allowed + got(s), ""};
}

Assigned store(const KeySpec& spec, bool& out, const RawValue& v) {
  if (auto e = shape_error(spec, v); !e.empty()) return {e, ""};
  const Scalar s = classify(v);
  if (s.type == ScalarType::kBool) {
    out = s.b;
    return {};
  }
  if (s.type == ScalarType::kInteger && !s.overflow && (s.i == 0 || s.i == 1)) {
    out = s.i == 1;
    return {};
  }
  return {"expected " + spec.allowed, ""};
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Assigned store(const KeySpec& spec, std::string& out, const RawValue& v) {
  if (auto e = shape_error(spec, v); !e.empty()) return {e, ""};
  if (spec.choices.empty()) {
    out = v.scalar;
    return {};
  }
  // Any spelling is accepted; the canonical one is stored so later code compares exactly.
  for (const std::string& choice : spec.choices) {
    if (lower(choice) == lower(v.scalar)) {
      out = choice;
      return {};
    }
  }
  return {"expected " + spec.allowed, ""};
}

Assigned store(const KeySpec& spec, std::vector<int>& out, const RawValue& v) {
  switch (v.form) {
    case RawValue::Form::kNull:
      return {"no value given; expected " + spec.allowed, ""};
    case RawValue::Form::kScalar:
      return {"expected " + spec.allowed + " (got a single value)", ""};
    case RawValue::Form::kMap:
      return {"expected " + spec.allowed + ", not a mapping", ""};
    case RawValue::Form::kList:
      break;
  }
  std::vector<int> values;
  for (std::size_t n = 0; n < v.items.size(); ++n) {
    const RawValue& item = v.items[n];
    const Scalar s = item.form == RawValue::Form::kScalar ? classify(item) : Scalar{};
    if (item.form != RawValue::Form::kScalar || s.type != ScalarType::kInteger || s.overflow ||
        s.i < INT_MIN || s.i > INT_MAX) {
      return {fmt::format("expected {} (entry {}, {}, is not an integer)", spec.allowed, n + 1,
                          item.shown),
              ""};
    }
    values.push_back(static_cast<int>(s.i));
  }
  out = std::move(values);
  return {};
}

// ---- writing each member type as YAML -------------------------------------------------------

std::string format_value(const KeySpec&, int64_t v) {
  return std::to_string(v);
}
std::string format_value(const KeySpec&, int v) {
  return std::to_string(v);
}
std::string format_value(const KeySpec&, double v) {
  return yaml_float(v);
}
std::string format_value(const KeySpec& spec, bool v) {
  if (spec.bool_as_word) return v ? "true" : "false";
  return v ? "1" : "0";
}
std::string format_value(const KeySpec&, const std::string& v) {
  return yaml_string(v);
}
std::string format_value(const KeySpec&, const std::vector<int>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

template <typename T>
constexpr Kind kind_of() {
  if constexpr (std::is_same_v<T, bool>)
    return Kind::kBool;
  else if constexpr (std::is_same_v<T, int> || std::is_same_v<T, int64_t>)
    return Kind::kInteger;
  else if constexpr (std::is_same_v<T, double>)
    return Kind::kNumber;
  else if constexpr (std::is_same_v<T, std::string>)
    return Kind::kString;
  else {
    static_assert(std::is_same_v<T, std::vector<int>>, "no config kind for this member type");
    return Kind::kIntList;
  }
}

constexpr const char* kBoolAllowed = "0, 1, true or false";

// One table entry bound to `member`; `ok` is the key's own range check (nullptr: any value).
template <typename T>
KeySpec bind_key(const char* name, T Config::*member, const char* help, std::string allowed,
                 bool (*ok)(const T&) = nullptr) {
  KeySpec spec;
  spec.name = name;
  spec.kind = kind_of<T>();
  spec.help = help;
  spec.allowed = std::move(allowed);
  spec.assign = [member](const KeySpec& s, Config& c, const RawValue& v) {
    return store(s, c.*member, v);
  };
  // format receives the final entry, so flags set after bind_key (bool_as_word) take effect.
  spec.format = [member](const KeySpec& s, const Config& c) { return format_value(s, c.*member); };
  spec.check = [member, ok, text = spec.allowed](const Config& c) {
    return ok == nullptr || ok(c.*member) ? std::string() : text;
  };
  return spec;
}

bool non_empty(const std::string& s) {
  return !s.empty();
}
bool at_least_0(const int& v) {
  return v >= 0;
}
bool at_least_1(const int& v) {
  return v >= 1;
}
bool bool_any(const bool&) {
  return true;
}

// Volumes in the dataset (spec §4.1): instances per class rounded down to a multiple of
// n_fracts_per_vol, n_fracts_per_vol fractals per volume.
int64_t volume_count(const Config& c) {
  return int64_t{c.n_categories} * (c.n_instances_used_per_fractal / c.n_fracts_per_vol);
}

std::vector<KeySpec> build_schema() {
  std::vector<KeySpec> t;
  const auto add = [&t](KeySpec spec) {
    t.push_back(std::move(spec));
    return t.size() - 1;
  };

  // Paths.
  add(bind_key("base_run_dir", &Config::base_run_dir, "parent directory of the run directories",
               "a non-empty path", non_empty));
  add(bind_key("dataset_dir", &Config::dataset_dir, "dataset cache root", "a non-empty path",
               non_empty));
  add(bind_key("fract_base_dir", &Config::fract_base_dir, "root of the fractal library",
               "a non-empty path", non_empty));
  add(bind_key(
      "job_name", &Config::job_name, "prefix of the run directory name",
      "a non-empty name without '/'",
      +[](const std::string& s) { return !s.empty() && s.find('/') == std::string::npos; }));
  add(bind_key("checkpoint_dir", &Config::checkpoint_dir,
               "checkpoint subdirectory of the run directory", "a non-empty path", non_empty));

  // Problem size and data generation.
  add(bind_key(
      "seed", &Config::seed, "the single seed for everything", "an integer >= 0",
      +[](const int64_t& v) { return v >= 0; }));
  {
    const auto i = add(bind_key(
        "problem_scale", &Config::problem_scale, "volume side is 2^problem_scale voxels",
        "an integer in [3, 15]",
        // 3 is the smallest scale with >= 2 points per fractal (2^(3s)/256); 15 keeps the
        // point and voxel counts in range.
        +[](const int& v) { return v >= 3 && v <= 15; }));
    t[i].floor_numbers = true;
  }
  {
    const auto i =
        add(bind_key("unet_bottleneck_dim", &Config::unet_bottleneck_dim,
                     "log2 of the U-Net bottleneck side (unet_layers = problem_scale - this)",
                     "an integer in [0, problem_scale - 1]", at_least_0));
    t[i].depends_on = {"problem_scale"};
    t[i].cross_check = [](const Config& c) {
      return c.unet_bottleneck_dim <= c.problem_scale - 1
                 ? std::string()
                 : fmt::format(
                       "an integer in [0, problem_scale - 1] = [0, {}] so that the "
                       "U-Net has at least one layer",
                       c.problem_scale - 1);
    };
  }
  add(bind_key("unet_base_channels", &Config::unet_base_channels,
               "extension: U-Net channels at the first level, doubled per level (ScaFFold: 64)",
               "an integer >= 1", at_least_1));
  add(bind_key("n_categories", &Config::n_categories,
               "fractal classes (the network has n_categories + 1 outputs)", "an integer >= 1",
               at_least_1));
  {
    const auto i =
        add(bind_key("n_instances_used_per_fractal", &Config::n_instances_used_per_fractal,
                     "instances drawn per class, rounded down to a multiple of n_fracts_per_vol",
                     "an integer >= n_fracts_per_vol", at_least_1));
    t[i].depends_on = {"n_fracts_per_vol"};
    t[i].cross_check = [](const Config& c) {
      return c.n_instances_used_per_fractal >= c.n_fracts_per_vol
                 ? std::string()
                 : fmt::format("an integer >= n_fracts_per_vol = {}", c.n_fracts_per_vol);
    };
  }
  add(bind_key("n_fracts_per_vol", &Config::n_fracts_per_vol, "fractals overlaid in each volume",
               "an integer >= 1", at_least_1));
  add(bind_key(
      "variance_threshold", &Config::variance_threshold,
      "IFS acceptance threshold (also names the library folder var<value>)", "a number >= 0",
      +[](const double& v) { return v >= 0.0; }));
  add(bind_key(
      "normalize", &Config::normalize, "half-range after normalisation in the category search",
      "a number > 0", +[](const double& v) { return v > 0.0; }));
  {
    const auto i = add(bind_key(
        "val_split", &Config::val_split, "validation percentage of the volumes",
        "a number in (0, 100) that leaves at least one validation and one training volume",
        +[](const double& v) { return v > 0.0 && v < 100.0; }));
    t[i].depends_on = {"n_categories", "n_instances_used_per_fractal", "n_fracts_per_vol"};
    t[i].cross_check = [](const Config& c) {
      const int64_t volumes = volume_count(c);
      // int(V * val_split / 100), as ScaFFold computes it (spec §4.2).
      const auto n_val =
          static_cast<int64_t>(std::floor(static_cast<double>(volumes) * c.val_split / 100.0));
      if (n_val >= 1 && volumes - n_val >= 1) return std::string();
      return fmt::format(
          "a percentage that leaves at least one validation and one training volume; {} volumes "
          "give {} validation and {} training",
          volumes, n_val, volumes - n_val);
    };
  }
  add(bind_key("datagen_batch_size", &Config::datagen_batch_size,
               "most category-search attempts one rank makes per synchronised round",
               "an integer >= 1", at_least_1));
  add(bind_key("datagen_from_scratch", &Config::datagen_from_scratch,
               "1 deletes the category and instance directories before generating", kBoolAllowed,
               bool_any));
  add(bind_key("dataset_reuse_enforce_commit_id", &Config::dataset_reuse_enforce_commit_id,
               "1 reuses a cached dataset only if it was made by the same git commit", kBoolAllowed,
               bool_any));

  // Distribution.
  {
    const auto i = add(bind_key(
        "dc_num_shards", &Config::dc_num_shards, "spatial shards per sharded dimension",
        "a list of 1 to 3 integers >= 1", +[](const std::vector<int>& v) {
          return !v.empty() && v.size() <= 3 &&
                 std::all_of(v.begin(), v.end(), [](int n) { return n >= 1; });
        }));
    // Every U-Net level halves each local extent: a shard must stay even down to the bottleneck
    // and hold at least one voxel there (spec §7.2).
    t[i].depends_on = {"problem_scale", "unet_bottleneck_dim"};
    t[i].cross_check = [](const Config& c) {
      const int64_t multiple = int64_t{1} << c.unet_layers();
      for (int n : c.dc_num_shards) {
        if (c.vol_size() % (n * multiple) != 0)
          return fmt::format(
              "shard counts dividing the volume side {} so that each shard's side ({} / {}) stays "
              "even at every U-Net level and >= 1 at the bottleneck: a divisor of {} / 2^{} = {}",
              c.vol_size(), c.vol_size(), n, c.vol_size(), c.unet_layers(), c.vol_size() / multiple);
      }
      return std::string();
    };
  }
  {
    const auto i = add(bind_key(
        "dc_shard_dims", &Config::dc_shard_dims,
        "NCDHW dimensions to shard (2, 3, 4 = D, H, W), one per dc_num_shards entry",
        "a list of 1 to 3 distinct dimensions from 2, 3, 4, as long as dc_num_shards",
        +[](const std::vector<int>& v) {
          const std::set<int> distinct(v.begin(), v.end());
          return !v.empty() && v.size() <= 3 && distinct.size() == v.size() &&
                 std::all_of(v.begin(), v.end(), [](int d) { return d >= 2 && d <= 4; });
        }));
    t[i].depends_on = {"dc_num_shards"};
    t[i].cross_check = [](const Config& c) {
      return c.dc_shard_dims.size() == c.dc_num_shards.size()
                 ? std::string()
                 : fmt::format("as many entries as dc_num_shards ({}), got {}",
                               c.dc_num_shards.size(), c.dc_shard_dims.size());
    };
  }
  {
    const auto i = add(bind_key(
        "dc_groupnorm", &Config::dc_groupnorm,
        "extension: GroupNorm statistics of a sharded sample: global (all-reduced, equals the "
        "unsharded model) or local (per shard, as ScaFFold's DistConv)",
        "one of global, local"));
    t[i].choices = {"global", "local"};
  }
  add(bind_key("progress_timeout_s", &Config::progress_timeout_s,
               "extension: seconds without a finished training step or validation batch after "
               "which every rank is ended with an error (a stuck rank or file system); 0: never",
               "an integer >= 0", at_least_0));
  add(bind_key("dataloader_num_workers", &Config::dataloader_num_workers,
               "data-loading workers per rank", "an integer >= 0", at_least_0));

  // Model and training.
  add(bind_key("local_batch_size", &Config::local_batch_size,
               "batch size per data-parallel replica", "an integer >= 1", at_least_1));
  {
    const auto i = add(bind_key(
        "group_norm_groups", &Config::group_norm_groups, "GroupNorm groups in every U-Net block",
        // Every channel count is unet_base_channels * 2^k, so a divisor of the base divides all.
        "an integer >= 1 dividing unet_base_channels", at_least_1));
    t[i].depends_on = {"unet_base_channels"};
    t[i].cross_check = [](const Config& c) {
      return c.unet_base_channels % c.group_norm_groups == 0
                 ? std::string()
                 : fmt::format("a divisor of unet_base_channels ({}), the narrowest channel count",
                               c.unet_base_channels);
    };
  }
  {
    const auto i = add(bind_key("device", &Config::device,
                                "extension: where to train: auto (CUDA when available), cpu or cuda",
                                "one of auto, cpu, cuda"));
    t[i].choices = {"auto", "cpu", "cuda"};
  }
  add(bind_key("activation_checkpointing", &Config::activation_checkpointing,
               "1 recomputes every U-Net block in the backward pass", kBoolAllowed, bool_any));
  {
    const auto i = add(bind_key("optimizer", &Config::optimizer, "optimizer",
                                "one of ADAM, RMSProp, SGD (any case)"));
    t[i].choices = {"ADAM", "RMSProp", "SGD"};
  }
  add(bind_key(
      "starting_learning_rate", &Config::starting_learning_rate,
      "initial learning rate (start of every cosine cycle)", "a number > 0",
      +[](const double& v) { return v > 0.0; }));
  {
    const auto i = add(bind_key(
        "min_learning_rate", &Config::min_learning_rate, "eta_min of the cosine schedule",
        "a number in [0, starting_learning_rate]", +[](const double& v) { return v >= 0.0; }));
    t[i].depends_on = {"starting_learning_rate"};
    t[i].cross_check = [](const Config& c) {
      return c.min_learning_rate <= c.starting_learning_rate
                 ? std::string()
                 : fmt::format("a number in [0, starting_learning_rate] = [0, {}]",
                               yaml_float(c.starting_learning_rate));
    };
  }
  add(bind_key("T_0", &Config::T_0, "epochs in the first cosine cycle", "an integer >= 1",
               at_least_1));
  add(bind_key("T_mult", &Config::T_mult, "cosine cycle growth factor", "an integer >= 1",
               at_least_1));
  add(bind_key("disable_scheduler", &Config::disable_scheduler,
               "1 keeps the learning rate constant", kBoolAllowed, bool_any));
  add(bind_key(
      "target_dice", &Config::target_dice, "validation Dice that ends the run",
      "a number in (0, 1]", +[](const double& v) { return v > 0.0 && v <= 1.0; }));
  add(bind_key(
      "epochs", &Config::epochs, "epoch cap; -1 runs until target_dice",
      "-1 (until target_dice) or an integer >= 1",
      +[](const int& v) { return v == -1 || v >= 1; }));
  add(bind_key("warmup_batches", &Config::warmup_batches,
               "untimed warm-up training batches per rank", "an integer >= 0", at_least_0));
  add(bind_key(
      "ce_weight_sample_fraction", &Config::ce_weight_sample_fraction,
      "fraction of training masks used to estimate the cross-entropy class weights",
      "a number in (0, 1]", +[](const double& v) { return v > 0.0 && v <= 1.0; }));
  add(bind_key("torch_amp", &Config::torch_amp, "1 runs the forward pass under bf16 autocast",
               kBoolAllowed, bool_any));
  add(bind_key("more_determinism", &Config::more_determinism,
               "1 selects deterministic kernels (slower)", kBoolAllowed, bool_any));
  add(bind_key("loss_freq", &Config::loss_freq,
               "accepted for compatibility; unused (as in ScaFFold)", "an integer >= 1",
               at_least_1));
  {
    const auto i = add(
        bind_key("framework", &Config::framework, "training framework", "torch (the only one)"));
    t[i].choices = {"torch"};
  }
  add(bind_key(
      "dist", &Config::dist, "distributed mode; always on", "1 (distributed mode is always on)",
      +[](const int& v) { return v == 1; }));

  // Run folder and checkpoints.
  add(bind_key(
      "checkpoint_interval", &Config::checkpoint_interval,
      "checkpoint every N epochs; -1 or 0 disables checkpoints",
      "an integer >= -1 (-1 or 0: no checkpoints)", +[](const int& v) { return v >= -1; }));
  add(bind_key("train_from_scratch", &Config::train_from_scratch,
               "1 deletes checkpoints and train_stats.csv in the run directory at start",
               kBoolAllowed, bool_any));
  {
    const auto i = add(bind_key("async_save", &Config::async_save,
                                "write checkpoints from a background thread on rank 0",
                                kBoolAllowed, bool_any));
    t[i].bool_as_word = true;  // ScaFFold writes this one as a Python bool
  }

  return t;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Case and '-' vs '_' differences count as nothing when looking for a near miss.
std::string fold(std::string_view s) {
  std::string out = lower(s);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

}  // namespace

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> table = build_schema();
  return table;
}

const KeySpec* find_key(std::string_view name) {
  for (const KeySpec& spec : schema())
    if (spec.name == name) return &spec;
  return nullptr;
}

bool is_aux_key(std::string_view name) {
  static const std::set<std::string, std::less<>> aux = {"command",
                                                         "config",
                                                         "verbose",
                                                         "restart",
                                                         "run_dir",
                                                         "run_iter",
                                                         "benchmark_run_dir",
                                                         "unet_layers",
                                                         "vol_size",
                                                         "point_num",
                                                         "scheduler_metadata",
                                                         "machine_name",
                                                         "scale"};
  return aux.count(name) > 0;
}

std::string unknown_key_hint(std::string_view name) {
  if (name == "batch_size") return "it was renamed 'local_batch_size'";
  if (name == "dataset_num_shards")
    return "it was replaced by 'dc_num_shards' (shards per sharded dimension)";
  if (name == "dataset_shard_dims")
    return "it was replaced by 'dc_shard_dims' (the dimensions to shard)";
  const std::string folded = fold(name);
  const KeySpec* best = nullptr;
  std::size_t best_distance = 3;
  for (const KeySpec& spec : schema()) {
    const std::size_t d = edit_distance(folded, fold(spec.name));
    if (d < best_distance) {
      best_distance = d;
      best = &spec;
    }
  }
  return best != nullptr ? "did you mean '" + best->name + "'?" : "";
}

std::string yaml_float(double value) {
  std::string text = core::python_float_str(value);
  const std::size_t e = text.find('e');
  if (e != std::string::npos && text.find('.') == std::string::npos) text.insert(e, ".0");
  return text;
}

std::string yaml_string(const std::string& value) {
  // Plain only for names and paths that YAML cannot read as anything but this string.
  static const std::set<std::string> reserved = {"true", "false", "yes", "no", "on",
                                                 "off",  "null",  "y",   "n",  "~"};
  const auto safe_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' ||
           c == '-' || c == '+';
  };
  const bool plain =
      !value.empty() &&
      (std::isalpha(static_cast<unsigned char>(value[0])) || value[0] == '_' || value[0] == '/') &&
      std::all_of(value.begin(), value.end(), safe_char) && reserved.count(lower(value)) == 0;
  if (plain) return value;
  std::string out = "\"";
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace scaffold::config
