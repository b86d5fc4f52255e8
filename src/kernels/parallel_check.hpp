// at::parallel_for is defined inline in ATen/ParallelOpenMP.h as a `#pragma omp parallel`: in a
// file compiled without OpenMP the pragma is ignored and every "parallel" loop runs on the calling
// thread, silently. Kernels written on at::parallel_for include this header, so such a build fails
// here instead of benchmarking one thread (src/CMakeLists.txt links OpenMP into scaffold_model).
#pragma once

#include <ATen/Parallel.h>

#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
#error "at::parallel_for needs this file compiled with OpenMP (-fopenmp), else it runs serially"
#endif
