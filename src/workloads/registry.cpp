#include "workloads/registry.hpp"

#ifdef SCAFFOLD_WITH_IMAGE_CLASSIFICATION
#include "workloads/image_classification/workload.hpp"
#endif
#include "workloads/fno/data/generate_pde_data.hpp"
#include "workloads/fno/workload.hpp"
#include "workloads/llm_training/data/preprocess_command.hpp"
#include "workloads/llm_training/workload.hpp"
#include "workloads/scaffold/workload.hpp"

namespace scaffold::workloads {

std::vector<suite::Workload> suite_workloads() {
  std::vector<suite::Workload> list;
  list.push_back(benchmark::benchmark_workload());
#ifdef SCAFFOLD_WITH_IMAGE_CLASSIFICATION  // needs libjpeg and libpng (scripts/install-deps)
  list.push_back(imgcls::image_classification_workload());
#endif
  list.push_back(llm::llm_training_workload());
  list.push_back(fno::fno_workload());
  return list;
}

std::vector<std::function<cli::Subcommand(CLI::App&)>> workload_tools() {
  return {benchmark::add_generate_fractals, benchmark::add_generate_dataset,
          fno::add_generate_pde_data, llm::add_preprocess_data};
}

}  // namespace scaffold::workloads
