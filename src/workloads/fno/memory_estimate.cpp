#include "workloads/fno/memory_estimate.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace scaffold::fno {

core::MemoryEstimate fno_memory_estimate(const config::FnoConfig& cfg, int64_t in_channels,
                                         int64_t out_channels) {
  double points = 1.0;
  for (int n : cfg.grid) points *= static_cast<double>(n);
  const double local_points = points / static_cast<double>(std::max(1, cfg.tp_size));
  // Kept modes: both signs on every axis but the last (the half spectrum of the real FFT).
  double kept = 1.0;
  for (std::size_t i = 0; i < cfg.grid.size(); ++i) {
    const int m = cfg.modes.empty() ? 0 : cfg.modes[std::min(i, cfg.modes.size() - 1)];
    kept *= static_cast<double>(i + 1 < cfg.grid.size() ? 2 * m : m);
  }
  const double width = cfg.width, layers = cfg.layers;
  const double b = cfg.mode == "eval" ? cfg.eval_batch_size : cfg.batch_size;
  const double act = cfg.precision == "fp32" ? 4.0 : 2.0;
  const double lifted_in =
      static_cast<double>(in_channels) + (cfg.grid_coordinates ? cfg.grid.size() : 0);
  core::MemoryEstimate e;
  // Complex float32 (8 bytes) weights, gradients and Adam's two moments.
  e.add(
      "the spectral weights, gradients and Adam's moments (layers x width^2 x kept modes, complex)",
      32.0 * layers * width * width * kept, {"layers", "width", "modes"});
  e.add("the input batch and its lifting (batch x (channels + width) x grid points)",
        4.0 * b * (lifted_in + static_cast<double>(out_channels)) * local_points +
            act * b * width * local_points,
        {"grid", "batch_size", "width"});
  e.add(
      "each Fourier layer's input, kept for the backward pass (layers x batch x width x grid "
      "points)",
      act * layers * b * width * local_points, {"grid", "batch_size", "width", "layers"});
  e.add("one layer's spectrum (batch x width x half the grid points, complex float32)",
        8.0 * b * width * (local_points / 2.0 + 1.0), {"grid", "batch_size", "width"});
  e.add("the projection's hidden channels (batch x projection_channels x grid points)",
        act * b * cfg.projection_channels * local_points,
        {"grid", "batch_size", "projection_channels"});
  e.add("one sample's state in the PDE generator (grid points x channels, float64)",
        8.0 * points * static_cast<double>(std::max(in_channels, out_channels)), {"grid"});
  return e;
}

}  // namespace scaffold::fno
