// Instances: the batched writer equals the reference, files load as float32 (N, 3), and the
// runaway retry uses attenuated weights in docs/fractals.md's order.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.hpp"
#include "core/npy.hpp"
#include "fractal_util.hpp"
#include "test_util.hpp"
#include "workloads/scaffold/fractal/instances.hpp"

namespace scaffold::fractal {
namespace {

TEST(Instances, WriterMatchesReferenceAndFilesAreFloat32Nx3) {
  scaffold::test::TempDir dir;
  const LibraryLayout layout = library_layout(dir.path(), 0.15, 42, 300);
  const std::vector<IfsParams> cats{test::diagonal_category(0.6, -0.5),
                                    test::diagonal_category(0.4, 0.7)};
  std::vector<InstanceTask> tasks;
  for (int c = 0; c < 2; ++c)
    for (int i : {0, 6, 12, 77, 108, 144}) tasks.push_back({c, i});
  int done = 0;
  const InstanceStats stats = write_instances(layout, cats, tasks, 42, 2, [&] { ++done; });
  EXPECT_EQ(stats.written, tasks.size());
  EXPECT_EQ(done, static_cast<int>(tasks.size()));
  for (const auto& t : tasks) {
    std::vector<int64_t> shape;
    const auto pts = core::read_npy<float>(layout.instance_file(t.category, t.instance), &shape);
    ASSERT_EQ(shape, (std::vector<int64_t>{300, 3}));
    const InstanceCloud ref =
        generate_instance(cats[t.category], instance_weight_table()[t.instance], 42, t, 300);
    EXPECT_EQ(pts, ref.points) << "instance (" << t.category << ", " << t.instance << ")";
    EXPECT_EQ(pts[0], 0.0f);
  }
  EXPECT_EQ(layout.instance_file(1, 7).filename(), "000001_0007.npy");
  EXPECT_EQ(layout.instance_file(1, 7).parent_path().filename(), "000001");
  EXPECT_EQ(layout.instances_dir().filename(), "np300");
  EXPECT_EQ(layout.root, dir.path() / "var0.15" / "seed42");
}

TEST(Instances, RunawayRetriesWithAttenuatedWeights) {
  // x' = 0.9 x + ...: row 12 scales parameter 0 (a) by 1.6 -> 1.44, expanding. Factors give
  // a = 0.9 * (1 + 0.6 f): f = 0.5 -> 1.17, 0.25 -> 1.035, 0.1 -> 0.954 (the first contraction).
  const IfsParams cat = test::diagonal_category(0.9, 0.9);
  const auto& w = instance_weight_table()[12];
  ASSERT_DOUBLE_EQ(w[0], 1.6);
  const InstanceCloud cloud = generate_instance(cat, w, 1, {0, 12}, 2000);
  EXPECT_DOUBLE_EQ(cloud.weight_factor, 0.1);
  // The batched writer takes the same path.
  scaffold::test::TempDir dir;
  const LibraryLayout layout = library_layout(dir.path(), 0.15, 1, 2000);
  const InstanceStats stats = write_instances(layout, {cat}, {{0, 12}, {0, 6}}, 1, 1, nullptr);
  EXPECT_EQ(stats.retried, 1u);
  EXPECT_EQ(core::read_npy<float>(layout.instance_file(0, 12), nullptr), cloud.points);
}

TEST(Instances, FailingEvenWithUnitWeightsIsAnError) {
  const IfsParams cat = test::diagonal_category(1.5, 1.5);
  EXPECT_THROW(generate_instance(cat, instance_weight_table()[6], 1, {0, 6}, 2000), core::Error);
}

}  // namespace
}  // namespace scaffold::fractal
