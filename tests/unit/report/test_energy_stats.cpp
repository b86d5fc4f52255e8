// energy_stats.csv and energy_phases.csv (report/energy_stats.hpp): the writer against
// hand-written lines, the reader against hand-written files, the round trip, and the reader's
// errors naming file, line and column.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "report/energy_stats.hpp"
#include "test_util.hpp"

namespace scaffold::report {
namespace {
namespace fs = std::filesystem;

const char* kEnergyHeader =
    "window,epoch,start_s,duration_s,energy_j,energy_wh,avg_power_w,peak_power_w,samples";
const char* kPhasesHeader =
    "phase,start_s,duration_s,energy_j,energy_wh,avg_power_w,peak_power_w,samples";

EnergyWindowRecord row(const char* window, int64_t epoch, double start, double duration,
                       double joules, double peak, int64_t samples) {
  EnergyWindowRecord r;
  r.window = window;
  r.epoch = epoch;
  r.start_s = start;
  r.duration_s = duration;
  r.energy_j = joules;
  r.energy_wh = joules / 3600.0;
  r.avg_power_w = joules / duration;
  r.peak_power_w = peak;
  r.samples = samples;
  return r;
}

TEST(EnergyStats, ReadsEveryColumn) {
  EXPECT_EQ(energy_stats_header(), kEnergyHeader);
  test::TempDir tmp;
  const fs::path file = tmp.path() / "energy_stats.csv";
  core::write_file_atomic(file, std::string(kEnergyHeader) +
                                    "\nwarmup,0,0.5,2.0,360.0,0.1,180.0,210.5,20\n"
                                    "train,1,2.6,3.0,720.0,0.2,240.0,260.0,30\n");
  const auto w = read_energy_stats(file);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].window, "warmup");
  EXPECT_EQ(w[1].window, "train");
  EXPECT_EQ(w[1].epoch, 1);
  EXPECT_DOUBLE_EQ(w[1].start_s, 2.6);
  EXPECT_DOUBLE_EQ(w[1].duration_s, 3.0);
  EXPECT_DOUBLE_EQ(w[1].energy_j, 720.0);
  EXPECT_DOUBLE_EQ(w[1].energy_wh, 0.2);
  EXPECT_DOUBLE_EQ(w[1].avg_power_w, 240.0);
  EXPECT_DOUBLE_EQ(w[1].peak_power_w, 260.0);
  EXPECT_EQ(w[1].samples, 30);
}

TEST(EnergyStats, WritesTheDocumentedLinesAndReadsThemBack) {
  test::TempDir tmp;
  const std::vector<EnergyWindowRecord> rows{row("warmup", 0, 0.5, 2.0, 360.0, 210.5, 20),
                                             row("train", 1, 2.5, 4.0, 720.0, 260.0, 30),
                                             row("validation", 1, 6.5, 0.5, 90.0, 200.0, 5)};
  write_energy_stats(tmp.path(), rows);
  // Numbers as Python's str() writes floats.
  EXPECT_EQ(core::read_file(tmp.path() / "energy_stats.csv"),
            std::string(kEnergyHeader) +
                "\nwarmup,0,0.5,2.0,360.0,0.1,180.0,210.5,20\n"
                "train,1,2.5,4.0,720.0,0.2,180.0,260.0,30\n"
                "validation,1,6.5,0.5,90.0,0.025,180.0,200.0,5\n");
  const auto back = read_energy_stats(tmp.path() / kEnergyStatsFileName);
  ASSERT_EQ(back.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(back[i].window, rows[i].window);
    EXPECT_EQ(back[i].epoch, rows[i].epoch);
    EXPECT_EQ(back[i].start_s, rows[i].start_s);  // Python's repr round-trips exactly
    EXPECT_EQ(back[i].energy_wh, rows[i].energy_wh);
    EXPECT_EQ(back[i].samples, rows[i].samples);
  }
}

TEST(EnergyPhases, WritesItsOwnColumnsAndReadsThemBack) {
  EXPECT_EQ(energy_phases_header(), kPhasesHeader);
  test::TempDir tmp;
  write_energy_phases(tmp.path(), {row("init_model", 0, 0.25, 2.0, 100.0, 60.0, 4),
                                   row("training", 0, 2.25, 10.0, 1800.0, 200.0, 40)});
  EXPECT_EQ(core::read_file(tmp.path() / "energy_phases.csv"),
            std::string(kPhasesHeader) +
                "\ninit_model,0.25,2.0,100.0,0.027777777777777776,50.0,60.0,4\n"
                "training,2.25,10.0,1800.0,0.5,180.0,200.0,40\n");
  const auto back = read_energy_phases(tmp.path() / kEnergyPhasesFileName);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].window, "init_model");
  EXPECT_EQ(back[1].window, "training");
  EXPECT_EQ(back[1].energy_j, 1800.0);
  EXPECT_EQ(back[1].samples, 40);
}

std::string energy_error(const std::string& text) {
  test::TempDir tmp;
  const fs::path file = tmp.path() / "energy_stats.csv";
  core::write_file_atomic(file, text);
  try {
    read_energy_stats(file);
  } catch (const core::FileError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(file.string() + ": line ", 0), 0u) << what;
    return what.substr(file.string().size() + 2);
  }
  ADD_FAILURE() << "no error for " << text;
  return "";
}

TEST(EnergyStats, BadHeaderRowOrWindowNamesFileLineAndColumn) {
  EXPECT_EQ(energy_error("window,epoch\n"),
            std::string("line 1: the header is 'window,epoch', expected '") + kEnergyHeader + "'");
  EXPECT_EQ(energy_error(std::string(kEnergyHeader) + "\ntrain,1,0,1,2,3,4,5\n"),
            "line 2: expected 9 columns, found 8 ('train,1,0,1,2,3,4,5')");
  EXPECT_EQ(energy_error(std::string(kEnergyHeader) + "\ntrain,1,0,1,2,x,4,5,6\n"),
            "line 2: column energy_wh is 'x', expected a finite number >= 0 "
            "('train,1,0,1,2,x,4,5,6')");
  EXPECT_EQ(energy_error(std::string(kEnergyHeader) + "\ntrain,1,0,-1,2,3,4,5,6\n"),
            "line 2: column duration_s is '-1', expected a finite number >= 0 "
            "('train,1,0,-1,2,3,4,5,6')");
  EXPECT_EQ(energy_error(std::string(kEnergyHeader) + "\neval,1,0,1,2,3,4,5,6\n"),
            "line 2: window 'eval' is not warmup, train or validation ('eval,1,0,1,2,3,4,5,6')");
}

}  // namespace
}  // namespace scaffold::report
