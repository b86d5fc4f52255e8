// The explicit list of workload tables. Built on first use (a function-local static), so no
// table depends on another translation unit's initialisation order.
#include "suite/result_tables.hpp"

#include "workloads/fno/result_columns.hpp"
#include "workloads/image_classification/result_columns.hpp"
#include "workloads/llm_training/result_columns.hpp"

namespace scaffold::suite {

const std::vector<report::WorkloadTable>& workload_tables() {
  static const std::vector<report::WorkloadTable> tables{
      imgcls::result_table(), llm::result_table(), fno::result_table(),
      // A new workload adds its table here.
  };
  return tables;
}

const report::WorkloadTable* find_workload_table(const std::string& workload) {
  for (const report::WorkloadTable& t : workload_tables())
    if (t.workload == workload) return &t;
  return nullptr;
}

std::vector<std::string> workload_table_names() {
  std::vector<std::string> names;
  for (const report::WorkloadTable& t : workload_tables()) names.push_back(t.workload);
  return names;
}

}  // namespace scaffold::suite
