// The CPU kernels' parallel loop: at::parallel_for's contract (f(chunk_begin, chunk_end) over
// contiguous chunks of [begin, end), one per thread of LibTorch's intra-op pool, chunks no
// smaller than `grain` where possible; serial inside another parallel region, on one thread,
// or when the range is no larger than `grain`; the first exception rethrown in the caller;
// at::get_thread_num() the chunk's thread inside f), as a compiled function.
//
// Why not at::parallel_for itself: with an OpenMP LibTorch it is an inline template holding a
// `#pragma omp parallel`, so it is parallel only in files compiled with the compiler's own OpenMP.
// Clang's OpenMP is another runtime (libomp) than the libgomp LibTorch runs on, and two thread
// pools on the same cores spin against each other. This loop calls libgomp's entry point for a
// parallel region directly (the call GCC makes for the pragma): the kernels run on LibTorch's
// threads whichever compiler built them, with no -fopenmp anywhere (docs/architecture.md).
#pragma once

#include <c10/util/FunctionRef.h>

#include <cstdint>

namespace scaffold::kernels {

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  c10::function_ref<void(int64_t, int64_t)> f);

}  // namespace scaffold::kernels
