#include "workloads/fno/heat_source.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace scaffold::fno {

HeatOperatorSource::HeatOperatorSource(HeatOperatorOptions options) : options_(std::move(options)) {
  if (options_.grid.empty() || options_.grid.size() > 3)
    throw core::Error(fmt::format("heat: a grid of {} dimensions (1 to 3 supported)", options_.grid.size()));
  for (int64_t n : options_.grid)
    if (n < 4) throw core::Error(fmt::format("heat: {} grid points in a dimension (at least 4)", n));
}

dataset::Example HeatOperatorSource::get(std::size_t index, uint64_t /*draw*/) const {
  const auto& grid = options_.grid;
  const auto d = static_cast<int64_t>(grid.size());
  const int64_t id = options_.offset + static_cast<int64_t>(index);
  core::Xoshiro256p rng(core::stream_key({options_.seed, 0x68656174ULL, static_cast<uint64_t>(id)}));
  // The half spectrum of rfftn (last axis N/2 + 1), frequency k_j at index k_j mod N_j.
  std::vector<int64_t> spec_shape = grid;
  spec_shape.back() = grid.back() / 2 + 1;
  at::Tensor spec = at::zeros(spec_shape, at::kComplexDouble);
  at::Tensor rate = at::zeros(spec_shape, at::kDouble);  // 4 pi^2 nu |k|^2
  std::vector<int64_t> kmax(static_cast<std::size_t>(d));
  for (int64_t j = 0; j < d; ++j)
    kmax[static_cast<std::size_t>(j)] = std::min(options_.max_frequency, grid[static_cast<std::size_t>(j)] / 2 - 1);
  auto* sp = spec.data_ptr<c10::complex<double>>();
  auto* rp = rate.data_ptr<double>();
  // Every frequency vector with |k_j| <= kmax_j (k_last >= 0), in a fixed order.
  std::vector<int64_t> k(static_cast<std::size_t>(d));
  for (int64_t j = 0; j + 1 < d; ++j) k[static_cast<std::size_t>(j)] = -kmax[static_cast<std::size_t>(j)];
  k[static_cast<std::size_t>(d - 1)] = 0;
  for (;;) {
    double k2 = 0;
    int64_t flat = 0;
    for (int64_t j = 0; j < d; ++j) {
      const int64_t n = spec_shape[static_cast<std::size_t>(j)], nj = grid[static_cast<std::size_t>(j)];
      const int64_t kj = k[static_cast<std::size_t>(j)];
      flat = flat * n + (j + 1 < d ? (kj % nj + nj) % nj : kj);
      k2 += static_cast<double>(kj * kj);
    }
    const double amp = 1.0 / (1.0 + k2);
    const double re = rng.uniform(-1.0, 1.0), im = rng.uniform(-1.0, 1.0);
    sp[flat] = c10::complex<double>(amp * re, amp * im);
    rp[flat] = 4.0 * M_PI * M_PI * options_.diffusivity * k2;
    // Next frequency vector (the last axis fastest).
    int64_t j = d - 1;
    for (; j >= 0; --j) {
      if (++k[static_cast<std::size_t>(j)] <= kmax[static_cast<std::size_t>(j)]) break;
      k[static_cast<std::size_t>(j)] = j + 1 < d ? -kmax[static_cast<std::size_t>(j)] : 0;
    }
    if (j < 0) break;
  }
  const std::vector<int64_t> dims = [&] {
    std::vector<int64_t> v;
    for (int64_t j = 0; j < d; ++j) v.push_back(j);
    return v;
  }();
  const at::Tensor u0 = at::fft_irfftn(spec, grid, dims);
  const double scale = 1.0 / std::max(u0.square().mean().sqrt().item<double>(), 1e-300);  // unit RMS
  std::vector<at::Tensor> snapshots;
  for (int64_t j = 1; j <= options_.t_out; ++j) {
    const double t = static_cast<double>(j) / static_cast<double>(options_.t_out);
    snapshots.push_back(at::fft_irfftn(spec * at::exp(-rate * t), grid, dims) * scale);
  }
  return {{(u0 * scale).unsqueeze(0).to(at::kFloat), at::stack(snapshots).to(at::kFloat)},
          fmt::format("heat:{}", id)};
}

}  // namespace scaffold::fno
