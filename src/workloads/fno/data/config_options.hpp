// FnoDataOptions and FnoSourceOptions from the validated FnoDataConfig
// (workloads/fno/data/config.hpp): the one place that maps config keys to the generators' options,
// for `scaffold generate_pde_data` and the FNO benchmark alike. train_samples / val_samples count
// examples; for rbc2d they become as many trajectories as hold that many examples.
#pragma once

#include <string>

#include "workloads/fno/data/config.hpp"
#include "workloads/fno/data/options.hpp"
#include "workloads/fno/data/sources.hpp"

namespace scaffold::fno {

FnoDataOptions fno_data_options(const config::FnoDataConfig& config, int threads,
                                const std::string& code_commit);
FnoSourceOptions fno_source_options(const config::FnoDataConfig& config);

}  // namespace scaffold::fno
