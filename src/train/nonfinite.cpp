#include "train/nonfinite.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <exception>

#include "core/rng.hpp"

namespace scaffold::train {

std::vector<std::string> nonfinite_inputs(const data::ExampleSource& set,
                                          const std::vector<int64_t>& examples, uint64_t draw_key) {
  std::vector<std::string> found;
  for (const int64_t index : examples) {
    const auto i = static_cast<std::size_t>(index);
    data::Example example;
    const std::string origin = set.origin(i);
    try {
      example = set.get(i, core::stream_key({draw_key, static_cast<uint64_t>(index)}));
    } catch (const std::exception& e) {
      found.push_back(fmt::format("example {} could not be read again: {}", index, e.what()));
      continue;
    }
    const std::string name = !origin.empty() ? origin : fmt::format("example {}", example.id);
    for (std::size_t f = 0; f < example.fields.size(); ++f) {
      const at::Tensor& field = example.fields[f];
      if (!field.defined() || !at::isFloatingType(field.scalar_type())) continue;
      const at::Tensor bad = field.isfinite().logical_not();
      if (!bad.any().item<bool>()) continue;
      // The first offending element in row-major order, as a multi-index.
      const int64_t flat = bad.reshape({-1}).nonzero()[0][0].item<int64_t>();
      std::vector<int64_t> at_index(static_cast<std::size_t>(field.dim()));
      int64_t rest = flat;
      for (int64_t d = field.dim() - 1; d >= 0; --d) {
        at_index[static_cast<std::size_t>(d)] = rest % field.size(d);
        rest /= field.size(d);
      }
      const double value = field.reshape({-1})[flat].item<double>();
      const int64_t count = bad.sum().item<int64_t>();
      found.push_back(fmt::format(
          "{} holds {} (field {}, element [{}]{})", name,
          std::isnan(value) ? "NaN" : (value > 0 ? "+Inf" : "-Inf"), f, fmt::join(at_index, ", "),
          count > 1 ? fmt::format(", and {} more non-finite values", count - 1) : ""));
    }
  }
  return found;
}

}  // namespace scaffold::train
