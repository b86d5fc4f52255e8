// The translation unit that builds the precompiled LibTorch headers (cmake/ScaffoldTarget.cmake,
// scaffold_torch_pch); it has no code of its own.
