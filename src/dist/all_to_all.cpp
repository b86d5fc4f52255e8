#include "dist/all_to_all.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <memory>
#include <mutex>
#include <numeric>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "dist/comm_counters.hpp"

namespace scaffold::dist {
namespace {

void check_buffer(const at::Tensor& t, const std::vector<int64_t>& counts, int ranks,
                  const char* what) {
  SCAFFOLD_CHECK(t.defined() && t.dim() == 1 && t.is_contiguous(),
                 fmt::format("all_to_all: the {} buffer must be a contiguous 1-D tensor", what));
  SCAFFOLD_CHECK(
      static_cast<int>(counts.size()) == ranks,
      fmt::format("all_to_all: {} {} counts for a group of {} ranks", counts.size(), what, ranks));
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  SCAFFOLD_CHECK(total == t.numel(),
                 fmt::format("all_to_all: {} counts sum to {} but the buffer holds {} elements",
                             what, total, t.numel()));
}

}  // namespace

AllToAllStats all_to_all_stats() {
  const CommCounter c = comm_counter(kCommAllToAll);
  return {c.calls, c.bytes, c.seconds};
}

void all_to_all(TensorComm& group, const at::Tensor& send, const std::vector<int64_t>& send_counts,
                const at::Tensor& recv, const std::vector<int64_t>& recv_counts, int tag) {
  const int ranks = group.size(), me = group.rank();
  check_buffer(send, send_counts, ranks, "send");
  check_buffer(recv, recv_counts, ranks, "receive");
  SCAFFOLD_CHECK(send.scalar_type() == recv.scalar_type() && send.device() == recv.device(),
                 "all_to_all: send and receive buffers differ in dtype or device");
  SCAFFOLD_CHECK(
      send_counts[static_cast<std::size_t>(me)] == recv_counts[static_cast<std::size_t>(me)],
      fmt::format("all_to_all: rank {} sends itself {} elements but expects {}", me,
                  send_counts[static_cast<std::size_t>(me)],
                  recv_counts[static_cast<std::size_t>(me)]));
  core::Stopwatch clock;
  std::vector<std::unique_ptr<Work>> works;
  int64_t bytes = 0;
  int64_t send_at = 0, recv_at = 0;
  at::Tensor own_send, own_recv;
  group.begin_batch();
  for (int q = 0; q < ranks; ++q) {
    const int64_t ns = send_counts[static_cast<std::size_t>(q)],
                  nr = recv_counts[static_cast<std::size_t>(q)];
    if (q == me) {
      own_send = send.narrow(0, send_at, ns);
      own_recv = recv.narrow(0, recv_at, nr);
    } else {
      // Empty slices (a rank holding no modes of a split axis) are not sent: both sides know
      // the count from the pairwise-matching lists, so both skip the message.
      if (nr > 0) works.push_back(group.recv(recv.narrow(0, recv_at, nr), q, tag));
      if (ns > 0) {
        works.push_back(group.send(send.narrow(0, send_at, ns), q, tag));
        bytes += ns * static_cast<int64_t>(send.element_size());
      }
    }
    send_at += ns;
    recv_at += nr;
  }
  group.end_batch();
  if (own_send.numel() > 0) own_recv.copy_(own_send);
  for (auto& w : works) w->wait();
  count_comm(kCommAllToAll, 1, bytes, clock.elapsed_s());
}

}  // namespace scaffold::dist
