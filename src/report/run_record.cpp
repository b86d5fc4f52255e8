// summary.json writer and reader. The fixed fields are declared once (kFields, with the rule each
// value must keep) and drive writing, reading and the one validation both directions run, so the
// writer cannot produce a file the reader rejects. params and counters follow them. The reader is
// strict: every key is required, unknown and repeated keys are errors, so a hand-edited file with
// a typo fails loudly instead of printing a table with a hole in it.
#include "report/run_record.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>
#include <variant>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/sysinfo.hpp"
#include "core/version.hpp"
#include "report/system_info.hpp"

namespace scaffold::report {
namespace fs = std::filesystem;

namespace {

using Json = nlohmann::ordered_json;

enum class Rule {
  kAnyText,      // any string, "" included (job_id, queue outside Slurm)
  kText,         // a non-empty string
  kStatus,       // one of run_statuses()
  kTimestamp,    // "YYYY-MM-DDTHH:MM:SSZ"
  kAtLeastOne,   // an integer >= 1
  kNonNegative,  // an integer or a finite number >= 0
  kOptional,     // a finite number >= 0, or no value (null)
};

using Member = std::variant<std::string RunRecord::*, int RunRecord::*, int64_t RunRecord::*,
                            double RunRecord::*, std::optional<double> RunRecord::*>;
struct Field {
  const char* key;
  Member member;
  Rule rule;
};

// The one declaration of summary.json's fixed keys, in file order (after "schema"). A plain array:
// its size is counted, so no default-made entry can hide at the end.
const Field kFields[] = {
    {"workload", &RunRecord::workload, Rule::kText},
    {"status", &RunRecord::status, Rule::kStatus},
    {"run", &RunRecord::run, Rule::kText},
    {"created_at", &RunRecord::created_at, Rule::kTimestamp},
    {"system", &RunRecord::system, Rule::kText},
    {"host", &RunRecord::host, Rule::kText},
    {"job_id", &RunRecord::job_id, Rule::kAnyText},
    {"queue", &RunRecord::queue, Rule::kAnyText},
    {"scaffold_version", &RunRecord::scaffold_version, Rule::kText},
    {"git_commit", &RunRecord::git_commit, Rule::kText},
    {"ranks", &RunRecord::ranks, Rule::kAtLeastOne},
    {"nodes", &RunRecord::nodes, Rule::kAtLeastOne},
    {"devices", &RunRecord::devices, Rule::kAtLeastOne},
    {"tasks_per_node", &RunRecord::tasks_per_node, Rule::kAtLeastOne},
    {"threads_per_task", &RunRecord::threads_per_task, Rule::kAtLeastOne},
    {"device", &RunRecord::device, Rule::kText},
    {"global_batch", &RunRecord::global_batch, Rule::kNonNegative},
    {"local_batch", &RunRecord::local_batch, Rule::kNonNegative},
    {"precision", &RunRecord::precision, Rule::kText},
    {"epochs", &RunRecord::epochs, Rule::kNonNegative},
    {"warmup_epochs", &RunRecord::warmup_epochs, Rule::kNonNegative},
    {"time_s", &RunRecord::time_s, Rule::kNonNegative},
    {"runtime_s", &RunRecord::runtime_s, Rule::kNonNegative},
    {"energy_wh", &RunRecord::energy_wh, Rule::kOptional},
};
constexpr const char* kParamsKey = "params";
constexpr const char* kCountersKey = "counters";
constexpr std::array<const char*, 4> kCounterKeys{"name", "value", "unit", "help"};

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "\"" : ", \"") + n + "\"";
  return out;
}

// What a field's value must be, as the error messages say it.
std::string expected(const Field& f) {
  switch (f.rule) {
    case Rule::kAnyText:
      return "a string";
    case Rule::kText:
      return "a non-empty string";
    case Rule::kStatus:
      return "one of " + quoted_list(run_statuses());
    case Rule::kTimestamp:
      return "a UTC time \"YYYY-MM-DDTHH:MM:SSZ\"";
    case Rule::kAtLeastOne:
      return "an integer >= 1";
    case Rule::kNonNegative:
      return std::holds_alternative<double RunRecord::*>(f.member) ? "a number >= 0"
                                                                   : "an integer >= 0";
    case Rule::kOptional:
      return "a number >= 0 or null";
  }
  return "";
}

bool is_timestamp(const std::string& s) {
  constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:ddZ";
  if (s.size() != kShape.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (kShape[i] == 'd' ? !std::isdigit(static_cast<unsigned char>(s[i])) : s[i] != kShape[i])
      return false;
  return true;
}

bool keeps_rule(Rule rule, const std::string& s) {
  switch (rule) {
    case Rule::kAnyText:
      return true;
    case Rule::kText:
      return !s.empty();
    case Rule::kStatus:
      for (const std::string& status : run_statuses())
        if (s == status) return true;
      return false;
    case Rule::kTimestamp:
      return is_timestamp(s);
    default:
      return false;
  }
}
bool keeps_rule(Rule rule, int64_t x) {
  return rule == Rule::kAtLeastOne ? x >= 1 : x >= 0;
}
bool keeps_rule(Rule, double x) {
  return std::isfinite(x) && x >= 0;
}
bool keeps_rule(Rule, const std::optional<double>& x) {
  return !x || (std::isfinite(*x) && *x >= 0);
}

// A value as an error message shows it: its JSON, cut short when long.
std::string shown(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// The first key `r` breaks a rule of, as "key \"k\" is v, expected e"; "" when it keeps them all.
std::string first_problem(const RunRecord& r) {
  for (const Field& f : kFields) {
    std::string problem;
    std::visit(
        [&](auto member) {
          const auto& value = r.*member;
          bool ok = false;
          if constexpr (std::is_same_v<std::decay_t<decltype(value)>, int>)
            ok = keeps_rule(f.rule, int64_t{value});
          else
            ok = keeps_rule(f.rule, value);
          if (!ok) {
            Json j;
            if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::optional<double>>)
              j = *value;
            else
              j = value;
            problem = fmt::format("key \"{}\" is {}, expected {}", f.key, shown(j), expected(f));
          }
        },
        f.member);
    if (!problem.empty()) return problem;
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < r.params.size(); ++i) {
    const std::string& name = r.params[i].first;
    if (name.empty())
      return fmt::format("key \"{}\" has a parameter with an empty name", kParamsKey);
    if (!names.insert(name).second)
      return fmt::format("key \"{}.{}\" appears twice", kParamsKey, name);
  }
  names.clear();
  for (std::size_t i = 0; i < r.counters.size(); ++i) {
    const std::string& name = r.counters[i].name;
    if (name.empty())
      return fmt::format("key \"{}[{}].name\" is \"\", expected a non-empty string", kCountersKey,
                         i);
    if (!names.insert(name).second)
      return fmt::format("key \"{}[{}].name\" is \"{}\", a name an earlier counter has",
                         kCountersKey, i, name);
  }
  return "";
}

Json counter_json(const Counter& c) {
  Json j = Json::object();
  j["name"] = c.name;
  j["value"] = std::isfinite(c.value) ? Json(c.value) : Json(nullptr);
  j["unit"] = c.unit;
  j["help"] = c.help;
  return j;
}

Json record_json(const RunRecord& r) {
  Json j = Json::object();
  j["schema"] = kSummarySchema;
  for (const Field& f : kFields)
    std::visit(
        [&](auto member) {
          const auto& value = r.*member;
          if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::optional<double>>)
            j[f.key] = value ? Json(*value) : Json(nullptr);
          else
            j[f.key] = value;
        },
        f.member);
  Json params = Json::object();
  for (const auto& [name, value] : r.params) params[name] = value;
  j[kParamsKey] = std::move(params);
  Json counters = Json::array();
  for (const Counter& c : r.counters) counters.push_back(counter_json(c));
  j[kCountersKey] = std::move(counters);
  return j;
}

// ------------------------------------------------------------------------------ reading

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& what) const { throw core::FileError(source_, what); }
  [[noreturn]] void wrong(const std::string& key, const Json& value,
                          const std::string& expected_text) const {
    fail(fmt::format("key \"{}\" is {}, expected {}", key, shown(value), expected_text));
  }

  // The value of `key` in `object`; a missing key is an error saying what was expected.
  const Json& at(const Json& object, const std::string& key, const std::string& path,
                 const std::string& expected_text) const {
    const auto it = object.find(key);
    if (it == object.end())
      fail(fmt::format("key \"{}\" is missing (expected {})", path, expected_text));
    return *it;
  }

  // Any key of `object` not in `known` is an error listing the known ones; `what` names the
  // object ("scaffold-run/1", "a counter").
  void no_unknown_keys(const Json& object, const std::vector<std::string>& known,
                       const std::string& prefix, const std::string& what) const {
    for (const auto& item : object.items()) {
      bool found = false;
      for (const std::string& k : known) found = found || item.key() == k;
      if (!found)
        fail(fmt::format("unknown key \"{}{}\" (the keys of {} are: {})", prefix, item.key(), what,
                         fmt::join(known, ", ")));
    }
  }

  std::string text(const Json& v, const std::string& key, const std::string& expected_text) const {
    if (!v.is_string()) wrong(key, v, expected_text);
    return v.get<std::string>();
  }

  int64_t integer(const Json& v, const std::string& key, const std::string& expected_text) const {
    // get<int64_t>() would take 4.5 as 4, true as 1 and wrap integers above INT64_MAX.
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() &&
         v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      wrong(key, v, expected_text);
    return v.get<int64_t>();
  }

  double number(const Json& v, const std::string& key, const std::string& expected_text) const {
    if (!v.is_number()) wrong(key, v, expected_text);
    return v.get<double>();
  }

 private:
  const std::string& source_;
};

// Parses JSON; a key repeated within one object is an error (nlohmann would keep one silently).
Json parse_strict(const std::string& text, const Reader& reader) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string repeated;
  const auto callback = [&](int, nlohmann::detail::parse_event_t event, Json& parsed) {
    using Event = nlohmann::detail::parse_event_t;
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() && repeated.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second)
      repeated = parsed.get<std::string>();
    return true;
  };
  Json j;
  try {
    j = Json::parse(text, callback);
  } catch (const nlohmann::json::exception& e) {
    reader.fail(std::string("not valid JSON: ") + e.what());
  }
  if (!repeated.empty())
    reader.fail(fmt::format("key \"{}\" appears twice in one object", repeated));
  return j;
}

}  // namespace

const std::vector<std::string>& run_statuses() {
  static const std::vector<std::string> statuses{kStatusReachedTarget, kStatusCompleted,
                                                 kStatusNotReached, kStatusTimeLimit};
  return statuses;
}

RunRecord collect_run_context() {
  const auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value ? value : "");
  };
  RunRecord r;
  r.created_at = utc_now_iso8601();
  r.host = core::host_name();
  r.system = env("SCAFFOLD_SYSTEM").empty() ? r.host : env("SCAFFOLD_SYSTEM");
  r.job_id = env("SLURM_JOB_ID");
  r.queue = env("SLURM_JOB_PARTITION");
  r.scaffold_version = core::version();
  r.git_commit = core::git_commit();
  return r;
}

std::string run_record_json(const RunRecord& record) {
  return record_json(record).dump(2) + "\n";
}

std::string run_records_json(const std::vector<RunRecord>& records) {
  Json all = Json::array();
  for (const RunRecord& r : records) all.push_back(record_json(r));
  return all.dump(2) + "\n";
}

void write_summary_json(const fs::path& run_dir, const RunRecord& record) {
  const fs::path path = run_dir / kSummaryFileName;
  const std::string problem = first_problem(record);
  if (!problem.empty()) throw core::FileError(path.string(), "not written: " + problem);
  core::write_file_atomic(path, run_record_json(record));
}

RunRecord read_summary_json(const fs::path& path) {
  return run_record_from_json(core::read_file(path), path.string());
}

RunRecord run_record_from_json(const std::string& text, const std::string& source) {
  const Reader reader(source);
  const Json j = parse_strict(text, reader);
  if (!j.is_object()) reader.fail("expected a JSON object (a scaffold run summary)");

  // The schema first: a file of another version must not fail on a key it renamed.
  const std::string schema_expected = fmt::format("\"{}\"", kSummarySchema);
  const Json& schema = reader.at(j, "schema", "schema", schema_expected);
  if (schema != kSummarySchema)
    reader.fail(
        fmt::format("key \"schema\" is {}, expected {} (this scaffold reads only that "
                    "version of summary.json)",
                    shown(schema), schema_expected));

  std::vector<std::string> known{"schema"};
  for (const Field& f : kFields) known.emplace_back(f.key);
  known.emplace_back(kParamsKey);
  known.emplace_back(kCountersKey);
  reader.no_unknown_keys(j, known, "", kSummarySchema);

  RunRecord r;
  for (const Field& f : kFields) {
    const std::string what = expected(f);
    const Json& v = reader.at(j, f.key, f.key, what);
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(r.*member)>;
          if constexpr (std::is_same_v<T, std::string>) r.*member = reader.text(v, f.key, what);
          if constexpr (std::is_same_v<T, int64_t>) r.*member = reader.integer(v, f.key, what);
          if constexpr (std::is_same_v<T, int>) {
            const int64_t x = reader.integer(v, f.key, what);
            if (x < INT_MIN || x > INT_MAX) reader.wrong(f.key, v, what);
            r.*member = static_cast<int>(x);
          }
          if constexpr (std::is_same_v<T, double>) r.*member = reader.number(v, f.key, what);
          if constexpr (std::is_same_v<T, std::optional<double>>)
            if (!v.is_null()) r.*member = reader.number(v, f.key, what);
        },
        f.member);
  }

  const Json& params = reader.at(j, kParamsKey, kParamsKey, "an object of strings");
  if (!params.is_object()) reader.wrong(kParamsKey, params, "an object of strings");
  for (const auto& item : params.items()) {
    const std::string key = fmt::format("{}.{}", kParamsKey, item.key());
    r.params.emplace_back(item.key(), reader.text(item.value(), key, "a string"));
  }

  const Json& counters =
      reader.at(j, kCountersKey, kCountersKey, "an array of {name, value, unit, help}");
  if (!counters.is_array())
    reader.wrong(kCountersKey, counters, "an array of {name, value, unit, help}");
  const std::vector<std::string> counter_keys(kCounterKeys.begin(), kCounterKeys.end());
  for (std::size_t i = 0; i < counters.size(); ++i) {
    const std::string prefix = fmt::format("{}[{}]", kCountersKey, i);
    const Json& c = counters[i];
    if (!c.is_object()) reader.wrong(prefix, c, "an object {name, value, unit, help}");
    reader.no_unknown_keys(c, counter_keys, prefix + ".", "a counter");
    Counter counter;
    counter.name = reader.text(reader.at(c, "name", prefix + ".name", "a non-empty string"),
                               prefix + ".name", "a non-empty string");
    const Json& value = reader.at(c, "value", prefix + ".value", "a number or null");
    counter.value = value.is_null() ? std::numeric_limits<double>::quiet_NaN()
                                    : reader.number(value, prefix + ".value", "a number or null");
    counter.unit = reader.text(reader.at(c, "unit", prefix + ".unit", "a string"), prefix + ".unit",
                               "a string");
    counter.help = reader.text(reader.at(c, "help", prefix + ".help", "a string"), prefix + ".help",
                               "a string");
    r.counters.push_back(std::move(counter));
  }

  const std::string problem = first_problem(r);
  if (!problem.empty()) reader.fail(problem);
  return r;
}

const Counter* find_counter(const RunRecord& record, std::string_view name) {
  for (const Counter& c : record.counters)
    if (c.name == name) return &c;
  return nullptr;
}

std::optional<double> counter_value(const RunRecord& record, std::string_view name) {
  const Counter* c = find_counter(record, name);
  if (c == nullptr || !std::isfinite(c->value)) return std::nullopt;
  return c->value;
}

const std::string* find_param(const RunRecord& record, std::string_view name) {
  for (const auto& [key, value] : record.params)
    if (key == name) return &value;
  return nullptr;
}

}  // namespace scaffold::report
