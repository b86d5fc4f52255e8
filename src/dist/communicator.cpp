#include "dist/communicator.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "core/error.hpp"

namespace scaffold::dist {

std::size_t element_size(DataType type) {
  switch (type) {
    case DataType::Float32:
      return 4;
    case DataType::Float64:
    case DataType::Int64:
      return 8;
  }
  return 1;
}

std::unique_ptr<Request> Communicator::iallgather(const void*, void*, std::size_t) {
  throw core::Error("this communicator has no all-gather");
}

std::unique_ptr<Request> Communicator::ireduce_scatter_sum(const void*, void*, std::size_t,
                                                           DataType) {
  throw core::Error("this communicator has no reduce-scatter");
}

namespace {

// "0-3,7,9-10" for ascending ranks: short even when thousands of ranks fail alike.
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

void agree(Communicator& comm, const std::string& my_error) {
  const std::vector<std::string> errors =
      comm.size() == 1 ? std::vector<std::string>{my_error} : comm.allgather(my_error);
  // Group identical messages (e.g. the same bad config on every rank) so each is said once.
  std::vector<std::pair<std::string, std::vector<int>>> distinct;
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (errors[r].empty()) continue;
    auto it = distinct.begin();
    while (it != distinct.end() && it->first != errors[r]) ++it;
    if (it == distinct.end()) {
      distinct.push_back({errors[r], {}});
      it = distinct.end() - 1;
    }
    it->second.push_back(static_cast<int>(r));
  }
  if (distinct.empty()) return;
  // The same error on every rank (a bad config, a layout check) is said once, as it is.
  if (distinct.size() == 1 && static_cast<int>(distinct[0].second.size()) == comm.size())
    throw AgreedError(distinct[0].first);
  std::string message;
  for (const auto& [text, ranks] : distinct) {
    if (!message.empty()) message += "\n";
    message +=
        fmt::format("{} {}: {}", ranks.size() == 1 ? "rank" : "ranks", rank_ranges(ranks), text);
  }
  throw AgreedError(message);
}

}  // namespace scaffold::dist
