// Checking a cached dataset folder against what it should hold before a run trains on it. The
// loader trains on whatever files sit in the split folders, so a deleted volume would silently
// train on fewer samples, a stray file on one more, and an edited meta.yaml would be believed.
// The truth is recomputed, not read: the plan (which volume is in which split) follows from the
// dataset key, each shard file's exact size from its shape, and the small tables (contents, split,
// colours, mask values) from the plan. meta.yaml carries a digest of itself. No digest of the
// volumes: reading every byte of a large dataset at each start would cost more than generating it.
#pragma once

#include <cstdint>

#include "workloads/scaffold/dataset/cache.hpp"
#include "workloads/scaffold/dataset/layout.hpp"
#include "workloads/scaffold/dataset/plan.hpp"

namespace scaffold::dataset {

// Throws core::FileError naming the dataset folder and every problem (up to a few dozen, then a
// count): meta.yaml edited (its meta_sha256 does not match), its id, key, shard layout or counts
// differing from the key's and the plan's, a missing or differing table, a missing volume or mask
// file, one whose size is not its shape's, and a file in a split folder that the plan does not
// hold. `side` is the volume's side in voxels (2^problem_scale).
void check_dataset_files(const DatasetPaths& paths, const DatasetMeta& meta, const DatasetKey& key,
                         const DatasetPlan& plan, const ShardLayout& layout, int64_t side);

}  // namespace scaffold::dataset
