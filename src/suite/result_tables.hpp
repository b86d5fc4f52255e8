// The suite's list of result tables: one per workload that writes a summary.json, so that
// `scaffold report` can print any run folder through its workload's columns. The list is
// explicit (a workload adds its line in result_tables.cpp); nothing registers itself at static
// initialisation. The ScaFFold benchmark ("benchmark") is not here: its table is report/table.hpp.
#pragma once

#include <string>
#include <vector>

#include "report/record_table.hpp"

namespace scaffold::suite {

// Every workload's table, in the order `scaffold report` prints their groups.
const std::vector<report::WorkloadTable>& workload_tables();

// The table of `workload`, or nullptr when no workload of that name has one.
const report::WorkloadTable* find_workload_table(const std::string& workload);

// The workload names of workload_tables(), in order (for error messages).
std::vector<std::string> workload_table_names();

}  // namespace scaffold::suite
