// The benchmark's option struct with its schema and loader (schema.cpp, on the config engine):
// the names the rest of the workload, `scaffold report` and the tests use for Config.
#pragma once

#include <string>
#include <vector>

#include "config/load.hpp"
#include "config/schema.hpp"
#include "workloads/scaffold/options.hpp"

namespace scaffold::config {

using KeySpec = KeySpecT<Config>;
using LoadedConfig = LoadedConfigT<Config>;

// Config's keys in options.hpp order.
const std::vector<KeySpec>& schema();
// load_config_as<Config>: throws core::Error (all problems listed, one per line).
LoadedConfig load_config(const LoadRequest& request);
// from_yaml_text<Config>: YAML text written by to_yaml (config.yaml of a run folder).
Config config_from_yaml_text(const std::string& text, const std::string& source);

}  // namespace scaffold::config
