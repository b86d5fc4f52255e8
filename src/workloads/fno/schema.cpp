// FnoConfig's schema table: every key with its kind, help, allowed values and range checks, in
// fno_options.hpp order. The scalar rules are the ones every struct shares (schema_rules.cpp).
// The data generators' keys come from fno_data_keys.hpp (the table `generate_pde_data` reads),
// appended after the shared data keys, so both commands check them alike. Cross-key checks: the
// grid fits the problem, the modes fit the grid (both corners of a full-FFT axis must not
// overlap), tp_size fits the split axis. No renamed keys.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/engine.hpp"
#include "config/schema_rules.hpp"
#include "workloads/fno/data/config_keys.hpp"
#include "workloads/fno/options.hpp"

namespace scaffold::config {

FnoDataConfig fno_data_config(const FnoConfig& c) {
  FnoDataConfig d = c.generator;
  d.problem = c.problem;
  d.data_dir = c.data_dir;
  d.seed = c.seed;
  d.grid = c.grid;
  d.train_samples = c.train_samples;
  d.val_samples = c.val_samples;
  d.t_in = c.t_in;
  d.t_out = c.t_out;
  d.viscosity = c.viscosity;
  return d;
}

namespace {

using FC = FnoConfig;
using Spec = KeySpecT<FC>;
using rules::at_least_0;
using rules::at_least_1;
using rules::bind_key;
using rules::bind_path;
using rules::bool_any;
using rules::kBoolAllowed;
using rules::non_empty;

bool positive(const double& v) {
  return v > 0.0;
}
bool non_negative(const double& v) {
  return v >= 0.0;
}

std::vector<Spec> fno_table() {
  std::vector<Spec> t;
  const auto add = [&t](Spec spec) {
    t.push_back(std::move(spec));
    return t.size() - 1;
  };
  const auto add_choice = [&t](Spec spec, std::vector<std::string> choices) {
    spec.choices = std::move(choices);
    t.push_back(std::move(spec));
    return t.size() - 1;
  };

  // Paths.
  add(rules::base_run_dir_key<FC>());
  add(rules::job_name_key<FC>());
  add(rules::checkpoint_dir_key<FC>());
  add(bind_path("data_dir", &FC::data_dir, "cache directory of the generated PDE datasets",
                "a non-empty path", non_empty));
  add(rules::seed_key<FC>());

  // Problem and data.
  add_choice(
      bind_key(
          "problem", &FC::problem,
          "the operator to learn, on data generated in situ (and cached in data_dir): burgers1d "
          "(1-D viscous Burgers, u(0) -> u(T)), navier_stokes2d (2-D vorticity on the torus, t_in "
          "records -> the next t_out), rbc2d or rbc3d (2-D and 3-D Rayleigh-Benard, CARAML's RBC2D "
          "and RBC3D: t_in states -> the next t_out)",
          "one of burgers1d, navier_stokes2d, rbc2d, rbc3d"),
      {"burgers1d", "navier_stokes2d", "rbc2d", "rbc3d"});
  {
    const auto i = add(bind_key(
        "grid", &FC::grid, "grid points per spatial dimension; the problem fixes how many",
        "a list of 1 to 3 integers in [4, 65536]", +[](const std::vector<int>& v) {
          return !v.empty() && v.size() <= 3 &&
                 std::all_of(v.begin(), v.end(), [](int n) { return n >= 4 && n <= 65536; });
        }));
    t[i].list_min = 1;
    t[i].list_max = 3;
    t[i].depends_on = {"problem"};
    t[i].cross_check = [](const FC& c) { return fno_keys::grid_for_problem(fno_data_config(c)); };
  }
  add(bind_key("train_samples", &FC::train_samples, "training examples", "an integer >= 1",
               at_least_1));
  add(bind_key("val_samples", &FC::val_samples,
               "held-out examples, on which the relative L2 error is measured", "an integer >= 1",
               at_least_1));
  {
    const auto i = add(bind_key(
        "t_in", &FC::t_in,
        "input time steps per example (the input channels; rbc2d: 4 per step, rbc3d: 5)",
        "an integer in [1, 100]", +[](const int& v) { return v >= 1 && v <= 100; }));
    t[i].depends_on = {"problem"};
    t[i].cross_check = [](const FC& c) {
      return c.problem != "burgers1d" || c.t_in == 1 ? std::string()
                                                     : std::string("1 for burgers1d (u at t = 0)");
    };
  }
  add(bind_key(
      "t_out", &FC::t_out,
      "predicted time steps per example (the output channels; rbc2d: 4 per step, rbc3d: 5)",
      "an integer in [1, 100]", +[](const int& v) { return v >= 1 && v <= 100; }));
  {
    const auto i = add(
        bind_key("viscosity", &FC::viscosity,
                 "viscosity; 0: the problem's default (burgers1d 0.1, navier_stokes2d 1e-3); rbc2d "
                 "and rbc3d take rbc_rayleigh and rbc_prandtl instead",
                 "a number >= 0", non_negative));
    t[i].depends_on = {"problem"};
    t[i].cross_check = [](const FC& c) {
      return (c.problem != "rbc2d" && c.problem != "rbc3d") || c.viscosity == 0.0
                 ? std::string()
                 : std::string(
                       "0 for rbc2d and rbc3d (their viscosity is sqrt(Pr / Ra): set rbc_rayleigh, "
                       "rbc_prandtl)");
    };
  }
  // The generators' own keys, stored in `generator`, checked on the complete view.
  append_fno_data_keys<FC>(
      t, +[](FC& c) -> FnoDataConfig& { return c.generator; }, &fno_data_config,
      kFnoSharedDataKeys);

  // Model.
  {
    const auto i = add(bind_key(
        "modes", &FC::modes,
        "Fourier modes kept per spatial dimension (both signs in all but the last); one entry: "
        "every dimension",
        "a list of 1 to 3 integers >= 1", +[](const std::vector<int>& v) {
          return !v.empty() && v.size() <= 3 &&
                 std::all_of(v.begin(), v.end(), [](int n) { return n >= 1; });
        }));
    t[i].list_min = 1;
    t[i].list_max = 3;
    t[i].depends_on = {"grid"};
    t[i].cross_check = [](const FC& c) {
      if (c.modes.size() != 1 && c.modes.size() != c.grid.size())
        return fmt::format("one entry or one per grid dimension ({}), got {}", c.grid.size(),
                           c.modes.size());
      for (std::size_t k = 0; k < c.grid.size(); ++k) {
        const int m = c.modes.size() == 1 ? c.modes[0] : c.modes[k];
        const bool last = k + 1 == c.grid.size();
        const int most = last ? c.grid[k] / 2 + 1 : c.grid[k] / 2;
        if (m > most)
          return fmt::format("at most {} modes in dimension {} of {} points ({}), got {}", most, k,
                             c.grid[k],
                             last ? "the real FFT's half spectrum N/2 + 1"
                                  : "N/2, so the two corners do not overlap",
                             m);
      }
      return std::string();
    };
  }
  add(bind_key(
      "width", &FC::width, "channels of the Fourier layers", "an integer in [1, 4096]",
      +[](const int& v) { return v >= 1 && v <= 4096; }));
  add(bind_key(
      "layers", &FC::layers, "Fourier layers", "an integer in [1, 64]",
      +[](const int& v) { return v >= 1 && v <= 64; }));
  add(bind_key(
      "projection_channels", &FC::projection_channels,
      "hidden channels of the projection to the output", "an integer in [1, 65536]",
      +[](const int& v) { return v >= 1 && v <= 65536; }));
  add(bind_key(
      "grid_coordinates", &FC::grid_coordinates,
      "1 appends each point's grid coordinates in [0, 1] to the input channels (as the paper)",
      kBoolAllowed, bool_any));
  add(bind_key("bias", &FC::bias,
               "1 gives every pointwise map (lifting, the layers' linear paths, projection) a "
               "bias; 0 none (operator_learning's bias: false)",
               kBoolAllowed, bool_any));
  add(bind_key(
      "lifting_layers", &FC::lifting_layers,
      "layers of the lifting to width: 1 (the paper) or more, the hidden ones projection_channels "
      "wide with GELU between (operator_learning's P: scaling_layers 4)",
      "an integer in [1, 16]", +[](const int& v) { return v >= 1 && v <= 16; }));
  add(bind_key(
      "projection_layers", &FC::projection_layers,
      "layers of the projection to the output: 2 (the paper) or more, the hidden ones "
      "projection_channels wide with GELU between (operator_learning's Q: scaling_layers 4)",
      "an integer in [2, 16]", +[](const int& v) { return v >= 2 && v <= 16; }));
  add(bind_key("gelu_after_last_layer", &FC::gelu_after_last_layer,
               "1 applies GELU after the last Fourier layer too (operator_learning's FNOLayer); 0 "
               "not (the paper)",
               kBoolAllowed, bool_any));
  add_choice(bind_key("spectral_mixing", &FC::spectral_mixing,
                      "how the spectral convolutions multiply each kept mode by its complex "
                      "weights: real (batched real GEMMs; faster on CPUs) or complex (LibTorch's "
                      "complex bmm, the reference); the same product either way",
                      "one of real, complex"),
             {"real", "complex"});
  add_choice(bind_key("spectral_transform", &FC::spectral_transform,
                      "how the unsharded Fourier layers transform: fft (LibTorch's FFTs, the "
                      "reference); dft (only the kept modes' DFTs, as real matrix products); "
                      "probe (dft for the shapes where a measurement on the first call finds it "
                      "at least 10 % faster); auto (probe on a CPU, fft elsewhere); the same "
                      "transform either way",
                      "one of auto, probe, dft, fft"),
             {"auto", "probe", "dft", "fft"});
  add(bind_key(
      "fused_projection", &FC::fused_projection,
      "1 computes the projection (projection_layers 2, without autocast, on CPUs) in one tiled "
      "pass that stores no hidden activations; 0 as LibTorch's two maps and a GELU (the "
      "reference); the same function either way",
      kBoolAllowed, bool_any));
  add(bind_key("fused_pointwise", &FC::fused_pointwise,
               "1 computes each Fourier layer's pointwise map, its sum with the spectral branch "
               "and the GELU (without autocast, on CPUs) as one function; 0 as LibTorch's "
               "product, add and GELU (the reference); the same function either way",
               kBoolAllowed, bool_any));
  add_choice(
      bind_key(
          "time_stepping", &FC::time_stepping,
          "direct: one forward maps the t_in input steps to all t_out output steps; recurrent: the "
          "model predicts one step from the last t_in and is fed its own predictions t_out times, "
          "trained through the whole rollout (the paper's FNO-2D for Navier-Stokes)",
          "one of direct, recurrent"),
      {"direct", "recurrent"});
  {
    const auto i = add_choice(
        bind_key("target", &FC::target,
                 "what the model predicts: next (the next state) or update ((next - current) x "
                 "target_scaling, current being the input's last time step; operator_learning's "
                 "outType: update)",
                 "one of next, update"),
        {"next", "update"});
    t[i].depends_on = {"time_stepping"};
    t[i].cross_check = [](const FC& c) {
      return c.target != "update" || c.time_stepping == "direct"
                 ? std::string()
                 : std::string("next with time_stepping recurrent (a rollout feeds back states)");
    };
  }
  add(bind_key("target_scaling", &FC::target_scaling,
               "target update: the factor of the update (operator_learning's outScaling)",
               "a number > 0", positive));

  // Training.
  add(bind_key("batch_size", &FC::batch_size,
               "examples per step on each data-parallel replica (CARAML: 4)", "an integer >= 1",
               at_least_1));
  add(bind_key("val_batch_size", &FC::val_batch_size, "examples per validation batch (CARAML: 1)",
               "an integer >= 1", at_least_1));
  add(bind_key("epochs", &FC::epochs, "timed epochs", "an integer >= 1", at_least_1));
  add(bind_key(
      "warmup_epochs", &FC::warmup_epochs,
      "epochs trained (train + validation) before the timed ones, excluded from every figure",
      "an integer >= 0", at_least_0));
  add(bind_key(
      "time_budget_s", &FC::time_budget_s,
      "stop after the epoch in which the timed training time passes this many seconds; 0: none",
      "a number >= 0", non_negative));
  add(bind_key("learning_rate", &FC::learning_rate, "Adam's initial learning rate", "a number > 0",
               positive));
  add(bind_key("weight_decay", &FC::weight_decay, "Adam's L2 weight decay", "a number >= 0",
               non_negative));
  add_choice(bind_key("lr_scheduler", &FC::lr_scheduler,
                      "learning-rate schedule, stepped once per epoch (warm-up epochs included): "
                      "step (StepLR) or cosine (CosineAnnealingLR, eta_min 0)",
                      "one of step, cosine"),
             {"step", "cosine"});
  add(bind_key("lr_step_size", &FC::lr_step_size, "StepLR: epochs between learning-rate decays",
               "an integer >= 1", at_least_1));
  add(bind_key(
      "lr_gamma", &FC::lr_gamma, "StepLR: factor applied to the learning rate at each decay",
      "a number in (0, 1]", +[](const double& v) { return v > 0.0 && v <= 1.0; }));
  add(bind_key("lr_t_max", &FC::lr_t_max,
               "cosine: epochs from the initial learning rate to 0 (CosineAnnealingLR's T_max)",
               "an integer >= 1", at_least_1));
  add_choice(bind_key("loss", &FC::loss,
                      "the training loss and the reported relative errors: relative_l2 (one "
                      "relative L2 error over all fields of an example, the paper's LpLoss) or "
                      "field_relative_l2 (each field's relative L2 error, averaged over the "
                      "fields: operator_learning's VectorNormLoss)",
                      "one of relative_l2, field_relative_l2"),
             {"relative_l2", "field_relative_l2"});
  add_choice(bind_key("precision", &FC::precision,
                      "numeric precision: fp32, or bf16 autocast for the linear layers (the FFTs "
                      "and the spectral "
                      "weights stay fp32: LibTorch's CPU FFT has no bf16)",
                      "one of fp32, bf16"),
             {"fp32", "bf16"});

  // Parallelism.
  {
    const auto i = add(bind_key(
        "tp_size", &FC::tp_size,
        "ranks sharing one example, its grid's first dimension split over them (CARAML's "
        "input sharding); ranks / tp_size data-parallel replicas",
        "an integer in [1, 4096]", +[](const int& v) { return v >= 1 && v <= 4096; }));
    t[i].depends_on = {"grid"};
    t[i].cross_check = [](const FC& c) {
      return c.tp_size <= c.grid[0]
                 ? std::string()
                 : fmt::format("at most the grid's first dimension ({} points)", c.grid[0]);
    };
  }

  // Mode.
  add_choice(bind_key("mode", &FC::mode,
                      "train: the training benchmark; eval: timed inference on fixed input shapes "
                      "(CARAML's eval)",
                      "one of train, eval"),
             {"train", "eval"});
  add(bind_key("eval_batch_size", &FC::eval_batch_size, "eval: examples per forward",
               "an integer >= 1", at_least_1));
  add(bind_key("eval_iterations", &FC::eval_iterations, "eval: timed forwards", "an integer >= 1",
               at_least_1));
  add(bind_key("eval_warmup", &FC::eval_warmup, "eval: untimed forwards before the timed ones",
               "an integer >= 0", at_least_0));

  // Run.
  add(rules::dataloader_workers_key<FC>());
  add(rules::device_key<FC>(/*extension=*/false));
  add(rules::device_sharing_key<FC>(/*extension=*/false));
  add(rules::checkpoint_interval_key<FC>());
  add(rules::progress_timeout_key<FC>(/*extension=*/false));
  return t;
}

}  // namespace

SchemaT<FnoConfig> build_schema(SchemaFor<FnoConfig>) {
  SchemaT<FnoConfig> s;
  s.command = "fno";
  s.keys = fno_table();
  return s;
}

SCAFFOLD_CONFIG_STRUCT(FnoConfig);

}  // namespace scaffold::config
