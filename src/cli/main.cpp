// scaffold: the entry point. The command line is cli::run_scaffold's; the suite's workloads and
// their tools are the registry's (workloads/registry.cpp).
#include "cli/app.hpp"
#include "workloads/registry.hpp"

int main(int argc, char** argv) {
  using namespace scaffold;
  return cli::run_scaffold(argc, argv, workloads::suite_workloads(), workloads::workload_tools());
}
