// --stop-signals (suite/stop_signals) and the stop request it installs (core/stop): names and
// numbers parse, anything else is refused by name, and one request delivered twice in quick
// succession (Slurm signals every process of a step; scaffold power forwards it too) stops the
// run once instead of killing it.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/stop.hpp"
#include "suite/stop_signals.hpp"

namespace scaffold::suite {
namespace {

TEST(StopSignals, NamesWithOrWithoutSigAndNumbersParse) {
  EXPECT_EQ(parse_stop_signals({"USR2", "TERM"}), (std::vector<int>{SIGUSR2, SIGTERM}));
  EXPECT_EQ(parse_stop_signals({"sigusr1", "12", "USR2"}), (std::vector<int>{SIGUSR1, SIGUSR2}));
  EXPECT_EQ(parse_stop_signals(kDefaultStopSignals), (std::vector<int>{SIGUSR2, SIGTERM}));
}

TEST(StopSignals, OtherSignalsAndEmptyListsAreRefusedWithTheChoices) {
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"KILL"}, {"9"}, {"USR3"}, {""}, std::vector<std::string>{}}) {
    try {
      parse_stop_signals(bad);
      FAIL() << "accepted " << (bad.empty() ? "nothing" : bad.front());
    } catch (const core::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("USR1, USR2, TERM"), std::string::npos) << e.what();
    }
  }
}

TEST(StopSignals, ARepeatWithinTwoSecondsIsTheSameRequest) {
  core::reset_stop();
  install_stop_signals({SIGUSR1});
  std::raise(SIGUSR1);
  std::raise(SIGUSR1);  // a second copy at once: still running, one request
  EXPECT_TRUE(core::stop_requested());
  EXPECT_EQ(core::stop_signal(), SIGUSR1);
  std::signal(SIGUSR1, SIG_DFL);
  core::reset_stop();
}

}  // namespace
}  // namespace scaffold::suite
