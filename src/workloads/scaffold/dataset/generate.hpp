// Preparing the dataset of a run (docs/dataset.md): reuse the newest complete cached dataset with
// the same key, or generate one across all ranks and threads into a temporary folder and rename it
// when complete. Volumes are rendered and written one at a time per worker, so peak memory is
// about threads x 14 B x G^3 (x2 when sharded), whatever the number of volumes. A reused dataset
// is checked against its key first (manifest.hpp). One generation per key at a time: rank 0 holds
// <config_id>/.lock, a second job waits there and then reuses the result. Collective: every rank
// calls it; failures on any rank end every rank with the error, and a failed generation removes
// its temporary folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "dist/communicator.hpp"
#include "workloads/scaffold/dataset/cache.hpp"
#include "workloads/scaffold/dataset/layout.hpp"
#include "workloads/scaffold/dataset/plan.hpp"
#include "workloads/scaffold/fractal/library.hpp"

namespace scaffold::dataset {

struct DatasetOptions {
  DatasetKey key;
  std::filesystem::path dataset_dir;  // cache root
  fractal::LibraryLayout library;     // where the instance clouds are read from
  bool reuse_requires_same_commit = false;
  std::string code_commit;  // recorded in meta.yaml and the folder name
  int threads = 1;
};

PlanOptions plan_options(const DatasetKey& key);

struct DatasetInfo {
  std::filesystem::path root;  // the dataset folder (final name)
  std::string config_id;
  bool reused = false;
  DatasetMeta meta;
  double seconds = 0.0;         // generation wall time (max over ranks); 0 when reused
  uint64_t bytes_written = 0;   // all ranks
  uint64_t voxels_written = 0;  // all ranks, counted once per voxel of every volume
};

DatasetInfo prepare_dataset(dist::Communicator& comm, const DatasetOptions& options);

}  // namespace scaffold::dataset
