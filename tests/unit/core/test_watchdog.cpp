// core::Watchdog: fires once after the timeout without beats, never while beats keep coming,
// never when disabled, and a destroyed watchdog does not fire.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/watchdog.hpp"

namespace scaffold::core {
namespace {

using namespace std::chrono_literals;

TEST(Watchdog, FiresOnceAfterTheTimeoutWithoutBeats) {
  std::atomic<int> fired{0};
  std::atomic<double> idle{0.0};
  Watchdog dog(0.1, [&](double idle_s) {
    idle = idle_s;
    ++fired;
  });
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(fired.load(), 1);
  EXPECT_GE(idle.load(), 0.1);
}

TEST(Watchdog, BeatsKeepItQuiet) {
  std::atomic<int> fired{0};
  {
    Watchdog dog(0.2, [&](double) { ++fired; });
    for (int i = 0; i < 12; ++i) {  // 0.6 s in all, a beat every 0.05 s
      std::this_thread::sleep_for(50ms);
      dog.beat();
    }
  }
  EXPECT_EQ(fired.load(), 0);
}

TEST(Watchdog, DisabledOrDestroyedNeverFires) {
  std::atomic<int> fired{0};
  {
    Watchdog off(0.0, [&](double) { ++fired; });
    EXPECT_FALSE(off.enabled());
    Watchdog long_one(30.0, [&](double) { ++fired; });
    EXPECT_TRUE(long_one.enabled());
  }  // destroyed long before its timeout: joins at once
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(fired.load(), 0);
}

}  // namespace
}  // namespace scaffold::core
