// Shared by the MPI test executables: the world communicator for tests, and a main that runs
// gtest on every rank (only rank 0 prints) and fails the process if any rank failed.
#pragma once

#include "dist/communicator.hpp"

namespace scaffold::test {

// The world communicator, valid while the tests run.
dist::Communicator& world();

}  // namespace scaffold::test
