// Build identity, baked in at build time (cmake/generate_version.cmake runs on every build, so
// the commit is never stale): recorded in every output that users compare.
#pragma once

namespace scaffold::core {

const char* version();     // project version, e.g. "0.1.0"
const char* git_commit();  // short commit, "-dirty" when the tree had changes, or "unknown"
const char* torch_version_built_with();

}  // namespace scaffold::core
