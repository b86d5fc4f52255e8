// Preparing an FNO dataset: reuse the complete one with the same key, or generate what is
// missing into its .partial folder (resuming an interrupted run), read every file back for the
// training statistics and the digest, write meta.json and rename the folder to its final name.
// Collective: every rank calls it; samples are block-partitioned over ranks and handed to
// `threads` worker threads per rank, each sample computed single-threaded, so the bytes do not
// depend on the rank or thread count. Rank 0 holds an flock on <id>.lock meanwhile, so two jobs
// on one key wait for each other instead of writing the same folder. A failure on any rank ends
// every rank with the same dist::AgreedError; what was finished stays for the rerun to resume.
#pragma once

#include <cstdint>
#include <filesystem>

#include "dist/communicator.hpp"
#include "workloads/fno/data/cache.hpp"
#include "workloads/fno/data/options.hpp"

namespace scaffold::fno {

struct FnoDatasetInfo {
  std::filesystem::path root;  // the complete dataset
  std::string config_id;
  bool reused = false;
  FnoDataMeta meta;
  int64_t samples_total = 0;      // train + val
  int64_t samples_generated = 0;  // by this call (all ranks); 0 when reused
  int64_t solver_steps = 0;       // taken by this call (all ranks)
  double seconds = 0.0;           // wall time of this call (max over ranks)
  double solve_seconds = 0.0;     // of which generating samples (max over ranks)
};

FnoDatasetInfo ensure_fno_dataset(dist::Communicator& comm, const FnoDataOptions& options);

}  // namespace scaffold::fno
