// The chaos game (docs/fractals.md): point 0 is the origin; for n = 1..N-1 draw r ~ U[0,1), pick
// map 0 when r < p0 else map 1, apply it to point n-1. A cloud is "runaway" once any |coordinate|
// exceeds 1e10; generation does not stop early. Output is N x 3 float64, row-major.
//
// chaos_game_reference is the plain version; chaos_game_lanes is the fast one: it runs kLanes
// independent clouds in lockstep so their dependency chains overlap (the single chain is
// latency-bound). Both use the same float64 operations in the same order (no FMA contraction),
// so their outputs are bit-identical; tests hold them to that.
#pragma once

#include <cstdint>

#include "workloads/scaffold/fractal/ifs.hpp"

namespace scaffold::fractal {

constexpr double kRunawayLimit = 1e10;
constexpr int kLanes = 4;

// kLanes, or 1 when kLanes clouds of n points would take more than 512 MiB of buffers per worker.
int lanes_for_points(int64_t n);

// Fills out[0 .. 3*n) and returns true when the cloud ran away.
bool chaos_game_reference(const IfsParams& params, uint64_t rng_key, int64_t n, double* out);

// One cloud per lane: params[l], rng_keys[l], out[l] (each 3*n doubles), runaway[l].
// Lanes may repeat the same (params, key, out) to pad a partial group: they write equal values.
void chaos_game_lanes(const IfsParams* const params[kLanes], const uint64_t rng_keys[kLanes],
                      int64_t n, double* const out[kLanes], bool runaway[kLanes]);

}  // namespace scaffold::fractal
