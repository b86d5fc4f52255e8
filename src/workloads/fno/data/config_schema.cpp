// FnoDataConfig's schema: the FNO data keys (fno_data_keys.hpp) bound to the struct itself. No
// auxiliary or renamed keys: this struct has no older format to stay compatible with.
#include "config/engine.hpp"
#include "workloads/fno/data/config.hpp"
#include "workloads/fno/data/config_keys.hpp"

namespace scaffold::config {

SchemaT<FnoDataConfig> build_schema(SchemaFor<FnoDataConfig>) {
  SchemaT<FnoDataConfig> s;
  s.command = "generate_pde_data";
  append_fno_data_keys<FnoDataConfig>(
      s.keys, +[](FnoDataConfig& c) -> FnoDataConfig& { return c; },
      +[](const FnoDataConfig& c) { return c; });
  return s;
}

SCAFFOLD_CONFIG_STRUCT(FnoDataConfig);

}  // namespace scaffold::config
