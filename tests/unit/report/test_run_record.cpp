// summary.json (report/run_record): the exact text of a small record, the round trip of every
// field, the atomic write, and the reader's errors: every malformed case names the file, the key
// and what was expected; a file of another schema version is rejected before anything else.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/sysinfo.hpp"
#include "core/version.hpp"
#include "report/run_record.hpp"
#include "test_util.hpp"

namespace scaffold::report {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// Every field away from its default.
RunRecord full_record() {
  RunRecord r;
  r.workload = "image_classification";
  r.status = kStatusCompleted;
  r.run = "imgcls_20250312-101500";
  r.created_at = "2025-03-12T10:15:00Z";
  r.system = "JEDI";
  r.host = "jpbo-001-01";
  r.job_id = "123456";
  r.queue = "all";
  r.scaffold_version = "0.2.0";
  r.git_commit = "5a4d3becec78-dirty";
  r.ranks = 8;
  r.nodes = 2;
  r.devices = 8;
  r.tasks_per_node = 4;
  r.threads_per_task = 72;
  r.device = "cuda:0";
  r.global_batch = 256;
  r.local_batch = 32;
  r.precision = "bf16";
  r.epochs = 100;
  r.warmup_epochs = 5;
  r.time_s = 1234.5678;
  r.runtime_s = 1400.25;
  r.energy_wh = 987.654321;
  r.params = {{"model", "resnet50"},
              {"dataset", "synthetic"},
              {"workers", "18"},
              {"channels_last", "true"}};
  r.counters = {{"images_per_s", 8100.125, "images/s", "10 000 images / epoch time"},
                {"val_top1", 0.0011, "", "top-1 accuracy, last epoch"},
                {"no_value", std::nan(""), "J", "a counter the run could not measure"}};
  return r;
}

void expect_same(const RunRecord& a, const RunRecord& b) {
  EXPECT_EQ(a.workload, b.workload);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.run, b.run);
  EXPECT_EQ(a.created_at, b.created_at);
  EXPECT_EQ(a.system, b.system);
  EXPECT_EQ(a.host, b.host);
  EXPECT_EQ(a.job_id, b.job_id);
  EXPECT_EQ(a.queue, b.queue);
  EXPECT_EQ(a.scaffold_version, b.scaffold_version);
  EXPECT_EQ(a.git_commit, b.git_commit);
  EXPECT_EQ(a.ranks, b.ranks);
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.devices, b.devices);
  EXPECT_EQ(a.tasks_per_node, b.tasks_per_node);
  EXPECT_EQ(a.threads_per_task, b.threads_per_task);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.global_batch, b.global_batch);
  EXPECT_EQ(a.local_batch, b.local_batch);
  EXPECT_EQ(a.precision, b.precision);
  EXPECT_EQ(a.epochs, b.epochs);
  EXPECT_EQ(a.warmup_epochs, b.warmup_epochs);
  EXPECT_EQ(a.time_s, b.time_s);  // exact: JSON numbers round-trip doubles
  EXPECT_EQ(a.runtime_s, b.runtime_s);
  EXPECT_EQ(a.energy_wh, b.energy_wh);
  EXPECT_EQ(a.params, b.params);
  ASSERT_EQ(a.counters.size(), b.counters.size());
  for (std::size_t i = 0; i < a.counters.size(); ++i) {
    EXPECT_EQ(a.counters[i].name, b.counters[i].name);
    if (std::isfinite(a.counters[i].value))
      EXPECT_EQ(a.counters[i].value, b.counters[i].value) << a.counters[i].name;
    else
      EXPECT_TRUE(std::isnan(b.counters[i].value)) << a.counters[i].name;
    EXPECT_EQ(a.counters[i].unit, b.counters[i].unit);
    EXPECT_EQ(a.counters[i].help, b.counters[i].help);
  }
}

// The reader's error for `text`, or "" when it reads.
std::string read_error(const std::string& text, const std::string& source = "runs/x/summary.json") {
  try {
    run_record_from_json(text, source);
  } catch (const core::FileError& e) {
    return e.what();
  }
  return "";
}

std::string json_error(const Json& j) {
  return read_error(j.dump());
}

Json full_json() {
  return Json::parse(run_record_json(full_record()));
}

// ----------------------------------------------------------------------------- writing

TEST(RunRecord, JsonTextHasTheSchemaFirstAndEveryKeyInOrder) {
  RunRecord r;
  r.workload = "image_classification";
  r.status = kStatusReachedTarget;
  r.run = "r1";
  r.created_at = "2025-03-12T10:15:00Z";
  r.system = "laptop";
  r.host = "laptop";
  r.scaffold_version = "0.2.0";
  r.git_commit = "abc";
  r.device = "cpu";
  r.global_batch = 64;
  r.local_batch = 64;
  r.precision = "fp32";
  r.epochs = 3;
  r.warmup_epochs = 1;
  r.time_s = 12.0;
  r.runtime_s = 20.5;
  r.params = {{"model", "resnet18"}};
  r.counters = {{"images_per_s", 2500.0, "images/s", "h"}};
  EXPECT_EQ(run_record_json(r), R"({
  "schema": "scaffold-run/1",
  "workload": "image_classification",
  "status": "reached_target",
  "run": "r1",
  "created_at": "2025-03-12T10:15:00Z",
  "system": "laptop",
  "host": "laptop",
  "job_id": "",
  "queue": "",
  "scaffold_version": "0.2.0",
  "git_commit": "abc",
  "ranks": 1,
  "nodes": 1,
  "devices": 1,
  "tasks_per_node": 1,
  "threads_per_task": 1,
  "device": "cpu",
  "global_batch": 64,
  "local_batch": 64,
  "precision": "fp32",
  "epochs": 3,
  "warmup_epochs": 1,
  "time_s": 12.0,
  "runtime_s": 20.5,
  "energy_wh": null,
  "params": {
    "model": "resnet18"
  },
  "counters": [
    {
      "name": "images_per_s",
      "value": 2500.0,
      "unit": "images/s",
      "help": "h"
    }
  ]
}
)");
}

TEST(RunRecord, RoundTripsEveryField) {
  test::TempDir tmp;
  const RunRecord r = full_record();
  write_summary_json(tmp.path(), r);
  const RunRecord back = read_summary_json(tmp.path() / kSummaryFileName);
  expect_same(r, back);
  // The counter without a value is null in the file and has no value when read.
  EXPECT_TRUE(Json::parse(core::read_file(tmp.path() / kSummaryFileName))["counters"][2]["value"]
                  .is_null());
  EXPECT_EQ(counter_value(back, "no_value"), std::nullopt);
  // Nothing but summary.json is left in the folder (no temporary file).
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
}

TEST(RunRecord, WithoutEnergyAndWithEmptyListsStillRoundTrips) {
  RunRecord r = full_record();
  r.energy_wh.reset();
  r.params.clear();
  r.counters.clear();
  r.job_id.clear();
  r.queue.clear();
  const RunRecord back = run_record_from_json(run_record_json(r), "s");
  expect_same(r, back);
  EXPECT_FALSE(back.energy_wh.has_value());
}

TEST(RunRecord, TheWriterRefusesWhatTheReaderWouldRejectAndWritesNothing) {
  test::TempDir tmp;
  const fs::path file = tmp.path() / kSummaryFileName;
  struct Case {
    void (*spoil)(RunRecord&);
    const char* message;
  };
  const std::vector<Case> cases{
      {[](RunRecord& r) { r.workload.clear(); },
       R"(key "workload" is "", expected a non-empty string)"},
      {[](RunRecord& r) { r.status = "done"; },
       R"(key "status" is "done", expected one of "reached_target", "completed", "not_reached", "time_limit")"},
      {[](RunRecord& r) { r.devices = 0; }, R"(key "devices" is 0, expected an integer >= 1)"},
      {[](RunRecord& r) { r.time_s = std::nan(""); },
       R"(key "time_s" is null, expected a number >= 0)"},
      {[](RunRecord& r) { r.energy_wh = -1.0; },
       R"(key "energy_wh" is -1.0, expected a number >= 0 or null)"},
      {[](RunRecord& r) { r.params.emplace_back("model", "vit"); },
       R"(key "params.model" appears twice)"},
      {[](RunRecord& r) { r.counters[1].name = "images_per_s"; },
       R"(key "counters[1].name" is "images_per_s", a name an earlier counter has)"},
  };
  for (const Case& c : cases) {
    RunRecord r = full_record();
    c.spoil(r);
    try {
      write_summary_json(tmp.path(), r);
      ADD_FAILURE() << "no error for " << c.message;
    } catch (const core::FileError& e) {
      EXPECT_EQ(std::string(e.what()), file.string() + ": not written: " + c.message);
    }
    EXPECT_FALSE(fs::exists(file)) << c.message;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 0);
}

// ----------------------------------------------------------------------------- reading

TEST(RunRecord, ReadingAMissingFileNamesIt) {
  test::TempDir tmp;
  const fs::path file = tmp.path() / kSummaryFileName;
  try {
    read_summary_json(file);
    FAIL() << "no error";
  } catch (const core::FileError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
}

TEST(RunRecord, AnotherSchemaVersionIsRejectedBeforeAnyOtherKey) {
  Json j = Json::object();
  j["schema"] = "scaffold-run/2";
  j["renamed_key"] = 1;  // a newer version's key must not be what the error talks about
  EXPECT_EQ(json_error(j),
            "runs/x/summary.json: key \"schema\" is \"scaffold-run/2\", expected "
            "\"scaffold-run/1\" (this scaffold reads only that version of summary.json)");
  j["schema"] = 1;
  EXPECT_NE(json_error(j).find(R"(key "schema" is 1, expected "scaffold-run/1")"),
            std::string::npos);
  j.erase("schema");
  EXPECT_EQ(json_error(j),
            R"(runs/x/summary.json: key "schema" is missing (expected "scaffold-run/1"))");
}

TEST(RunRecord, NotJsonOrNotAnObjectNamesTheFile) {
  EXPECT_EQ(read_error("{\"schema\": ").rfind("runs/x/summary.json: not valid JSON: ", 0), 0u);
  EXPECT_EQ(read_error("").rfind("runs/x/summary.json: not valid JSON: ", 0), 0u);
  EXPECT_EQ(read_error("[1, 2]"),
            "runs/x/summary.json: expected a JSON object (a scaffold run summary)");
}

TEST(RunRecord, EveryMissingKeyIsNamedWithWhatWasExpected) {
  const Json full = full_json();
  ASSERT_EQ(json_error(full), "");
  for (const auto& item : full.items()) {
    if (item.key() == "schema") continue;
    Json j = full;
    j.erase(item.key());
    const std::string error = json_error(j);
    EXPECT_EQ(
        error.rfind("runs/x/summary.json: key \"" + item.key() + "\" is missing (expected ", 0), 0u)
        << error;
  }
}

TEST(RunRecord, EveryKeyOfTheWrongTypeIsNamed) {
  const Json full = full_json();
  for (const auto& item : full.items()) {
    if (item.key() == "schema") continue;
    // A value of another JSON type than the key's own.
    std::vector<Json> wrong{item.value().is_array() ? Json::object() : Json::array({1})};
    if (!item.value().is_string()) wrong.push_back("4");
    if (item.value().is_string() || item.value().is_array()) wrong.push_back(4);
    if (item.value().is_number_integer()) {
      wrong.push_back(4.5);
      wrong.push_back(true);
    }
    if (item.value().is_number_float()) wrong.push_back(false);
    for (const Json& value : wrong) {
      Json j = full;
      j[item.key()] = value;
      const std::string error = json_error(j);
      EXPECT_EQ(error.rfind("runs/x/summary.json: key \"" + item.key() + "\" is " + value.dump() +
                                ", expected ",
                            0),
                0u)
          << item.key() << " = " << value.dump() << ": " << error;
    }
  }
}

TEST(RunRecord, ValuesOutOfRangeNameTheKeyAndTheRule) {
  struct Case {
    const char* key;
    Json value;
    const char* message;
  };
  const std::vector<Case> cases{
      {"workload", "", R"(key "workload" is "", expected a non-empty string)"},
      {"run", "", R"(key "run" is "", expected a non-empty string)"},
      {"status", "finished",
       R"(key "status" is "finished", expected one of "reached_target", "completed", "not_reached", "time_limit")"},
      {"created_at", "2025-03-12 10:15:00",
       R"(key "created_at" is "2025-03-12 10:15:00", expected a UTC time "YYYY-MM-DDTHH:MM:SSZ")"},
      {"ranks", 0, R"(key "ranks" is 0, expected an integer >= 1)"},
      {"nodes", -2, R"(key "nodes" is -2, expected an integer >= 1)"},
      {"threads_per_task", 4294967296LL,
       R"(key "threads_per_task" is 4294967296, expected an integer >= 1)"},
      {"global_batch", -1, R"(key "global_batch" is -1, expected an integer >= 0)"},
      {"epochs", 18446744073709551615ULL,
       R"(key "epochs" is 18446744073709551615, expected an integer >= 0)"},
      {"time_s", -0.5, R"(key "time_s" is -0.5, expected a number >= 0)"},
      {"runtime_s", nullptr, R"(key "runtime_s" is null, expected a number >= 0)"},
      {"energy_wh", -1.5, R"(key "energy_wh" is -1.5, expected a number >= 0 or null)"},
  };
  for (const Case& c : cases) {
    Json j = full_json();
    j[c.key] = c.value;
    EXPECT_EQ(json_error(j), std::string("runs/x/summary.json: ") + c.message);
  }
}

TEST(RunRecord, UnknownAndRepeatedKeysAreErrors) {
  Json j = full_json();
  j["rank"] = 4;
  const std::string error = json_error(j);
  EXPECT_EQ(error.rfind("runs/x/summary.json: unknown key \"rank\" (the keys of scaffold-run/1 "
                        "are: schema, workload, status, run, ",
                        0),
            0u)
      << error;

  // A key given twice would otherwise be read as the last one, silently.
  std::string text = run_record_json(full_record());
  text.replace(text.find("\"ranks\": 8"), 10, "\"ranks\": 8, \"ranks\": 16");
  EXPECT_EQ(read_error(text), R"(runs/x/summary.json: key "ranks" appears twice in one object)");
}

TEST(RunRecord, MalformedParamsNameTheParameter) {
  Json j = full_json();
  j["params"] = Json::array({"resnet50"});
  EXPECT_EQ(json_error(j),
            R"(runs/x/summary.json: key "params" is ["resnet50"], expected an object of strings)");
  j = full_json();
  j["params"]["workers"] = 18;
  EXPECT_EQ(json_error(j), R"(runs/x/summary.json: key "params.workers" is 18, expected a string)");
  j = full_json();
  j["params"][""] = "x";
  EXPECT_EQ(json_error(j),
            R"(runs/x/summary.json: key "params" has a parameter with an empty name)");
}

TEST(RunRecord, MalformedCountersNameTheCounterAndItsKey) {
  struct Case {
    void (*spoil)(Json&);
    const char* message;
  };
  const std::vector<Case> cases{
      {[](Json& j) { j["counters"] = Json::object(); },
       R"(key "counters" is {}, expected an array of {name, value, unit, help})"},
      {[](Json& j) { j["counters"][1] = 3.5; },
       R"(key "counters[1]" is 3.5, expected an object {name, value, unit, help})"},
      {[](Json& j) { j["counters"][0].erase("name"); },
       R"(key "counters[0].name" is missing (expected a non-empty string))"},
      {[](Json& j) { j["counters"][0]["name"] = ""; },
       R"(key "counters[0].name" is "", expected a non-empty string)"},
      {[](Json& j) { j["counters"][1]["value"] = "0.5"; },
       R"(key "counters[1].value" is "0.5", expected a number or null)"},
      {[](Json& j) { j["counters"][1].erase("value"); },
       R"(key "counters[1].value" is missing (expected a number or null))"},
      {[](Json& j) { j["counters"][2]["unit"] = nullptr; },
       R"(key "counters[2].unit" is null, expected a string)"},
      {[](Json& j) { j["counters"][2].erase("help"); },
       R"(key "counters[2].help" is missing (expected a string))"},
      {[](Json& j) { j["counters"][0]["units"] = "images/s"; },
       R"(unknown key "counters[0].units" (the keys of a counter are: name, value, unit, help))"},
      {[](Json& j) { j["counters"][2]["name"] = "val_top1"; },
       R"(key "counters[2].name" is "val_top1", a name an earlier counter has)"},
  };
  for (const Case& c : cases) {
    Json j = full_json();
    c.spoil(j);
    EXPECT_EQ(json_error(j), std::string("runs/x/summary.json: ") + c.message);
  }
}

TEST(RunRecord, LongValuesAreCutShortInMessages) {
  Json j = full_json();
  j["ranks"] = std::string(200, 'x');
  const std::string error = json_error(j);
  EXPECT_NE(error.find("...,"), std::string::npos) << error;
  EXPECT_LT(error.size(), 160u) << error;
}

// ------------------------------------------------------------------------------ helpers

TEST(RunRecord, FindCounterAndParam) {
  const RunRecord r = full_record();
  ASSERT_NE(find_counter(r, "images_per_s"), nullptr);
  EXPECT_EQ(find_counter(r, "images_per_s")->unit, "images/s");
  EXPECT_EQ(find_counter(r, "nope"), nullptr);
  EXPECT_EQ(counter_value(r, "val_top1"), 0.0011);
  EXPECT_EQ(counter_value(r, "nope"), std::nullopt);
  EXPECT_EQ(counter_value(r, "no_value"), std::nullopt);  // declared, not finite
  ASSERT_NE(find_param(r, "workers"), nullptr);
  EXPECT_EQ(*find_param(r, "workers"), "18");
  EXPECT_EQ(find_param(r, "nope"), nullptr);
  EXPECT_EQ(run_statuses(),
            (std::vector<std::string>{"reached_target", "completed", "not_reached", "time_limit"}));
}

TEST(RunRecord, ContextComesFromTheEnvironmentAndTheBuild) {
  ::setenv("SCAFFOLD_SYSTEM", "JURECA-DC", 1);
  ::setenv("SLURM_JOB_ID", "4242", 1);
  ::setenv("SLURM_JOB_PARTITION", "dc-gpu", 1);
  RunRecord r = collect_run_context();
  EXPECT_EQ(r.system, "JURECA-DC");
  EXPECT_EQ(r.job_id, "4242");
  EXPECT_EQ(r.queue, "dc-gpu");
  EXPECT_EQ(r.host, core::host_name());
  EXPECT_EQ(r.scaffold_version, core::version());
  EXPECT_EQ(r.git_commit, core::git_commit());
  EXPECT_EQ(r.created_at.size(), 20u) << r.created_at;

  ::unsetenv("SCAFFOLD_SYSTEM");
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_JOB_PARTITION");
  r = collect_run_context();
  EXPECT_EQ(r.system, core::host_name());  // outside a named system: the host
  EXPECT_EQ(r.job_id, "");
  EXPECT_EQ(r.queue, "");
  // What the context fills is valid as it is: a workload adds the rest.
  r.workload = "image_classification";
  r.status = kStatusCompleted;
  r.run = "r";
  r.device = "cpu";
  r.precision = "fp32";
  EXPECT_EQ(read_error(run_record_json(r)), "");
}

}  // namespace
}  // namespace scaffold::report
