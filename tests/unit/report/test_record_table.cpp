// The generic table over run records (report/record_table): each format's exact text for a small
// hand-declared table (a text column, a number column, a missing value), the row order (the
// table's, then the run name), json as the records themselves, and the format errors.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "report/record_table.hpp"
#include "report/run_record.hpp"

namespace scaffold::report {
namespace {

RunRecord record(const std::string& run, int devices, std::optional<double> energy_wh) {
  RunRecord r;
  r.workload = "toy";
  r.status = kStatusCompleted;
  r.run = run;
  r.created_at = "2025-03-12T10:15:00Z";
  r.system = "sys";
  r.host = "h";
  r.scaffold_version = "0.2.0";
  r.git_commit = "abc";
  r.devices = devices;
  r.device = "cpu";
  r.precision = "fp32";
  r.energy_wh = energy_wh;
  r.counters = {{"items_per_s", 1000.0 / devices, "items/s", ""}};
  return r;
}

WorkloadTable toy_table() {
  return {"toy",
          {{"Run", [](const RunRecord& r) { return r.run; }, Align::kLeft},
           {"Devices", [](const RunRecord& r) { return std::to_string(r.devices); }},
           {"Items/s",
            [](const RunRecord& r) { return fixed_text(counter_value(r, "items_per_s"), 2); }},
           {"Energy(Wh)", [](const RunRecord& r) { return fixed_text(r.energy_wh, 3); }}},
          [](const RunRecord& a, const RunRecord& b) { return a.devices < b.devices; },
          {}};
}

// Given out of order; "b" and "a" tie on devices, so the name decides.
std::vector<RunRecord> toy_records() {
  return {record("c_four", 4, std::nullopt), record("b", 1, 2.5), record("a", 1, 0.1239)};
}

TEST(RecordTable, PrettyIsHeadedByTheWorkloadAndShowsMissingValuesAsDashes) {
  EXPECT_EQ(format_workload_table(toy_table(), toy_records(), "pretty"),
            "== toy ==\n"
            "Run     Devices  Items/s  Energy(Wh)\n"
            "------  -------  -------  ----------\n"
            "a             1  1000.00       0.124\n"
            "b             1  1000.00       2.500\n"
            "c_four        4   250.00           -\n");
}

TEST(RecordTable, MarkdownIsAPipeTableUnderAHeading) {
  EXPECT_EQ(format_workload_table(toy_table(), toy_records(), "markdown"),
            "### toy\n"
            "\n"
            "| Run    | Devices | Items/s | Energy(Wh) |\n"
            "|:-------|--------:|--------:|-----------:|\n"
            "| a      |       1 | 1000.00 |      0.124 |\n"
            "| b      |       1 | 1000.00 |      2.500 |\n"
            "| c_four |       4 |  250.00 |          - |\n");
}

TEST(RecordTable, CsvHasTheTitlesAsHeaderAndEmptyFieldsForMissingValues) {
  EXPECT_EQ(format_workload_table(toy_table(), toy_records(), "csv"),
            "Run,Devices,Items/s,Energy(Wh)\n"
            "a,1,1000.00,0.124\n"
            "b,1,1000.00,2.500\n"
            "c_four,4,250.00,\n");
}

TEST(RecordTable, CsvQuotesAndMarkdownEscapes) {
  std::vector<RunRecord> records{record(R"(x,"y"|z)", 1, 1.0)};
  EXPECT_EQ(format_workload_table(toy_table(), records, "csv"),
            "Run,Devices,Items/s,Energy(Wh)\n"
            R"("x,""y""|z",1,1000.00,1.000)"
            "\n");
  EXPECT_NE(format_workload_table(toy_table(), records, "markdown").find(R"(| x,"y"\|z |)"),
            std::string::npos);
}

TEST(RecordTable, JsonIsTheSortedRecords) {
  std::vector<RunRecord> sorted = toy_records();
  sort_records(toy_table(), sorted);
  ASSERT_EQ(sorted[0].run, "a");
  EXPECT_EQ(format_workload_table(toy_table(), toy_records(), "json"), run_records_json(sorted));
  EXPECT_EQ(format_workload_table(toy_table(), {}, "json"), "[]\n");
}

TEST(RecordTable, WithoutAnOrderRowsGoByRunName) {
  WorkloadTable t = toy_table();
  t.less = nullptr;
  std::vector<RunRecord> records = toy_records();
  sort_records(t, records);
  EXPECT_EQ(records[0].run, "a");
  EXPECT_EQ(records[1].run, "b");
  EXPECT_EQ(records[2].run, "c_four");
}

TEST(RecordTable, NoRecordsGivesTheHeaderOnly) {
  EXPECT_EQ(format_workload_table(toy_table(), {}, "csv"), "Run,Devices,Items/s,Energy(Wh)\n");
  EXPECT_EQ(format_workload_table(toy_table(), {}, "pretty"),
            "== toy ==\n"
            "Run  Devices  Items/s  Energy(Wh)\n"
            "---  -------  -------  ----------\n");
}

TEST(RecordTable, HeadingsAndFixedText) {
  EXPECT_EQ(workload_heading("toy", "pretty"), "== toy ==\n");
  EXPECT_EQ(workload_heading("toy", "markdown"), "### toy\n\n");
  EXPECT_EQ(workload_heading("toy", "csv"), "");
  EXPECT_EQ(workload_heading("toy", "json"), "");
  EXPECT_EQ(fixed_text(1234.5678, 2), "1234.57");
  EXPECT_EQ(fixed_text(0.0, 1), "0.0");
  EXPECT_EQ(fixed_text(std::nullopt, 2), "");
  EXPECT_EQ(fixed_text(1.0 / 0.0, 2), "");
}

TEST(RecordTable, UnknownFormatListsTheWriters) {
  try {
    format_workload_table(toy_table(), toy_records(), "xml");
    FAIL() << "no error";
  } catch (const core::Error& e) {
    EXPECT_STREQ(e.what(), "unknown table format 'xml'; available: pretty, csv, markdown, json");
  }
}

}  // namespace
}  // namespace scaffold::report
