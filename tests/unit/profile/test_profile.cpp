// The profile module: PROFILE_TORCH* parsing, the wait/warm-up/active schedule, regions on
// several threads, the Chrome trace's JSON fields and file name, the disabled profiler writing
// nothing, and a printed (not asserted) cost of a region when profiling is off and on.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "profile/options.hpp"
#include "profile/profiler.hpp"
#include "profile/trace.hpp"
#include "test_util.hpp"

namespace scaffold::profile {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// A getenv over a fixed table: the real environment is never read.
struct FakeEnv {
  std::map<std::string, std::string> vars;
  GetEnv getenv() const {
    return [this](const char* name) -> const char* {
      const auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

ProfileOptions parse(std::map<std::string, std::string> vars) {
  const FakeEnv env{std::move(vars)};
  return parse_profile_options(env.getenv());
}

std::set<std::string> names_of(const std::vector<TraceEvent>& events) {
  std::set<std::string> names;
  for (const TraceEvent& e : events) names.insert(e.name);
  return names;
}

TEST(ProfileOptions, ProfileTorchOnlyOneTrueYesOnInAnyCase) {
  for (const char* on : {"1", "true", "TRUE", "True", " yes ", "On", "ON", "\tyes\n", "oN"})
    EXPECT_TRUE(parse({{"PROFILE_TORCH", on}}).enabled) << "'" << on << "'";
  for (const char* off :
       {"0", "off", "OFF", "", " ", "2", "false", "no", "y", "enable", "1.0", "yes please", "01"})
    EXPECT_FALSE(parse({{"PROFILE_TORCH", off}}).enabled) << "'" << off << "'";
  EXPECT_FALSE(parse({}).enabled) << "unset";
}

TEST(ProfileOptions, ScheduleDefaultsAndOverrides) {
  const ProfileOptions defaults = parse({{"PROFILE_TORCH", "1"}});
  EXPECT_EQ(defaults.schedule.wait, 1);
  EXPECT_EQ(defaults.schedule.warmup, 1);
  EXPECT_EQ(defaults.schedule.active, 3);
  EXPECT_FALSE(defaults.record_shapes);
  EXPECT_FALSE(defaults.with_stack);

  const ProfileOptions set = parse({{"PROFILE_TORCH", "yes"},
                                    {"PROFILE_TORCH_WAIT", "5"},
                                    {"PROFILE_TORCH_WARMUP", " 0 "},
                                    {"PROFILE_TORCH_ACTIVE", "8"},
                                    {"PROFILE_TORCH_RECORD_SHAPES", "on"},
                                    {"PROFILE_TORCH_WITH_STACK", "True"}});
  EXPECT_EQ(set.schedule.wait, 5);
  EXPECT_EQ(set.schedule.warmup, 0);
  EXPECT_EQ(set.schedule.active, 8);
  EXPECT_TRUE(set.record_shapes);
  EXPECT_TRUE(set.with_stack);

  // A blank schedule variable keeps its default.
  EXPECT_EQ(parse({{"PROFILE_TORCH", "1"}, {"PROFILE_TORCH_WAIT", ""}}).schedule.wait, 1);
}

TEST(ProfileOptions, BadNumbersAreErrorsNamingVariableAndValue) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"PROFILE_TORCH_WAIT", "-1"},    {"PROFILE_TORCH_WAIT", "abc"},
      {"PROFILE_TORCH_WARMUP", "1.5"}, {"PROFILE_TORCH_WARMUP", "3x"},
      {"PROFILE_TORCH_ACTIVE", "0"},   {"PROFILE_TORCH_ACTIVE", "99999999999999999999"},
      {"PROFILE_TORCH_ACTIVE", "+2"}};
  for (const auto& [name, value] : bad) {
    try {
      parse({{"PROFILE_TORCH", "1"}, {name, value}});
      ADD_FAILURE() << name << "='" << value << "' was accepted";
    } catch (const core::Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(name), std::string::npos) << what;
      EXPECT_NE(what.find("'" + value + "'"), std::string::npos) << what;
    }
  }
  // With profiling off the schedule is never read, so a bad value there does not matter.
  EXPECT_NO_THROW(parse({{"PROFILE_TORCH", "off"}, {"PROFILE_TORCH_WAIT", "abc"}}));
}

TEST(ProfileOptions, FirstRankOfEachNodeProfiles) {
  ProfileOptions options;
  EXPECT_FALSE(profiles_this_rank(options, 0));
  options.enabled = true;
  EXPECT_TRUE(profiles_this_rank(options, 0));
  EXPECT_FALSE(profiles_this_rank(options, 1));
  EXPECT_FALSE(profiles_this_rank(options, 3));
}

TEST(ProfileSchedule, PhaseOfEachBatch) {
  const ProfileSchedule schedule{1, 1, 3};
  const std::vector<ProfilePhase> expected = {
      ProfilePhase::Wait,   ProfilePhase::Warmup, ProfilePhase::Active, ProfilePhase::Active,
      ProfilePhase::Active, ProfilePhase::Done,   ProfilePhase::Done};
  for (int64_t batch = 0; batch < static_cast<int64_t>(expected.size()); ++batch)
    EXPECT_EQ(schedule_phase(schedule, batch), expected[batch])
        << "batch " << batch << ": " << phase_name(schedule_phase(schedule, batch));
  // No wait, no warm-up: the first batch already records.
  EXPECT_EQ(schedule_phase({0, 0, 1}, 0), ProfilePhase::Active);
  EXPECT_EQ(schedule_phase({0, 0, 1}, 1), ProfilePhase::Done);
}

TEST(Profiler, RecordsSetupAndTheActiveBatchesOnly) {
  // One distinct literal per batch so the trace says which batches recorded.
  static const char* const kBatch[] = {"batch0", "batch1", "batch2", "batch3",
                                       "batch4", "batch5", "batch6"};
  Profiler profiler(true, {1, 1, 3});
  std::vector<ProfilePhase> seen;
  profiler.add_phase_listener([&](Profiler&, ProfilePhase phase) { seen.push_back(phase); });
  EXPECT_EQ(profiler.phase(), ProfilePhase::Setup);
  EXPECT_TRUE(profiler.recording());
  { ScopedRegion region(&profiler, "init_model"); }

  std::vector<bool> recording;
  for (const char* name : kBatch) {
    profiler.step();  // at the start of each batch
    recording.push_back(profiler.recording());
    ScopedRegion region(&profiler, name);
  }
  EXPECT_EQ(recording, (std::vector<bool>{false, false, true, true, true, false, false}));
  EXPECT_EQ(profiler.steps(), 7);
  EXPECT_EQ(profiler.phase(), ProfilePhase::Done);
  EXPECT_EQ(seen, (std::vector<ProfilePhase>{ProfilePhase::Wait, ProfilePhase::Warmup,
                                             ProfilePhase::Active, ProfilePhase::Done}));
  { ScopedRegion region(&profiler, "checkpoint"); }  // after the window: not recorded
  EXPECT_EQ(names_of(profiler.events()),
            (std::set<std::string>{"init_model", "batch2", "batch3", "batch4"}));
}

TEST(Profiler, ARegionRecordsIfTheProfilerRecordedWhenItOpened) {
  Profiler profiler(true, {1, 0, 1});
  {
    ScopedRegion train(&profiler, "train");  // opens in Setup, closes after Done
    profiler.step();                         // batch 0: wait
    {
      ScopedRegion straddles(&profiler, "opened_in_wait");
      profiler.step();  // batch 1: active
    }
    profiler.step();  // batch 2: done
  }
  EXPECT_EQ(names_of(profiler.events()), (std::set<std::string>{"train"}));
}

TEST(Profiler, FinishStopsRecordingAndIsIdempotent) {
  Profiler profiler(true);
  int done = 0;
  profiler.add_phase_listener([&](Profiler&, ProfilePhase phase) {
    if (phase == ProfilePhase::Done) ++done;
  });
  profiler.finish();
  profiler.finish();
  profiler.step();
  EXPECT_EQ(done, 1);
  EXPECT_FALSE(profiler.recording());
  { ScopedRegion region(&profiler, "late"); }
  EXPECT_TRUE(profiler.events().empty());
}

TEST(Profiler, NestedRegionsOnTwoThreads) {
  Profiler profiler(true);
  auto work = [&profiler] {
    SCAFFOLD_PROFILE_REGION(&profiler, "run_training_batch");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    {
      SCAFFOLD_PROFILE_REGION(&profiler, "predict");
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  std::thread a(work);
  std::thread b(work);
  a.join();
  b.join();

  const std::vector<TraceEvent> events = profiler.events();
  ASSERT_EQ(events.size(), 4u);
  std::map<int64_t, std::map<std::string, TraceEvent>> by_thread;
  for (const TraceEvent& e : events) by_thread[e.tid][e.name] = e;
  ASSERT_EQ(by_thread.size(), 2u) << "two threads, two tids";
  for (const auto& [tid, regions] : by_thread) {
    EXPECT_GT(tid, 0);
    ASSERT_EQ(regions.size(), 2u);
    const TraceEvent& parent = regions.at("run_training_batch");
    const TraceEvent& child = regions.at("predict");
    EXPECT_EQ(parent.category, "scaffold");
    EXPECT_GE(parent.ts_us, 0.0);
    EXPECT_GE(child.ts_us, parent.ts_us + 1000.0) << "2 ms of sleep before the child";
    EXPECT_GE(child.dur_us, 3000.0);
    EXPECT_GE(parent.dur_us, child.dur_us + 3000.0);
    // Child ends inside its parent (1e-6 µs: only float rounding of exact nanoseconds).
    EXPECT_LE(child.ts_us + child.dur_us, parent.ts_us + parent.dur_us + 1e-6);
  }
  // Sorted by begin time, parent first.
  for (std::size_t i = 1; i < events.size(); ++i) EXPECT_LE(events[i - 1].ts_us, events[i].ts_us);
}

TEST(Profiler, ChromeTraceHasTheFieldsAndTheNamedRegions) {
  test::TempDir dir;
  Profiler profiler(true, {1, 1, 3});
  const int64_t worker_tid = 4242;  // a synthetic track, as the LibTorch bridge adds
  profiler.name_thread(worker_tid, "loader");
  {
    // ScaFFold's regions, nested as a run nests them (regions close in reverse order).
    std::vector<std::optional<ScopedRegion>> open(kSpecRegionNames.size());
    for (std::size_t i = 0; i < kSpecRegionNames.size(); ++i)
      open[i].emplace(&profiler, kSpecRegionNames[i]);
    for (std::size_t i = open.size(); i-- > 0;) open[i].reset();
  }
  profiler.add_external_events({TraceEvent{
      "aten::conv3d", "cpu_op", 5.0, 2.5, worker_tid, {{"Input Dims", "[[1, 3, 8, 8, 8]]"}}}});

  TraceFileNameParts parts;
  parts.host = "node01";
  parts.rank = 4;
  parts.nodes = 2;
  parts.world_size = 8;
  parts.problem_scale = 6;
  parts.epochs = 100;
  parts.n_instances_used_per_fractal = 144;
  parts.unix_time_s = 1700000000;
  const std::string name = trace_file_name(parts);
  EXPECT_EQ(name, "torch-node01-r4-N2-n8-ps6-e100-nipf144-1700000000.json");

  TraceInfo info;
  info.process_name = "scaffold rank 4 (node01)";
  info.other_data = {{"host", "node01"}, {"rank", "4"}};
  ASSERT_TRUE(profiler.write_chrome_trace(dir.path() / name, info));
  EXPECT_EQ(profiler.phase(), ProfilePhase::Done) << "writing ends recording";

  const json trace = json::parse(core::read_file(dir.path() / name));
  ASSERT_TRUE(trace.is_object());
  ASSERT_TRUE(trace.at("traceEvents").is_array());
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
  const json& other = trace.at("otherData");
  EXPECT_EQ(other.at("host"), "node01");
  EXPECT_EQ(other.at("rank"), "4");
  EXPECT_EQ(other.at("schedule_wait"), "1");
  EXPECT_EQ(other.at("schedule_warmup"), "1");
  EXPECT_EQ(other.at("schedule_active"), "3");
  EXPECT_TRUE(other.contains("generator"));

  std::set<std::string> regions;
  std::map<int64_t, std::string> thread_names;
  std::optional<int64_t> pid;
  bool process_named = false;
  for (const json& e : trace.at("traceEvents")) {
    ASSERT_TRUE(e.at("pid").is_number_integer()) << e.dump();
    ASSERT_TRUE(e.at("tid").is_number_integer()) << e.dump();
    if (!pid) pid = e.at("pid").get<int64_t>();
    EXPECT_EQ(e.at("pid").get<int64_t>(), *pid) << "one process per trace";
    const std::string ph = e.at("ph");
    if (ph == "M") {
      const std::string meta = e.at("name");
      if (meta == "process_name") {
        process_named = true;
        EXPECT_EQ(e.at("args").at("name"), "scaffold rank 4 (node01)");
      } else {
        ASSERT_EQ(meta, "thread_name");
        thread_names[e.at("tid").get<int64_t>()] = e.at("args").at("name").get<std::string>();
      }
      continue;
    }
    ASSERT_EQ(ph, "X") << e.dump();
    ASSERT_TRUE(e.at("name").is_string());
    ASSERT_TRUE(e.at("ts").is_number()) << e.dump();
    ASSERT_TRUE(e.at("dur").is_number()) << e.dump();
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
    if (e.at("cat") == "scaffold") {
      regions.insert(e.at("name").get<std::string>());
      EXPECT_EQ(e.at("tid").get<int64_t>(), Profiler::current_thread_id());
    } else {
      EXPECT_EQ(e.at("cat"), "cpu_op");
      EXPECT_EQ(e.at("name"), "aten::conv3d");
      EXPECT_EQ(e.at("tid"), worker_tid);
      EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 5.0);
      EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 2.5);
      EXPECT_EQ(e.at("args").at("Input Dims"), "[[1, 3, 8, 8, 8]]");
    }
  }
  EXPECT_TRUE(process_named);
  EXPECT_EQ(thread_names[worker_tid], "loader");
  EXPECT_EQ(thread_names[*pid], "main");
  for (const char* region : kSpecRegionNames) EXPECT_EQ(regions.count(region), 1u) << region;
}

TEST(Profiler, DisabledRecordsNothingAndWritesNothing) {
  test::TempDir dir;
  const ProfileOptions options = parse({{"PROFILE_TORCH", "off"}});
  Profiler profiler(profiles_this_rank(options, 0), options.schedule);
  EXPECT_FALSE(profiler.enabled());
  EXPECT_FALSE(profiler.recording());
  EXPECT_EQ(profiler.phase(), ProfilePhase::Off);
  int phase_changes = 0;
  profiler.add_phase_listener([&](Profiler&, ProfilePhase) { ++phase_changes; });
  for (int batch = 0; batch < 6; ++batch) {
    profiler.step();
    SCAFFOLD_PROFILE_REGION(&profiler, "run_training_batch");
  }
  profiler.add_external_events({TraceEvent{"aten::mm", "cpu_op", 0.0, 1.0, 1, {}}});
  EXPECT_TRUE(profiler.events().empty());
  EXPECT_EQ(phase_changes, 0);
  EXPECT_EQ(profiler.phase(), ProfilePhase::Off);
  EXPECT_FALSE(profiler.write_chrome_trace(dir.path() / "trace.json"));
  EXPECT_FALSE(profiler.export_chrome_trace(dir.path() / "trace.json"));
  EXPECT_TRUE(fs::is_empty(dir.path())) << "no file when profiling is off";

  // A null profiler is allowed too (a rank that does not profile may hold none).
  SCAFFOLD_PROFILE_REGION(nullptr, "init_ddp");
}

TEST(Profiler, ExportLogsAFailedWriteAndCarriesOn) {
  test::TempDir dir;
  Profiler profiler(true);
  { ScopedRegion region(&profiler, "init_ddp"); }
  EXPECT_THROW(profiler.write_chrome_trace(dir.path() / "missing" / "t.json"), core::FileError);
  EXPECT_FALSE(profiler.export_chrome_trace(dir.path() / "missing" / "t.json"));
  EXPECT_TRUE(profiler.export_chrome_trace(dir.path() / "t.json"));
  EXPECT_TRUE(fs::exists(dir.path() / "t.json"));
}

TEST(TraceFileName, HostSlashBecomesUnderscore) {
  TraceFileNameParts parts;
  parts.host = "a/b";
  EXPECT_EQ(trace_file_name(parts), "torch-a_b-r0-N1-n1-ps0-e0-nipf0-0.json");
}

// Not a timed test: prints what a region costs so a reader can check "near zero when off".
TEST(ProfilerCost, PrintNanosecondsPerRegion) {
  using clock = std::chrono::steady_clock;
  constexpr int kOffRegions = 2'000'000;
  constexpr int kOnRegions = 200'000;
  auto per_region_ns = [](Profiler* volatile profiler_source, int n) {
    Profiler* const profiler = profiler_source;  // opaque to the optimiser
    const auto t0 = clock::now();
    for (int i = 0; i < n; ++i) {
      SCAFFOLD_PROFILE_REGION(profiler, "run_training_batch");
    }
    return std::chrono::duration<double, std::nano>(clock::now() - t0).count() / n;
  };
  Profiler off(false);
  Profiler waiting(true, {1000, 0, 1});
  waiting.step();  // enabled, but in its wait window
  Profiler on(true);
  const double null_ns = per_region_ns(nullptr, kOffRegions);
  const double off_ns = per_region_ns(&off, kOffRegions);
  const double wait_ns = per_region_ns(&waiting, kOffRegions);
  const double on_ns = per_region_ns(&on, kOnRegions);
  std::printf(
      "region cost: null profiler %.2f ns, disabled %.2f ns, enabled but waiting %.2f ns, "
      "recording %.1f ns\n",
      null_ns, off_ns, wait_ns, on_ns);
  EXPECT_EQ(on.events().size(), static_cast<std::size_t>(kOnRegions));
  EXPECT_TRUE(off.events().empty());
  EXPECT_TRUE(waiting.events().empty());
}

}  // namespace
}  // namespace scaffold::profile
