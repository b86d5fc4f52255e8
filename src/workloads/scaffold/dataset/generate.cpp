#include "workloads/scaffold/dataset/generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>

#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/npy.hpp"
#include "core/progress.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "workloads/scaffold/dataset/manifest.hpp"
#include "workloads/scaffold/dataset/render.hpp"

namespace scaffold::dataset {
namespace fs = std::filesystem;

namespace {

// A temporary folder whose owner cannot be checked (no owner file, no flock) is abandoned after
// a day without change.
constexpr std::chrono::hours kFallbackIdle{24};
constexpr double kHeartbeatEvery_s = 60.0;

// Rank 0: the folders and the small tables of a new dataset.
void write_tables(const DatasetPaths& paths, const DatasetPlan& plan) {
  for (Split split : {Split::Training, Split::Validation}) {
    core::create_directories(paths.volumes_dir(split));
    core::create_directories(paths.masks_dir(split));
    core::write_file_atomic(paths.mask_values_json(split),
                            mask_values_json(plan, split == Split::Validation));
  }
  core::write_file_atomic(paths.contents_csv(), contents_csv(plan));
  core::write_file_atomic(paths.split_csv(), split_csv(plan));
  core::write_file_atomic(paths.colors_csv(), colors_csv(plan));
}

struct WorkerBuffers {
  std::vector<std::vector<float>> clouds;
  RenderedVolume volume;
  std::vector<float> shard_image;
  std::vector<uint16_t> shard_mask;
};

// Renders volume v and writes all its shards; returns the bytes written.
uint64_t write_volume(const DatasetOptions& o, const DatasetPaths& paths, const DatasetPlan& plan,
                      const ShardLayout& layout, int v, WorkerBuffers* buf) {
  const int64_t grid = int64_t{1} << o.key.problem_scale;
  const auto& fractals = plan.contents[v];
  buf->clouds.resize(fractals.size());
  for (std::size_t f = 0; f < fractals.size(); ++f) {
    const fs::path file = o.library.instance_file(fractals[f].category, fractals[f].instance);
    std::vector<int64_t> shape;
    buf->clouds[f] = core::read_npy<float>(file, &shape);
    // A cloud with a NaN or a runaway point would be voxelised into a wrong volume without a word.
    fractal::check_instance_points(file, shape, buf->clouds[f].data(), o.library.point_num);
  }
  render_volume(fractals, buf->clouds, plan.colors, grid, &buf->volume);

  const Split split = plan.validation[v] ? Split::Validation : Split::Training;
  uint64_t bytes = 0;
  for (int s = 0; s < layout.count(); ++s) {
    const auto box = layout.box(s, grid);
    const std::vector<int64_t> mask_shape{box[0].size(), box[1].size(), box[2].size()};
    const std::vector<int64_t> image_shape{3, box[0].size(), box[1].size(), box[2].size()};
    const float* image = buf->volume.image.data();
    const uint16_t* mask = buf->volume.mask.data();
    if (layout.count() > 1) {  // unsharded volumes are written straight from the render buffers
      extract_shard(buf->volume, box, &buf->shard_image, &buf->shard_mask);
      image = buf->shard_image.data();
      mask = buf->shard_mask.data();
    }
    // To the page cache only: the folder is synced once when complete, before it is renamed
    // into view (a crash before that leaves a temporary folder, which is never used).
    core::write_npy(paths.volume_file(split, v, s), core::DType::Float32, image_shape, image,
                    core::Durability::kPageCache);
    core::write_npy(paths.mask_file(split, v, s), core::DType::UInt16, mask_shape, mask,
                    core::Durability::kPageCache);
    bytes += static_cast<uint64_t>(box[0].size() * box[1].size() * box[2].size()) * (3 * 4 + 2);
  }
  return bytes;
}

}  // namespace

PlanOptions plan_options(const DatasetKey& key) {
  PlanOptions p;
  p.seed = key.seed;
  p.n_categories = key.n_categories;
  p.n_instances_used_per_fractal = key.n_instances_used_per_fractal;
  p.n_fracts_per_vol = key.n_fracts_per_vol;
  p.val_split = key.val_split;
  return p;
}

DatasetInfo prepare_dataset(dist::Communicator& comm, const DatasetOptions& o) {
  DatasetInfo info;
  info.config_id = config_id(o.key);
  const fs::path id_dir = o.dataset_dir / info.config_id;
  const ShardLayout layout(o.key.dc_num_shards, o.key.dc_shard_dims);
  const int64_t grid = int64_t{1} << o.key.problem_scale;
  layout.check_extent(grid);

  // Rank 0 takes the key's lock (waiting while another job generates this dataset), tidies up and
  // looks for a reusable dataset; everyone learns its verdict. The lock is kept while generating.
  std::optional<core::FileLock> key_lock;
  std::string found;
  dist::run_agreed(comm, [&] {
    if (comm.rank() != 0) return;
    core::create_directories(id_dir);
    key_lock.emplace(core::FileLock::wait(dataset_lock_file(id_dir), "dataset"));
    const DatasetDirScan scan = remove_abandoned_dataset_dirs(id_dir, kFallbackIdle);
    if (scan.removed > 0)
      LOG_INFO("dataset: removed {} generation folder(s) left by interrupted runs in {}",
               scan.removed, id_dir.string());
    if (scan.kept > 0)
      LOG_WARN(
          "dataset: kept {} generation folder(s) in {} whose owner may still run (outside the lock "
          "{})",
          scan.kept, id_dir.string(), dataset_lock_file(id_dir).string());
    const auto reusable = find_reusable(
        id_dir, info.config_id,
        o.reuse_requires_same_commit ? std::optional<std::string>(o.code_commit) : std::nullopt);
    if (reusable) {
      found = reusable->string();
      key_lock.reset();  // a finished dataset is never written again
    }
  });
  comm.broadcast(found, 0);
  if (!found.empty()) {
    info.root = found;
    info.reused = true;
    dist::run_agreed(comm, [&] {
      info.meta =
          parse_meta(core::read_file(info.root / "meta.yaml"), (info.root / "meta.yaml").string());
      // Rank 0 checks the files against the plan: they, not meta.yaml, are what the run trains on.
      if (comm.rank() == 0) {
        if (info.meta.meta_sha256_recorded.empty())
          LOG_WARN(
              "dataset: {} has no meta_sha256 (written by an older scaffold): an edit of its "
              "created_at or "
              "code_commit would go unnoticed; its id, key, layout and counts are checked",
              (info.root / "meta.yaml").string());
        check_dataset_files(DatasetPaths{info.root}, info.meta, o.key,
                            make_plan(plan_options(o.key)), layout, grid);
      }
    });
    LOG_INFO("dataset: reusing {} ({} volumes: {} training, {} validation; created {}, commit {})",
             info.root.string(), info.meta.n_volumes, info.meta.n_train, info.meta.n_val,
             info.meta.created_at, info.meta.code_commit);
    return info;
  }

  // Generate. Every rank computes the same plan from the seed; rank 0 writes the tables.
  core::Stopwatch clock;
  const DatasetPlan plan = make_plan(plan_options(o.key));
  std::string tmp;
  std::optional<TemporaryDatasetDir> owned;  // rank 0: the folder being filled, and its owner lock
  // A failed generation leaves nothing: the folder is never resumed, so rank 0 removes it (every
  // rank has stopped writing by the time an agreed error is thrown).
  const auto remove_on_failure = [&](auto&& step) {
    try {
      step();
    } catch (...) {
      if (owned) {
        std::error_code ec;
        fs::remove_all(owned->path, ec);
        LOG_INFO("dataset: removed the unfinished generation folder {}", owned->path.string());
        owned.reset();
      }
      throw;
    }
  };
  remove_on_failure([&] {
    dist::run_agreed(comm, [&] {
      if (comm.rank() != 0) return;
      owned.emplace(make_temporary_dataset_dir(id_dir));
      write_tables(DatasetPaths{owned->path}, plan);
      tmp = owned->path.string();
    });
  });
  comm.broadcast(tmp, 0);
  const DatasetPaths paths{tmp};
  const int n_volumes = plan.n_volumes();
  const int n_val = static_cast<int>(plan.volumes(true).size());
  LOG_INFO(
      "dataset: generating {} volumes of {}^3 ({} training, {} validation), {} shard(s) each, "
      "into {} ({} rank(s) x {} thread(s))",
      n_volumes, grid, n_volumes - n_val, n_val, layout.count(), id_dir.string(), comm.size(),
      o.threads);

  // Volumes are block-partitioned over ranks; threads take this rank's volumes one at a time.
  const int block = (n_volumes + comm.size() - 1) / comm.size();
  const int first = std::min(n_volumes, block * comm.rank());
  const int last = std::min(n_volumes, first + block);
  std::atomic<uint64_t> bytes{0};
  std::vector<WorkerBuffers> buffers(static_cast<std::size_t>(std::max(1, o.threads)));
  {
    core::Progress progress("dataset volumes (rank 0)", static_cast<uint64_t>(last - first));
    core::Stopwatch beat;
    std::mutex beat_mutex;
    remove_on_failure([&] {
      dist::run_agreed(comm, [&] {
        core::parallel_for(static_cast<std::size_t>(last - first), o.threads,
                           [&](int worker, std::size_t k) {
                             bytes += write_volume(o, paths, plan, layout,
                                                   first + static_cast<int>(k), &buffers[worker]);
                             progress.add();
                             std::lock_guard<std::mutex> lock(beat_mutex);
                             if (beat.elapsed_s() > kHeartbeatEvery_s) {
                               touch_heartbeat(paths.root);
                               beat.restart();
                             }
                           });
        core::sync_file_system(paths.root);  // this rank's volumes, on the disk before the seal
      });
    });
  }
  buffers.clear();

  // Rank 0 seals the dataset: meta.yaml, then the rename that makes it visible.
  info.meta.config_id = info.config_id;
  info.meta.key_json = key_json(o.key);
  info.meta.code_commit = o.code_commit;
  info.meta.created_at = utc_iso8601_now();
  info.meta.dc_num_shards = o.key.dc_num_shards;
  info.meta.dc_shard_dims = o.key.dc_shard_dims;
  info.meta.n_volumes = n_volumes;
  info.meta.n_train = n_volumes - n_val;
  info.meta.n_val = n_val;
  std::string final_dir;
  remove_on_failure([&] {
    dist::run_agreed(comm, [&] {
      if (comm.rank() != 0) return;
      core::write_file_atomic(paths.meta_yaml(), meta_yaml(info.meta));
      final_dir = finalize_dataset_dir(paths.root, o.code_commit).string();
      owned.reset();  // renamed: no longer a temporary folder
    });
  });
  key_lock.reset();
  comm.broadcast(final_dir, 0);
  info.root = final_dir;

  int64_t totals[1] = {static_cast<int64_t>(bytes.load())};
  comm.allreduce_sum(totals, 1);
  double secs = clock.elapsed_s();
  comm.allreduce_max(&secs, 1);
  info.seconds = secs;
  info.bytes_written = static_cast<uint64_t>(totals[0]);
  info.voxels_written =
      static_cast<uint64_t>(n_volumes) * static_cast<uint64_t>(grid * grid * grid);
  LOG_INFO(
      "dataset: wrote {} volumes ({:.2f} GiB) in {:.2f} s: {:.3g} voxels/s, {:.1f} MiB/s, into {}",
      n_volumes, static_cast<double>(info.bytes_written) / (1 << 30), secs,
      static_cast<double>(info.voxels_written) / std::max(secs, 1e-9),
      static_cast<double>(info.bytes_written) / (1 << 20) / std::max(secs, 1e-9),
      info.root.string());
  return info;
}

}  // namespace scaffold::dataset
