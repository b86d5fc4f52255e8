// A shared library opened at run time (dlopen), so scaffold runs where NVML or ROCm SMI is
// absent. Internal to the energy module: the NVML and ROCm SMI sources use it.
#pragma once

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

namespace scaffold::energy::detail {

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  ~DynamicLibrary() { close(); }
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // Tries each name in turn. On failure returns false; `error` gives the names not found and
  // the reasons the others were refused (wrong architecture, missing dependencies).
  bool open(const std::vector<std::string>& names, std::string* error) {
    std::string refused, missing;
    for (const auto& name : names) {
      handle_ = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle_) {
        name_ = name;
        return true;
      }
      const char* e = ::dlerror();
      const std::string why = e ? e : name + ": dlopen failed";
      if (why.find("No such file or directory") != std::string::npos)
        missing += (missing.empty() ? "" : ", ") + name;
      else
        refused += (refused.empty() ? "" : "; ") + why;
    }
    if (error) {
      *error = missing.empty() ? "" : "not found: " + missing;
      if (!refused.empty()) *error += (error->empty() ? "" : "; ") + refused;
    }
    return false;
  }
  void close() {
    if (handle_) ::dlclose(handle_);
    handle_ = nullptr;
  }
  const std::string& name() const { return name_; }

  // The symbol as a function pointer, or nullptr. (POSIX dlsym returns void*; copying the bits
  // avoids the object-to-function pointer cast that -Wpedantic rejects.)
  template <typename Fn>
  Fn function(const char* symbol) const {
    static_assert(sizeof(Fn) == sizeof(void*), "function pointers are pointer-sized");
    void* p = handle_ ? ::dlsym(handle_, symbol) : nullptr;
    Fn fn = nullptr;
    std::memcpy(&fn, &p, sizeof fn);
    return fn;
  }

 private:
  void* handle_ = nullptr;
  std::string name_;
};

}  // namespace scaffold::energy::detail
