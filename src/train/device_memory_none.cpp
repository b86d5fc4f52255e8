// Build without CUDA: there is no accelerator to ask.
#include "train/device_memory.hpp"

namespace scaffold::train {

int64_t device_peak_allocated_bytes(const c10::Device&) { return -1; }
int64_t device_total_memory_bytes(const c10::Device&) { return -1; }
std::string device_model_name(const c10::Device&) { return {}; }
std::string device_bus_id(const c10::Device&) { return {}; }
void set_current_device(const c10::Device&) {}

}  // namespace scaffold::train
