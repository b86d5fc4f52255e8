// What every two-kernel probe's measurement must satisfy (kernels/probe_verdicts.hpp): the two
// timings in order, each positive, and the verdict the times give with the probe's margin (the
// candidate where it is at least 1 / margin times faster, the reference otherwise).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kernels/probe_verdicts.hpp"

namespace scaffold::model::test {

inline void expect_decided_by_times(const kernels::ProbeMeasurement& p,
                                    const std::string& candidate, const std::string& reference,
                                    double margin) {
  ASSERT_EQ(p.result.timings.size(), 2u) << p.line();
  const kernels::ProbeTiming &first = p.result.timings[0], &second = p.result.timings[1];
  EXPECT_EQ(first.kernel, candidate) << p.line();
  EXPECT_EQ(second.kernel, reference) << p.line();
  EXPECT_GT(first.ms, 0.0) << p.line();
  EXPECT_GT(second.ms, 0.0) << p.line();
  EXPECT_EQ(p.result.verdict, first.ms < margin * second.ms ? candidate : reference) << p.line();
}

}  // namespace scaffold::model::test
