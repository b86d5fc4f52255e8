// What the dataset holds, decided before any voxel is drawn (docs/dataset.md): which
// (category, instance) fractals make each volume, which volumes are for validation, and each
// category's colour. All three come from keyed random streams of the seed, so every rank
// computes the same plan on its own.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace scaffold::dataset {

struct PlanOptions {
  uint64_t seed = 42;
  int n_categories = 5;
  int n_instances_used_per_fractal = 145;  // rounded down to a multiple of n_fracts_per_vol
  int n_fracts_per_vol = 3;
  double val_split = 30.0;        // percent of the volumes used for validation
  int instances_available = 145;  // instances per category in the fractal library
};

struct Fractal {
  int category = 0;
  int instance = 0;
};

struct DatasetPlan {
  std::vector<std::vector<Fractal>>
      contents;                  // per volume: n_fracts_per_vol fractals, in paint order
  std::vector<bool> validation;  // per volume
  std::vector<std::array<float, 3>> colors;  // per category: RGB in [0, 1)
  int n_volumes() const { return static_cast<int>(contents.size()); }
  std::vector<int> volumes(bool validation_split) const;  // ascending volume indices
  // Sorted label values present in a split: 0 and category + 1 for each category it holds.
  std::vector<int> mask_values(bool validation_split) const;
};

// Number of volumes and of validation volumes for these options (no plan needed).
int planned_volumes(const PlanOptions& options);
int planned_validation_volumes(const PlanOptions& options);

// Throws core::Error when the options leave no training or no validation volume.
DatasetPlan make_plan(const PlanOptions& options);

// "<volume>,<c1>,<i1>,<c2>,<i2>,..." per line, no header (volumes_contents.csv, docs/dataset.md).
std::string contents_csv(const DatasetPlan& plan);
// "volume,split" header, then "<volume>,training|validation" per volume.
std::string split_csv(const DatasetPlan& plan);
// "category,red,green,blue" header, then one row per category (float32 values, round-trip text).
std::string colors_csv(const DatasetPlan& plan);
// {"mask_values":[0,...]} and a newline: the split's mask_values (the
// {train,val}_unique_mask_vals.json).
std::string mask_values_json(const DatasetPlan& plan, bool validation_split);

}  // namespace scaffold::dataset
