// The interface the batch loader reads (data/batch_loader.hpp): a fixed number of examples, each a
// list of tensors whose shapes are the same for every example of the source, so the loader can
// stack them into a batch. Sources are read from several loader threads at once.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace scaffold::data {

struct Example {
  std::vector<at::Tensor> fields;  // e.g. image (3, H, W) float32 and label () int64
  std::string id;                  // names the example in errors (a file name, an index)
};

class ExampleSource {
 public:
  virtual ~ExampleSource() = default;
  virtual std::size_t size() const = 0;
  // Example `index` (thread-safe). `draw` keys the random augmentation of this example in this
  // epoch (the loader derives it from the seed, the epoch and the index); sources without
  // augmentation ignore it. Throws core::FileError naming the file it could not read.
  virtual Example get(std::size_t index, uint64_t draw) const = 0;
  // Where example `index` is read from (a file path), to name it in errors; "" when the source
  // has no file to name (the example's id is named instead).
  virtual std::string origin(std::size_t /*index*/) const { return {}; }
};

}  // namespace scaffold::data
