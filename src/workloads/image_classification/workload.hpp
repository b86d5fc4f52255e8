// The image-classification workload's record (workload.cpp), for the registry
// (workloads/registry.cpp).
#pragma once

#include "suite/driver.hpp"

namespace scaffold::imgcls {

// `scaffold image_classification -c CONFIG [flags]`, run by the suite's driver.
suite::Workload image_classification_workload();

}  // namespace scaffold::imgcls
