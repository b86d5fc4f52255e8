// The FNO configuration: CARAML's operator benchmark (docs/fno.md) with a Fourier neural
// operator (Li et al., ICLR 2021). The built-in defaults are configs/fno_paper.yml's recipe:
// batch 4, validation batch 1, no mixed precision, input sharding `tp_size` 1 (CARAML's), the
// paper's model and Adam lr 1e-3 with step decay; configs/fno.yml sets CARAML's RBC2D recipe
// (operator_learning's rbc2d_dedalus.yaml, docs/fno.md). The PDE data is
// generated in situ: the data keys (problem .. viscosity) and the generators' own keys
// (`generator`: burgers_*, ns_*, rbc_*) are the same keys `scaffold generate_pde_data` reads
// (fno_data_options.hpp), so the dataset cache is shared. Built only by config/load (YAML +
// flags -> validated struct); immutable afterwards. Checks that need the rank count (ranks a
// multiple of tp_size) or the device are the driver's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/fno/data/config.hpp"

namespace scaffold::config {

struct FnoConfig {
  // Paths. base_run_dir and data_dir are resolved against the working directory at load time.
  std::string base_run_dir = "fno_runs";       // parent of the run directories
  std::string job_name = "fno";                // run directory prefix
  std::string checkpoint_dir = "checkpoints";  // subdirectory of the run directory
  std::string data_dir = "fno_data";           // cache of generated PDE datasets

  int64_t seed = 42;  // the single seed for everything

  // Problem and data (the generators' shared keys, fno_data_options.hpp).
  std::string problem = "rbc2d";   // burgers1d | navier_stokes2d | rbc2d | rbc3d
  std::vector<int> grid{256, 64};  // grid points per spatial dimension: [N] | [N, N] | [nx, nz]
  int train_samples = 1000;        // training examples
  int val_samples = 100;           // held-out examples (the relative L2 error)
  int t_in = 1;                    // input time steps (channels in); NS: 10 as in the paper
  int t_out = 1;                   // predicted time steps (channels out)
  double viscosity = 0.0;          // 0: the problem's default (Burgers 0.1, NS 1e-3)
  // The generators' own keys (burgers_*, ns_*, rbc_*); its copies of the shared keys above are
  // not read: fno_data_config() fills them in from this struct.
  FnoDataConfig generator;

  // Model.
  std::vector<int> modes{16};     // Fourier modes kept per dimension; one entry: every dimension
  int width = 32;                 // channels of the Fourier layers
  int layers = 4;                 // Fourier layers
  int projection_channels = 128;  // hidden channels of the projection
  bool grid_coordinates = true;   // append the grid coordinates to the input (as the paper)
  bool bias = true;               // biases in the pointwise maps (operator_learning's `bias`)
  // Depths of the lifting (>= 1) and projection (>= 2), hidden layers projection_channels wide
  // (the paper: 1, 2; operator_learning's P and Q: scaling_layers 4 each).
  int lifting_layers = 1;
  int projection_layers = 2;
  bool gelu_after_last_layer = false;  // operator_learning's FNOLayer: GELU after every layer
  // How the spectral convolutions multiply each kept mode by its complex weights: real (batched
  // real GEMMs, the default: faster on CPUs) or complex (LibTorch's complex bmm, the reference).
  std::string spectral_mixing = "real";
  // extension: how the unsharded Fourier layers transform: fft (LibTorch's FFTs, the reference),
  // dft (the kept modes' DFTs as real matrix products), probe (dft for the shapes where a
  // measurement on the first call finds it faster), auto (probe on a CPU, fft elsewhere).
  std::string spectral_transform = "auto";
  // The projection (projection_layers 2, no autocast) as one tiled pass that stores no hidden
  // activations (true, the default) or as LibTorch's two maps and a GELU (false, the reference).
  bool fused_projection = true;
  // Each Fourier layer's pointwise branch, its sum with the spectral branch and the GELU as one
  // function (true, the default) or as LibTorch's product, add and GELU (false, the reference).
  bool fused_pointwise = true;
  // direct: one forward maps the t_in input steps to all t_out output steps (channels);
  // recurrent: the model predicts one step from the last t_in and is fed its own prediction
  // t_out times, trained through the whole rollout (the paper's FNO-2D for Navier-Stokes).
  std::string time_stepping = "direct";
  // next: the model predicts the next state(s); update: it predicts (next - current) x
  // target_scaling, "current" being the input's last time step (operator_learning's
  // outType: update, outScaling).
  std::string target = "next";
  double target_scaling = 1.0;  // update only: the factor (operator_learning's outScaling)

  // Training.
  int batch_size = 4;            // examples per step on each data-parallel replica (CARAML: 4)
  int val_batch_size = 1;        // validation batch (CARAML: 1)
  int epochs = 20;               // timed epochs
  int warmup_epochs = 1;         // trained before the timed epochs, in no figure
  double time_budget_s = 0.0;    // 0: none; else stop after the epoch in which it is passed
  double learning_rate = 0.001;  // Adam
  double weight_decay = 0.0001;  // Adam's L2 penalty (the paper: 1e-4)
  // step: StepLR(lr_step_size, lr_gamma); cosine: CosineAnnealingLR(T_max = lr_t_max,
  // eta_min 0). Either stepped once per epoch, warm-up epochs included.
  std::string lr_scheduler = "step";
  int lr_step_size = 100;  // StepLR: epochs between decays (the paper: 100)
  double lr_gamma = 0.5;   // StepLR: decay factor (the paper: 0.5)
  int lr_t_max = 50000;    // cosine: epochs of the half period (operator_learning: 50000)
  // relative_l2: one relative L2 error over all fields of an example (the paper's LpLoss);
  // field_relative_l2: each field's own, averaged (operator_learning's VectorNormLoss).
  std::string loss = "relative_l2";
  std::string precision = "fp32";  // fp32 | bf16 (autocast; the spectral part stays fp32)

  // Parallelism: the grid's first dimension split over tp_size ranks (CARAML's input sharding);
  // the ranks / tp_size groups are data-parallel replicas.
  int tp_size = 1;

  // Mode: train (the benchmark) or eval (CARAML's `eval` tag: inference on fixed input shapes).
  std::string mode = "train";
  int eval_batch_size = 20;  // eval: examples per forward (CARAML's fixed shapes use 8 or 20)
  int eval_iterations = 20;  // eval: timed forwards
  int eval_warmup = 5;       // eval: untimed forwards first

  // Run.
  int dataloader_num_workers = 1;  // data-loading workers per rank
  std::string device = "auto";     // auto | cpu | cuda
  bool device_sharing = false;     // 1 lets ranks of a node share a GPU
  int checkpoint_interval = -1;    // checkpoint every N epochs; <= 0 disables
  int progress_timeout_s = 1800;   // end the job after this long without a step; 0: never
};

// The complete generator configuration a FnoConfig stands for: `generator` with the shared keys
// (problem, data_dir, seed, grid, train/val_samples, t_in, t_out, viscosity) taken from `c`.
FnoDataConfig fno_data_config(const FnoConfig& c);

}  // namespace scaffold::config
