// The FNO's input sharding against the unsharded computation, run under mpiexec -n 2 and 4:
// the distributed transforms of each rank's slab equal torch's FFT of the gathered grid (its
// rank's part of the kept modes, and its slab of the inverse), and a sharded FNO computes what
// the unsharded one does: outputs, the relative L2 loss, the input gradient and every parameter
// gradient (summed over the shard group), 1e-5 relative. Grids split unevenly, with a rank that
// holds no kept mode of the split last axis; 1-D, 2-D and 3-D; shard groups of 2 and 4 (with 2
// data-parallel replicas of 2 on 4 ranks).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <memory>
#include <string>
#include <vector>

#include "data/batch_loader.hpp"
#include "dist/tensor_comm.hpp"
#include "mpi_test_main.hpp"
#include "workloads/fno/dist_fft.hpp"
#include "workloads/fno/fno.hpp"
#include "workloads/fno/spectral.hpp"
#include "workloads/fno/task.hpp"

namespace scaffold::fno {
namespace {

using test::world;

constexpr double kTol = 1e-5;

// max |a - b| / max |b|, as a gtest assertion naming `what`.
::testing::AssertionResult close(const at::Tensor& a, const at::Tensor& b,
                                 const std::string& what) {
  if (a.sizes() != b.sizes())
    return ::testing::AssertionFailure() << what << ": shape " << a.sizes() << " vs " << b.sizes();
  if (b.numel() == 0)
    return ::testing::AssertionSuccess();  // a rank holding no mode of the split axis
  const double scale = std::max(b.abs().max().item<double>(), 1e-30);
  const double diff = (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
  if (diff <= kTol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": max-abs error " << diff << " > " << kTol << " x " << scale;
}

// Shard groups of `tp` consecutive ranks (the data-parallel replicas are the groups).
struct ShardSetup {
  explicit ShardSetup(int tp, int64_t extent)
      : comm(world().split(world().rank() / tp, world().rank() % tp)),
        shard(std::make_shared<FftShard>()) {
    shard->group = dist::make_mpi_tensor_comm(*comm);
    shard->extent = extent;
  }
  std::unique_ptr<dist::Communicator> comm;
  std::shared_ptr<FftShard> shard;
};

std::vector<int> shard_sizes() {
  std::vector<int> t;
  for (int tp : {2, 4})
    if (world().size() % tp == 0) t.push_back(tp);
  return t;
}

struct Case {
  std::vector<int64_t> grid, modes;
};

std::string name_of(const Case& c, int tp) {
  std::string s = "tp " + std::to_string(tp) + ", grid";
  for (int64_t n : c.grid) s += " " + std::to_string(n);
  s += ", modes";
  for (int64_t m : c.modes) s += " " + std::to_string(m);
  return s;
}

// Uneven splits of axis 0 (10 over 4 ranks: 3, 3, 2, 2) and of the last kept-mode axis (3 over 4:
// 1, 1, 1, 0).
const std::vector<Case>& cases() {
  static const std::vector<Case> c{
      {{18}, {5}},              // 1-D
      {{10, 8}, {3, 3}},        // 2-D
      {{12, 6}, {6, 4}},        // 2-D: axis 0's corners cover it, Nyquist column on the last axis
      {{10, 4, 6}, {2, 2, 3}},  // 3-D
  };
  return c;
}

TEST(DistributedFft, EqualsTorchFftOfTheGatheredGrid) {
  for (int tp : shard_sizes()) {
    for (const Case& c : cases()) {
      SCOPED_TRACE(name_of(c, tp));
      ShardSetup s(tp, c.grid[0]);
      torch::manual_seed(7);  // the same full grid on every rank
      std::vector<int64_t> shape{2, 3};
      shape.insert(shape.end(), c.grid.begin(), c.grid.end());
      const at::Tensor full = at::randn(shape, at::kFloat);
      const IndexRange local = s.shard->local();
      const at::Tensor slab = full.narrow(2, local.start, local.length).contiguous();

      // Forward: this rank's part of the kept modes of the whole grid.
      const at::Tensor modes_full = rfft_modes(full, c.modes);  // (B, C, *K)
      const IndexRange mr = mode_range(c.modes, *s.shard);
      const at::Tensor expected =
          c.grid.size() == 1 ? modes_full
                             : modes_full.narrow(modes_full.dim() - 1, mr.start, mr.length);
      const at::Tensor got = dist_rfft_modes(slab, c.modes, *s.shard);
      EXPECT_TRUE(
          close(at::view_as_real(got), at::view_as_real(expected.contiguous()), "forward modes"));

      // Inverse: random kept modes; this rank's slab of the whole inverse.
      std::vector<int64_t> kshape{2, 2};
      for (int64_t k : kept_mode_shape(c.modes)) kshape.push_back(k);
      const at::Tensor z = at::randn(kshape, at::kComplexFloat);
      const at::Tensor z_local =
          c.grid.size() == 1 ? z : z.narrow(z.dim() - 1, mr.start, mr.length);
      const at::Tensor inv = dist_irfft_modes(z_local, c.modes, c.grid, *s.shard);
      EXPECT_TRUE(
          close(inv, irfft_modes(z, c.grid).narrow(2, local.start, local.length), "inverse slab"));
    }
  }
}

FnoOptions small_fno(const Case& c, bool real_mixing = true) {
  FnoOptions o;
  o.real_mode_mixing = real_mixing;  // false: the complex reference, on this rank's modes too
  o.in_channels = 2;
  o.out_channels = 3;
  o.modes = c.modes;
  o.width = 6;
  o.layers = 2;
  o.projection_channels = 8;
  o.grid_coordinates = true;  // the shards' coordinates must be their global ones
  return o;
}

TEST(ShardedFno, EqualsTheUnshardedFnoInOutputAndEveryGradient) {
  for (int tp : shard_sizes()) {
    for (const bool real_mixing : {true, false})
      for (const Case& c : cases()) {
        SCOPED_TRACE(name_of(c, tp) + (real_mixing ? ", real mixing" : ", complex mixing"));
        ShardSetup s(tp, c.grid[0]);
        torch::manual_seed(21);  // the same weights and data on every rank
        Fno reference(small_fno(c, real_mixing));
        Fno sharded(small_fno(c, real_mixing));
        {
          torch::NoGradGuard no_grad;
          const auto src = reference->parameters();
          const auto dst = sharded->parameters();
          for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
        }
        sharded->set_shard(s.shard);
        std::vector<int64_t> in_shape{2, 2}, out_shape{2, 3};
        in_shape.insert(in_shape.end(), c.grid.begin(), c.grid.end());
        out_shape.insert(out_shape.end(), c.grid.begin(), c.grid.end());
        const at::Tensor x_full = at::randn(in_shape);
        const at::Tensor y_full = at::randn(out_shape);
        const IndexRange local = s.shard->local();

        // Unsharded: output, loss, gradients.
        const at::Tensor xr = x_full.clone().requires_grad_(true);
        const at::Tensor out_r = reference->forward(xr);
        const at::Tensor loss_r = relative_l2(out_r, y_full, FftShard{}).mean();
        loss_r.backward();

        // Sharded: this rank's slab.
        const at::Tensor xs =
            x_full.narrow(2, local.start, local.length).contiguous().requires_grad_(true);
        const at::Tensor out_s = sharded->forward(xs);
        const at::Tensor loss_s =
            relative_l2(out_s, y_full.narrow(2, local.start, local.length).contiguous(), *s.shard)
                .mean();
        loss_s.backward();

        EXPECT_TRUE(
            close(out_s, out_r.detach().narrow(2, local.start, local.length), "output slab"));
        EXPECT_NEAR(loss_s.item<double>(), loss_r.item<double>(), kTol * loss_r.item<double>())
            << "loss";
        {  // The per-field loss sums its norms over the shard group the same way.
          torch::NoGradGuard no_grad;
          const double field_r = field_relative_l2(out_r, y_full, FftShard{}).mean().item<double>();
          const double field_s =
              field_relative_l2(out_s, y_full.narrow(2, local.start, local.length).contiguous(),
                                *s.shard)
                  .mean()
                  .item<double>();
          EXPECT_NEAR(field_s, field_r, kTol * field_r) << "per-field loss";
        }
        EXPECT_TRUE(close(xs.grad(), xr.grad().narrow(2, local.start, local.length),
                          "input gradient slab"));
        const auto pr = reference->named_parameters();
        const auto ps = sharded->named_parameters();
        for (std::size_t i = 0; i < pr.size(); ++i) {
          at::Tensor g = ps[i].value().grad().clone();
          s.shard->group->allreduce_sum(g)->wait();  // each shard holds its part of the gradient
          EXPECT_TRUE(close(g, pr[i].value().grad(), "gradient of " + pr[i].key()));
        }
      }
  }
}

// The recurrent rollout (FnoTask, time_stepping recurrent) sharded equals it unsharded: the task
// takes this rank's slab of the full input, feeds its slab of each prediction back, and sums the
// per-step errors over the shard group, so the trajectory, the loss and every gradient match.
struct NoExamples : data::ExampleSource {
  std::size_t size() const override { return 0; }
  data::Example get(std::size_t, uint64_t) const override { return {}; }
};

TEST(ShardedFno, RecurrentRolloutEqualsTheUnshardedOne) {
  const Case c{{10, 8}, {3, 3}};
  constexpr int64_t kTin = 2, kSteps = 3, kC = 1;
  for (int tp : shard_sizes()) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    ShardSetup s(tp, c.grid[0]);
    torch::manual_seed(23);
    FnoOptions o = small_fno(c);
    o.in_channels = kTin * kC;
    o.out_channels = kC;
    Fno reference(o);
    Fno sharded(o);
    {
      torch::NoGradGuard no_grad;
      const auto src = reference->parameters();
      const auto dst = sharded->parameters();
      for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
    }
    FnoTaskOptions ro;
    ro.rollout_steps = kSteps;
    ro.step_channels = kC;
    FnoTaskOptions so = ro;
    so.shard = s.shard;
    NoExamples none;
    FnoTask ref_task(reference, none, none, at::kCPU, ro);
    FnoTask shard_task(sharded, none, none, at::kCPU, so);
    data::Batch batch;
    batch.fields = {at::randn({2, kTin * kC, 10, 8}), at::randn({2, kSteps * kC, 10, 8})};
    const IndexRange local = s.shard->local();

    const train::TrainForward fr = ref_task.train_forward(batch);
    fr.loss.backward();
    const train::TrainForward fs = shard_task.train_forward(batch);
    fs.loss.backward();
    EXPECT_NEAR(fs.loss.item<double>(), fr.loss.item<double>(), kTol * fr.loss.item<double>())
        << "loss";
    EXPECT_NEAR(fs.sums.item<double>(), fr.sums.item<double>(), kTol * fr.sums.item<double>())
        << "trajectory error";
    {
      torch::NoGradGuard no_grad;
      EXPECT_TRUE(close(shard_task.predict(batch.fields[0]),
                        ref_task.predict(batch.fields[0]).narrow(2, local.start, local.length),
                        "trajectory slab"));
    }
    const auto pr = reference->named_parameters();
    const auto ps = sharded->named_parameters();
    for (std::size_t i = 0; i < pr.size(); ++i) {
      at::Tensor g = ps[i].value().grad().clone();
      s.shard->group->allreduce_sum(g)->wait();
      EXPECT_TRUE(close(g, pr[i].value().grad(), "gradient of " + pr[i].key()));
    }
  }
}

}  // namespace
}  // namespace scaffold::fno
