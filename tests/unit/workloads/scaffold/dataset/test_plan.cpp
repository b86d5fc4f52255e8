// The dataset plan: volume contents, the split and the colours (docs/dataset.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.hpp"
#include "workloads/scaffold/dataset/plan.hpp"

namespace scaffold::dataset {
namespace {

TEST(Plan, DefaultSizesAndEveryInstanceUsedOnce) {
  PlanOptions o;  // 5 categories, 145 -> 144 instances each, 3 per volume, 30% validation
  const DatasetPlan plan = make_plan(o);
  ASSERT_EQ(plan.n_volumes(), 240);
  EXPECT_EQ(plan.volumes(true).size(), 72u);
  EXPECT_EQ(plan.volumes(false).size(), 168u);
  std::map<int, std::set<int>> used;
  for (const auto& volume : plan.contents) {
    ASSERT_EQ(volume.size(), 3u);
    for (const Fractal& f : volume) {
      ASSERT_GE(f.instance, 0);
      ASSERT_LT(f.instance, 145);
      EXPECT_TRUE(used[f.category].insert(f.instance).second) << "instance drawn twice";
    }
  }
  ASSERT_EQ(used.size(), 5u);
  for (const auto& [c, instances] : used) EXPECT_EQ(instances.size(), 144u) << "category " << c;
}

TEST(Plan, MoreInstancesThanTheLibraryReuseThemInChunks) {
  PlanOptions o;
  o.n_categories = 1;
  o.n_instances_used_per_fractal = 300;  // 145 + 145 + 10
  const DatasetPlan plan = make_plan(o);
  std::map<int, int> count;
  for (const auto& volume : plan.contents)
    for (const Fractal& f : volume) count[f.instance]++;
  int total = 0;
  for (const auto& [i, n] : count) {
    EXPECT_GE(n, 2) << "every instance is used in each full chunk";
    EXPECT_LE(n, 3);
    total += n;
  }
  EXPECT_EQ(total, 300);
}

TEST(Plan, DeterministicFromTheSeedAndDifferentAcrossSeeds) {
  PlanOptions o;
  const DatasetPlan a = make_plan(o), b = make_plan(o);
  EXPECT_EQ(contents_csv(a), contents_csv(b));
  EXPECT_EQ(split_csv(a), split_csv(b));
  EXPECT_EQ(colors_csv(a), colors_csv(b));
  o.seed = 43;
  const DatasetPlan c = make_plan(o);
  EXPECT_NE(contents_csv(a), contents_csv(c));
  EXPECT_NE(split_csv(a), split_csv(c));
  EXPECT_NE(colors_csv(a), colors_csv(c));
}

TEST(Plan, ColoursInUnitCubeAndMaskValuesFollowContents) {
  PlanOptions o;
  o.n_categories = 4;
  o.n_instances_used_per_fractal = 6;  // 8 volumes: 2 validation
  const DatasetPlan plan = make_plan(o);
  ASSERT_EQ(plan.colors.size(), 4u);
  for (const auto& rgb : plan.colors)
    for (float v : rgb) {
      EXPECT_GE(v, 0.0f);
      EXPECT_LT(v, 1.0f);
    }
  for (bool val : {false, true}) {
    std::set<int> expected{0};
    for (int v : plan.volumes(val))
      for (const Fractal& f : plan.contents[v]) expected.insert(f.category + 1);
    EXPECT_EQ(plan.mask_values(val), std::vector<int>(expected.begin(), expected.end()));
  }
  const std::string csv = contents_csv(plan);
  EXPECT_EQ(csv.substr(0, 2), "0,");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 8);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), ','), 8 * 6);
}

TEST(Plan, RejectsSplitsThatLeaveASideEmpty) {
  PlanOptions o;
  o.n_categories = 1;
  o.n_instances_used_per_fractal = 3;  // one volume
  EXPECT_THROW(make_plan(o), core::Error);
  o.n_instances_used_per_fractal = 12;  // 4 volumes, 30% -> 1 validation
  EXPECT_EQ(planned_validation_volumes(o), 1);
  EXPECT_NO_THROW(make_plan(o));
}

}  // namespace
}  // namespace scaffold::dataset
