// Facts about this process and host that results record: peak memory, host name, executable.
#pragma once

#include <cstdint>
#include <string>

namespace scaffold::core {

int64_t peak_rss_bytes();  // VmHWM from /proc/self/status; 0 when unavailable
std::string host_name();
std::string executable_path();  // /proc/self/exe, or "" when unavailable

}  // namespace scaffold::core
