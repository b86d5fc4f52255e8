#include "workloads/scaffold/dataset/plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace scaffold::dataset {
namespace {

// Random-stream ids of the dataset plan (fractal streams use 1-3, the sampler 4).
enum class Stream : uint64_t { InstanceDraw = 10, Shuffle = 11, Split = 12, Colors = 13 };

uint64_t key(uint64_t seed, Stream stream, uint64_t a = 0, uint64_t b = 0) {
  return core::stream_key({seed, static_cast<uint64_t>(stream), a, b});
}

// The first k items of a uniform random permutation of 0..n-1 (partial Fisher-Yates).
std::vector<int> sample_without_replacement(core::Xoshiro256p& rng, int n, int k) {
  std::vector<int> items(n);
  std::iota(items.begin(), items.end(), 0);
  for (int i = 0; i < k; ++i) {
    const int j = i + static_cast<int>(rng.below(static_cast<uint64_t>(n - i)));
    std::swap(items[i], items[j]);
  }
  items.resize(k);
  return items;
}

int used_instances(const PlanOptions& o) {
  return o.n_instances_used_per_fractal / o.n_fracts_per_vol * o.n_fracts_per_vol;
}

}  // namespace

int planned_volumes(const PlanOptions& o) {
  return o.n_categories * used_instances(o) / o.n_fracts_per_vol;
}

int planned_validation_volumes(const PlanOptions& o) {
  // As ScaFFold: int(V * val_split / 100), truncating the float64 product.
  return static_cast<int>(static_cast<double>(planned_volumes(o)) * o.val_split / 100.0);
}

std::vector<int> DatasetPlan::volumes(bool validation_split) const {
  std::vector<int> out;
  for (int v = 0; v < n_volumes(); ++v)
    if (validation[v] == validation_split) out.push_back(v);
  return out;
}

std::vector<int> DatasetPlan::mask_values(bool validation_split) const {
  std::set<int> values{0};
  for (int v : volumes(validation_split))
    for (const Fractal& f : contents[v]) values.insert(f.category + 1);
  return {values.begin(), values.end()};
}

DatasetPlan make_plan(const PlanOptions& o) {
  const int per_category = used_instances(o);
  const int n_volumes = planned_volumes(o);
  const int n_val = planned_validation_volumes(o);
  if (o.n_categories < 1 || o.n_fracts_per_vol < 1 || per_category < o.n_fracts_per_vol)
    throw core::Error(fmt::format(
        "dataset: n_instances_used_per_fractal {} gives no volume with n_fracts_per_vol {}",
        o.n_instances_used_per_fractal, o.n_fracts_per_vol));
  if (n_val < 1 || n_val >= n_volumes)
    throw core::Error(fmt::format(
        "dataset: val_split {} of {} volumes leaves {} for validation and {} for training; each "
        "needs at least one",
        o.val_split, n_volumes, n_val, n_volumes - n_val));

  // 1. Instances per category, drawn without replacement in chunks of the library's size.
  std::vector<Fractal> pairs;
  for (int c = 0; c < o.n_categories; ++c) {
    int chunk = 0;
    for (int drawn = 0; drawn < per_category; ++chunk) {
      core::Xoshiro256p rng(key(o.seed, Stream::InstanceDraw, c, chunk));
      const int k = std::min(o.instances_available, per_category - drawn);
      for (int i : sample_without_replacement(rng, o.instances_available, k))
        pairs.push_back({c, i});
      drawn += k;
    }
  }
  // 2. Shuffle the pairs, then cut them into volumes of n_fracts_per_vol.
  core::Xoshiro256p shuffle(key(o.seed, Stream::Shuffle));
  for (std::size_t i = pairs.size(); i > 1; --i) std::swap(pairs[i - 1], pairs[shuffle.below(i)]);
  DatasetPlan plan;
  plan.contents.resize(n_volumes);
  for (int v = 0; v < n_volumes; ++v)
    plan.contents[v].assign(
        pairs.begin() + static_cast<std::ptrdiff_t>(v) * o.n_fracts_per_vol,
        pairs.begin() + static_cast<std::ptrdiff_t>(v + 1) * o.n_fracts_per_vol);
  // 3. Validation volumes: a random subset, not contiguous.
  core::Xoshiro256p split(key(o.seed, Stream::Split));
  plan.validation.assign(n_volumes, false);
  for (int v : sample_without_replacement(split, n_volumes, n_val)) plan.validation[v] = true;
  // 4. One colour per category.
  core::Xoshiro256p colors(key(o.seed, Stream::Colors));
  plan.colors.resize(o.n_categories);
  for (auto& rgb : plan.colors)
    for (float& channel : rgb)  // rounding to float32 could reach 1.0: keep [0, 1)
      channel = std::min(static_cast<float>(colors.uniform01()), 0.99999994f);
  return plan;
}

std::string contents_csv(const DatasetPlan& plan) {
  std::string text;
  for (int v = 0; v < plan.n_volumes(); ++v) {
    text += std::to_string(v);
    for (const Fractal& f : plan.contents[v]) text += fmt::format(",{},{}", f.category, f.instance);
    text += '\n';
  }
  return text;
}

std::string split_csv(const DatasetPlan& plan) {
  std::string text = "volume,split\n";
  for (int v = 0; v < plan.n_volumes(); ++v)
    text += fmt::format("{},{}\n", v, plan.validation[v] ? "validation" : "training");
  return text;
}

std::string colors_csv(const DatasetPlan& plan) {
  std::string text = "category,red,green,blue\n";
  for (std::size_t c = 0; c < plan.colors.size(); ++c)
    text +=
        fmt::format("{},{},{},{}\n", c, plan.colors[c][0], plan.colors[c][1], plan.colors[c][2]);
  return text;
}

std::string mask_values_json(const DatasetPlan& plan, bool validation_split) {
  // The bytes nlohmann::json's compact dump gave (the format of datasets already on disk).
  return fmt::format("{{\"mask_values\":[{}]}}\n",
                     fmt::join(plan.mask_values(validation_split), ","));
}

}  // namespace scaffold::dataset
