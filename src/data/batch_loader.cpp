// BatchLoader (data/batch_loader.hpp): a bounded prefetcher over worker threads; it does not
// shuffle (sampler.hpp decides the order) and does not move data to a device (the loop does).
#include "data/batch_loader.hpp"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace scaffold::data {

// ---------------------------------------------------------------------------------------------
// BatchLoader: workers claim whole batches in order (like torch's DataLoader workers), at most
// `ahead` batches beyond the one next() is waiting for, and park finished ones by batch number;
// next() takes them in order, so the output does not depend on which worker was faster.

struct BatchLoader::Impl {
  struct Result {
    Batch batch;
    std::exception_ptr error;
  };

  const ExampleSource& dataset;
  std::vector<int64_t> indices;
  uint64_t draw_key = 0;
  std::size_t batch_size = 1;
  std::size_t num_batches = 0;
  bool pin = false;
  std::size_t ahead = 0;  // most batches claimed by workers and not yet taken by next()

  std::mutex mutex;
  std::condition_variable work_cv;   // workers: room to claim another batch, or stop
  std::condition_variable ready_cv;  // next(): the batch it waits for is parked
  std::map<std::size_t, Result> ready;
  std::size_t claimed = 0;  // batches handed to workers so far
  std::size_t taken = 0;    // batches returned by next() so far
  bool failed = false;      // a worker hit an error: claim nothing more
  std::atomic<bool> stopping{false};
  std::exception_ptr error;  // once next() has rethrown it, every later next() does too
  std::vector<std::thread> threads;

  Impl(const ExampleSource& ds, std::vector<int64_t> idx, uint64_t key)
      : dataset(ds), indices(std::move(idx)), draw_key(key) {}

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    work_cv.notify_all();
    for (auto& t : threads) t.join();
  }

  // Loads and stacks batch b; false when stopped part-way (the destructor is waiting).
  bool load(std::size_t b, Batch* out) const {
    const std::size_t begin = b * batch_size;
    const std::size_t end = std::min(indices.size(), begin + batch_size);
    std::vector<std::vector<at::Tensor>> fields;  // [field][example]
    out->ids.clear();
    for (std::size_t i = begin; i < end; ++i) {
      if (stopping.load()) return false;
      const auto index = static_cast<uint64_t>(indices[i]);
      Example e = dataset.get(static_cast<std::size_t>(index), core::stream_key({draw_key, index}));
      if (fields.empty()) fields.resize(e.fields.size());
      if (e.fields.size() != fields.size())
        throw core::Error(fmt::format("example {} has {} fields, the batch's first has {}", e.id,
                                      e.fields.size(), fields.size()));
      for (std::size_t f = 0; f < fields.size(); ++f) fields[f].push_back(std::move(e.fields[f]));
      out->ids.push_back(std::move(e.id));
    }
    out->fields.clear();
    for (const auto& items : fields) {
      if (pin) {
        // Stack straight into page-locked memory rather than stacking and then copying to pin.
        at::Tensor stacked =
            at::empty(stacked_sizes(items), items[0].options().pinned_memory(true));
        at::stack_out(stacked, items, 0);
        out->fields.push_back(std::move(stacked));
      } else {
        out->fields.push_back(at::stack(items, 0));
      }
    }
    return true;
  }

  static std::vector<int64_t> stacked_sizes(const std::vector<at::Tensor>& items) {
    std::vector<int64_t> sizes{static_cast<int64_t>(items.size())};
    for (int64_t s : items[0].sizes()) sizes.push_back(s);
    return sizes;
  }

  void worker_loop() {
    for (;;) {
      std::size_t b = 0;
      {
        std::unique_lock<std::mutex> lock(mutex);
        work_cv.wait(lock, [&] {
          return stopping || failed || claimed >= num_batches || claimed < taken + ahead;
        });
        if (stopping || failed || claimed >= num_batches) return;
        b = claimed++;
      }
      Result result;
      try {
        if (!load(b, &result.batch)) return;
      } catch (...) {
        result.error = std::current_exception();
      }
      const bool failed_here = static_cast<bool>(result.error);
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (failed_here) failed = true;
        ready.emplace(b, std::move(result));
      }
      ready_cv.notify_one();
      if (failed_here) work_cv.notify_all();  // idle workers: nothing more to claim
    }
  }
};

BatchLoader::BatchLoader(const ExampleSource& dataset, std::vector<int64_t> indices, int batch_size,
                         int workers, bool pin_memory, uint64_t draw_key)
    : impl_(std::make_unique<Impl>(dataset, std::move(indices), draw_key)) {
  if (batch_size < 1) throw core::Error(fmt::format("batch size {} must be >= 1", batch_size));
  if (workers < 0) throw core::Error(fmt::format("dataloader workers {} must be >= 0", workers));
  for (int64_t i : impl_->indices)
    if (i < 0 || i >= static_cast<int64_t>(dataset.size()))
      throw core::Error(fmt::format("example index {} is outside the {} examples of the source", i,
                                    dataset.size()));
  Impl& m = *impl_;
  m.batch_size = static_cast<std::size_t>(batch_size);
  m.num_batches = (m.indices.size() + m.batch_size - 1) / m.batch_size;
  // Pinned memory only speeds up host-to-device copies; without CUDA there is nothing to pin for.
  m.pin = pin_memory && at::hasCUDA();
  m.ahead = 2 * static_cast<std::size_t>(workers);  // torch's prefetch_factor = 2 per worker
  const std::size_t threads = std::min(static_cast<std::size_t>(workers), m.num_batches);
  // If a thread fails to start, ~Impl (run as impl_ unwinds) stops and joins the started ones.
  for (std::size_t t = 0; t < threads; ++t) m.threads.emplace_back([&m] { m.worker_loop(); });
}

BatchLoader::~BatchLoader() = default;  // ~Impl stops and joins the workers

std::size_t BatchLoader::batches() const {
  return impl_->num_batches;
}

bool BatchLoader::next(Batch* out) {
  Impl& m = *impl_;
  if (m.error) std::rethrow_exception(m.error);
  if (m.taken >= m.num_batches) return false;
  if (m.threads.empty()) {
    Batch batch;
    try {
      m.load(m.taken, &batch);
    } catch (...) {
      m.error = std::current_exception();
      throw;
    }
    ++m.taken;
    *out = std::move(batch);
    return true;
  }
  Impl::Result result;
  {
    std::unique_lock<std::mutex> lock(m.mutex);
    m.ready_cv.wait(lock, [&] { return m.ready.count(m.taken) != 0; });
    auto it = m.ready.find(m.taken);
    result = std::move(it->second);
    m.ready.erase(it);
    ++m.taken;
  }
  m.work_cv.notify_all();  // room for one more batch ahead
  if (result.error) {
    m.error = result.error;
    std::rethrow_exception(m.error);
  }
  *out = std::move(result.batch);
  return true;
}

}  // namespace scaffold::data
