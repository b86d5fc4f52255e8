// The memory an fno configuration certainly needs on each rank before any data is generated or
// anything allocated (core/memory_budget.hpp checks it): the spectral weights with their
// gradients and Adam's moments, and per example of the batch the lifted input, each Fourier
// layer's input kept for the backward pass, one layer's spectrum and the projection's hidden
// channels, on this rank's part of the grid (the first dimension split over tp_size); and one
// sample's state in the PDE generator (float64). A lower bound. Torch-free.
#pragma once

#include <cstdint>

#include "core/memory_budget.hpp"
#include "workloads/fno/options.hpp"

namespace scaffold::fno {

// in_channels / out_channels: the problem's (problem_shape in sources.hpp).
core::MemoryEstimate fno_memory_estimate(const config::FnoConfig& cfg, int64_t in_channels,
                                         int64_t out_channels);

}  // namespace scaffold::fno
