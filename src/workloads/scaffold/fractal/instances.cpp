#include "workloads/scaffold/fractal/instances.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/npy.hpp"
#include "core/threads.hpp"
#include "workloads/scaffold/fractal/chaos_game.hpp"

namespace scaffold::fractal {

const std::vector<double>& instance_weight_factors() {
  static const std::vector<double> factors{1.0, 0.5, 0.25, 0.1, 0.0};
  return factors;
}

namespace {

// Float32 copy of a finite cloud; false (and nothing usable) when a value is not finite.
bool to_float_points(const double* cloud, int64_t n, std::vector<float>* out) {
  out->resize(static_cast<std::size_t>(n) * 3);
  for (std::size_t k = 0; k < out->size(); ++k) {
    if (!std::isfinite(cloud[k])) return false;
    (*out)[k] = static_cast<float>(cloud[k]);
  }
  return true;
}

// Tries the attenuation factors from `first_factor` on; throws when none gives a usable cloud.
InstanceCloud generate_from(const IfsParams& base, const InstanceWeights& weights, uint64_t seed,
                            const InstanceTask& task, int64_t point_num, std::size_t first_factor,
                            std::vector<double>* scratch) {
  const auto& factors = instance_weight_factors();
  scratch->resize(static_cast<std::size_t>(point_num) * 3);
  const uint64_t key = instance_points_key(seed, task.category, task.instance);
  InstanceCloud cloud;
  for (std::size_t f = first_factor; f < factors.size(); ++f) {
    const IfsParams params = apply_weights(base, attenuate(weights, factors[f]));
    const bool runaway = chaos_game_reference(params, key, point_num, scratch->data());
    if (!runaway && to_float_points(scratch->data(), point_num, &cloud.points)) {
      cloud.weight_factor = factors[f];
      return cloud;
    }
  }
  throw core::Error(fmt::format(
      "instance {} of category {} runs away even with unit weights: the category's maps are not "
      "contractive enough; delete its CSV to let the search choose another",
      task.instance, task.category));
}

}  // namespace

InstanceCloud generate_instance(const IfsParams& base, const InstanceWeights& weights,
                                uint64_t seed, const InstanceTask& task, int64_t point_num) {
  std::vector<double> scratch;
  return generate_from(base, weights, seed, task, point_num, 0, &scratch);
}

InstanceStats write_instances(const LibraryLayout& layout, const std::vector<IfsParams>& categories,
                              const std::vector<InstanceTask>& tasks, uint64_t seed, int threads,
                              const std::function<void()>& on_done) {
  const auto& table = instance_weight_table();
  std::set<int> used_categories;
  for (const auto& t : tasks) {
    if (t.category < 0 || t.category >= static_cast<int>(categories.size()) || t.instance < 0 ||
        t.instance >= static_cast<int>(table.size()))
      throw core::Error(
          fmt::format("instance task ({}, {}) is out of range", t.category, t.instance));
    used_categories.insert(t.category);
  }
  for (int c : used_categories) core::create_directories(layout.instance_file(c, 0).parent_path());

  const int64_t n = layout.point_num;
  const int lanes = lanes_for_points(n);
  const std::size_t groups = (tasks.size() + lanes - 1) / lanes;
  const int workers = std::max(1, std::min<int>(threads, static_cast<int>(groups)));
  std::vector<std::vector<double>> buffers(static_cast<std::size_t>(workers) * (kLanes + 1));
  std::vector<InstanceStats> per_worker(static_cast<std::size_t>(workers));

  core::parallel_for(groups, workers, [&](int worker, std::size_t g) {
    const std::size_t begin = g * lanes;
    const int used = static_cast<int>(std::min<std::size_t>(lanes, tasks.size() - begin));
    std::vector<double>* buf = &buffers[static_cast<std::size_t>(worker) * (kLanes + 1)];
    IfsParams lane_params[kLanes];
    const IfsParams* params[kLanes];
    uint64_t keys[kLanes];
    double* outs[kLanes];
    bool runaway[kLanes] = {};
    for (int l = 0; l < kLanes; ++l) {
      const int src = l < used ? l : 0;
      const InstanceTask& task = tasks[begin + src];
      if (l < used) lane_params[l] = apply_weights(categories[task.category], table[task.instance]);
      buf[src].resize(static_cast<std::size_t>(n) * 3);
      params[l] = &lane_params[src];
      keys[l] = instance_points_key(seed, task.category, task.instance);
      outs[l] = buf[src].data();
    }
    if (lanes == kLanes)
      chaos_game_lanes(params, keys, n, outs, runaway);
    else
      runaway[0] = chaos_game_reference(*params[0], keys[0], n, outs[0]);

    InstanceStats& stats = per_worker[static_cast<std::size_t>(worker)];
    for (int l = 0; l < used; ++l) {
      const InstanceTask& task = tasks[begin + l];
      InstanceCloud cloud;
      stats.points += static_cast<uint64_t>(n);
      if (runaway[l] || !to_float_points(outs[l], n, &cloud.points)) {
        // Rare: retry this one cloud alone with attenuated weights (reference kernel).
        cloud = generate_from(categories[task.category], table[task.instance], seed, task, n, 1,
                              &buf[kLanes]);
        ++stats.retried;
        stats.points += static_cast<uint64_t>(n);
      }
      // Page cache only: the library is synced once when complete (generate_fractals), and a
      // resume validates every instance file (a short one after a crash is rewritten).
      core::write_npy(layout.instance_file(task.category, task.instance), core::DType::Float32,
                      {n, 3}, cloud.points.data(), core::Durability::kPageCache);
      ++stats.written;
      if (on_done) on_done();
    }
  });

  InstanceStats total;
  for (const auto& s : per_worker) {
    total.written += s.written;
    total.retried += s.retried;
    total.points += s.points;
  }
  return total;
}

}  // namespace scaffold::fractal
