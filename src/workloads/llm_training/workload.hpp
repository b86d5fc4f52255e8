// The LLM-training workload's record (workload.cpp), for the registry (workloads/registry.cpp).
#pragma once

#include "suite/driver.hpp"

namespace scaffold::llm {

// `scaffold llm_training -c CONFIG [flags]`, run by the suite's driver.
suite::Workload llm_training_workload();

}  // namespace scaffold::llm
