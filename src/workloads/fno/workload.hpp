// The FNO workload's record (workload.cpp), for the registry (workloads/registry.cpp).
#pragma once

#include "suite/driver.hpp"

namespace scaffold::fno {

// `scaffold fno -c CONFIG [flags]`, run by the suite's driver.
suite::Workload fno_workload();

}  // namespace scaffold::fno
