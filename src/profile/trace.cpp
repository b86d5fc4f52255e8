#include "profile/trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/version.hpp"

namespace scaffold::profile {

using nlohmann::json;

std::string chrome_trace_json(const std::vector<TraceEvent>& events,
                              const std::vector<std::pair<int64_t, std::string>>& thread_names,
                              const TraceInfo& info) {
  const int64_t pid = info.pid != 0 ? info.pid : static_cast<int64_t>(::getpid());
  // One event per line: still one JSON object, but a human (or grep) can read it.
  std::string out = "{\"traceEvents\": [\n";
  bool first = true;
  auto append = [&](const json& event) {
    if (!first) out += ",\n";
    first = false;
    out += event.dump();
  };
  append(json{{"ph", "M"},
              {"name", "process_name"},
              {"pid", pid},
              {"tid", 0},
              {"args", {{"name", info.process_name}}}});
  for (const auto& [tid, name] : thread_names)
    append(json{{"ph", "M"},
                {"name", "thread_name"},
                {"pid", pid},
                {"tid", tid},
                {"args", {{"name", name}}}});
  for (const TraceEvent& e : events) {
    json event{{"ph", "X"},       {"name", e.name}, {"cat", e.category}, {"ts", e.ts_us},
               {"dur", e.dur_us}, {"pid", pid},     {"tid", e.tid}};
    if (!e.args.empty()) {
      json args = json::object();
      for (const auto& [key, value] : e.args) args[key] = value;
      event["args"] = std::move(args);
    }
    append(event);
  }
  json other = json::object();
  for (const auto& [key, value] : info.other_data) other[key] = value;
  other["generator"] = std::string("scaffold ") + core::version() + " (" + core::git_commit() + ")";
  out += "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": " + other.dump() + "}\n";
  return out;
}

std::string trace_file_name(const TraceFileNameParts& parts) {
  std::string host = parts.host;
  std::replace(host.begin(), host.end(), '/', '_');
  return "torch-" + host + "-r" + std::to_string(parts.rank) + "-N" + std::to_string(parts.nodes) +
         "-n" + std::to_string(parts.world_size) + "-ps" + std::to_string(parts.problem_scale) +
         "-e" + std::to_string(parts.epochs) + "-nipf" +
         std::to_string(parts.n_instances_used_per_fractal) + "-" +
         std::to_string(parts.unix_time_s) + ".json";
}

}  // namespace scaffold::profile
