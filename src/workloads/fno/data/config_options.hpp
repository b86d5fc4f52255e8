// FnoDataOptions from the validated FnoDataConfig (config/fno_data_options.hpp): the one place
// that maps config keys to the generator's options, for `scaffold generate_pde_data` and the FNO
// benchmark alike.
#pragma once

#include <string>

#include "config/fno_data_options.hpp"
#include "workloads/fno/data/options.hpp"

namespace scaffold::fno {

FnoDataOptions fno_data_options(const config::FnoDataConfig& config, int threads, const std::string& code_commit);

}  // namespace scaffold::fno
