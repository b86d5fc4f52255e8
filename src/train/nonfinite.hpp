// Where a non-finite loss came from: when a pass's sums turn NaN or Inf, the loop re-reads the
// examples of the first batch that did and asks whether its input data held NaN or Inf (a damaged
// file) or was finite (the model itself diverged), so "training diverged" names the file or says
// the data was fine. Only on that error path: nothing here runs during normal training.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/example_source.hpp"

namespace scaffold::train {

// The examples' floating-point fields that hold a NaN or an infinity, each named by the
// source's origin (a file) or the example's id, with the first such element's index and value:
// "/data/volumes/training/3_shard000000.npy holds NaN (field 0, element [0, 15, 15, 15])".
// Examples are read with the loader's augmentation key (core::stream_key({draw_key, index})).
// Empty when every field is finite. A read that fails is reported in the list, not thrown.
std::vector<std::string> nonfinite_inputs(const data::ExampleSource& set,
                                          const std::vector<int64_t>& examples, uint64_t draw_key);

}  // namespace scaffold::train
