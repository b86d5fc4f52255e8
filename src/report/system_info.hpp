// system.json: the context a run was measured in (host, CPU/GPU model, LibTorch/MPI/compiler
// versions, threads, allocator, git commit, process grid), so a result table can say what it
// compares. This module fills only what it can learn without LibTorch or MPI; the benchmark
// driver fills the rest (GPU model, MPI version, world size, nodes, threads, shards, device).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace scaffold::report {

inline constexpr const char* kSystemInfoFileName = "system.json";

// One run's context. Written once by rank 0 when the run starts; read back by `scaffold report`.
struct SystemInfo {
  std::string host;       // host name of rank 0
  std::string cpu_model;  // /proc/cpuinfo "model name" (or the ARM equivalent)
  // What tells CPUs with one model name apart (VMs name Zen 3, 4 and 5 all "AMD EPYC"), and the
  // vector ISA the hand-written kernels' clones run: x86 "family 25 model 1; avx2 fma; kernels
  // fma; bf16 products in fp32", from CPUID (the flags listed are those the kernels and oneDNN
  // choose by: avx2, fma, avx512f, avx512bw, avx512_bf16, amx_tile; the last part says whether
  // bf16 products run as such or on float32 products, core::cpu_has_bf16_products). "" elsewhere.
  std::string cpu_isa;
  std::string gpu_model;      // "" when the run used no GPU
  std::string torch_version;  // LibTorch version
  std::string mpi_version;    // MPI library version string; "" in a build without MPI
  std::string compiler;       // e.g. "GCC 12.2.0"
  std::string allocator;      // "tcmalloc" or "glibc"
  // The BLAS the process runs its float32 matrix products on: OpenBLAS's build line and the kernel
  // core it chose (which OPENBLAS_CORETYPE overrides, e.g. AVX2 "Haswell" kernels on an AVX-512
  // CPU: half the GEMM speed), or "none" when no OpenBLAS is loaded.
  std::string blas;
  std::string git_commit;          // scaffold's commit, "-dirty" when built from a changed tree
  std::string scaffold_version;    // project version, e.g. "0.1.0"
  std::string device;              // the resolved training device, e.g. "cpu", "cuda:0"
  int world_size = 1;              // MPI ranks
  int nodes = 1;                   // distinct hosts among the ranks
  int threads = 1;                 // compute threads per rank
  std::vector<int> dc_num_shards;  // spatial shards per sharded dimension
  // The compute kernels the run chose where there is a choice, "<op>=<kernel>" (e.g.
  // "conv=onednn", "upconv=gemm"); empty for a workload without such options.
  std::vector<std::string> kernels;
  // What rank 0 actually ran for each op with a choice, counted over the run, "<op>=<kernel>
  // x<calls>[, ...]" (e.g. "conv=winograd x180, onednn x60"); added when training ends (a run
  // that stopped before it has none).
  std::vector<std::string> kernels_run;
  // Each kernel that could not run what was chosen and what ran instead, with the reason: found
  // when the keys were resolved (e.g. Winograd under bf16 autocast) or while training.
  std::vector<std::string> kernel_fallbacks;
  // The in-process measurements behind a choice made per shape on this machine, one line each, e.g.
  // "conv x 8x64x56x56 nhwc Float w 64x64x3x3 s1x1 p1x1: winograd 7.9 ms, libtorch 14.4 ms ->
  // winograd" (image classification's conv_kernel: probe); added when training ends.
  std::vector<std::string> kernel_probes;
  // Every rank's training device in world rank order, "<host> <device>" and on CUDA the physical
  // GPU: "node1 cuda:1 visible=3 pci=0000:41:00.0" (train::select_device).
  std::vector<std::string> rank_devices;
  std::string created_at;  // UTC, ISO 8601: "2025-03-12T10:15:00Z"
};

// Sets what the report module can learn of this process's host in `info`: host, CPU model and
// ISA, compiler, allocator, BLAS, scaffold version and commit, the LibTorch version scaffold was
// built with, and created_at (now); the run's own fields are left as the caller set them.
void add_host_info(SystemInfo& info);

// Now in UTC, ISO 8601 to the second: "2025-03-12T10:15:00Z" (created_at of system.json and
// summary.json).
std::string utc_now_iso8601();

// Writes <run_dir>/system.json atomically (keys in SystemInfo's order). Throws core::FileError.
void write_system_json(const std::filesystem::path& run_dir, const SystemInfo& info);

// Reads a system.json file. Keys it lacks keep SystemInfo's defaults (older or hand-written
// files); unknown keys are ignored. Malformed JSON or a value of the wrong type is a
// core::FileError naming the file (and the key).
SystemInfo read_system_json(const std::filesystem::path& path);

// The JSON text write_system_json writes (2-space indent, trailing newline).
std::string system_info_json(const SystemInfo& info);

}  // namespace scaffold::report
