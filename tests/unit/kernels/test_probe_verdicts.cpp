// kernels::ProbeVerdicts: one probe per key however many threads ask, the stored text and its
// restore (replacing this process's verdicts, named in system.json's lines), and a damaged text
// refused whole, naming its source and line.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "kernels/probe_verdicts.hpp"

namespace scaffold::kernels {
namespace {

TEST(ProbeVerdicts, ProbesEachKeyOnceAndKeepsTheVerdict) {
  ProbeVerdicts store;
  int probes = 0;
  const auto probe = [&] {
    ++probes;
    return ProbeResult{"onednn", {{"onednn", 1.0}, {"libtorch", 2.5}}};
  };
  EXPECT_EQ(store.choose("gemm 4x8 by 16x8", probe), "onednn");
  EXPECT_EQ(store.choose("gemm 4x8 by 16x8", [] { return ProbeResult{"libtorch", {}}; }), "onednn");
  EXPECT_EQ(store.choose("gemm 2x8 by 16x8",
                         [] {
                           return ProbeResult{"libtorch", {}};
                         }),
            "libtorch");
  EXPECT_EQ(probes, 1);
  EXPECT_TRUE(store.restored_lines().empty());
  // One line per measurement, in the order they ran; a remembered verdict adds none.
  EXPECT_EQ(store.lines(), (std::vector<std::string>{
                               "gemm 4x8 by 16x8: onednn 1.00 ms, libtorch 2.50 ms -> onednn",
                               "gemm 2x8 by 16x8 -> libtorch"}));
  const std::vector<ProbeMeasurement> measured = store.measurements();
  ASSERT_EQ(measured.size(), 2u);
  EXPECT_EQ(measured[0].key, "gemm 4x8 by 16x8");
  EXPECT_EQ(measured[0].result.timings[1].kernel, "libtorch");
  EXPECT_EQ(measured[0].result.timings[1].ms, 2.5);
}

TEST(ProbeVerdicts, ThreadsAskingTheSameKeyWaitForOneProbe) {
  ProbeVerdicts store;
  std::atomic<int> probes{0};
  std::vector<std::thread> threads;
  std::vector<std::string> seen(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      seen[t] = store.choose("conv x", [&] {
        ++probes;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return ProbeResult{"winograd", {}};
      });
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(probes.load(), 1);
  for (const std::string& s : seen) EXPECT_EQ(s, "winograd");
}

TEST(ProbeVerdicts, SerializedVerdictsRestoreIntoAnotherStoreAndReplaceItsOwn) {
  ProbeVerdicts first;
  first.choose("spectral b", [] { return ProbeResult{"fft", {}}; });
  first.choose("gemm a", [] { return ProbeResult{"onednn", {}}; });
  const std::string text = first.serialize();
  EXPECT_EQ(text, "gemm a\tonednn\nspectral b\tfft\n");  // sorted by key, one line each

  ProbeVerdicts second;  // a new process, which had probed one shape already, differently
  second.choose("gemm a", [] { return ProbeResult{"libtorch", {}}; });
  EXPECT_EQ(second.restore(text, "checkpoint_last"), 2u);
  int probes = 0;
  const auto probe = [&] {
    ++probes;
    return ProbeResult{"probed", {}};
  };
  EXPECT_EQ(second.choose("gemm a", probe), "onednn");
  EXPECT_EQ(second.choose("spectral b", probe), "fft");
  EXPECT_EQ(second.choose("new shape", probe), "probed");
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(second.restored_lines(),
            (std::vector<std::string>{"gemm a -> onednn (restored from the checkpoint)",
                                      "spectral b -> fft (restored from the checkpoint)"}));
  EXPECT_EQ(second.restore("", "empty"), 0u);
  // system.json's lines: what this process measured (also the verdict the restore replaced), then
  // what it restored.
  EXPECT_EQ(second.lines(),
            (std::vector<std::string>{"gemm a -> libtorch", "new shape -> probed",
                                      "gemm a -> onednn (restored from the checkpoint)",
                                      "spectral b -> fft (restored from the checkpoint)"}));
}

TEST(ProbeVerdicts, ADamagedTextIsOneErrorNamingSourceAndLineAndRestoresNothing) {
  for (const std::string& bad :
       {std::string("gemm a\tonednn\nno tab here\n"), std::string("gemm a\tonednn\n\tonednn\n"),
        std::string("gemm a\tonednn\ngemm b\t\n")}) {
    ProbeVerdicts store;
    try {
      store.restore(bad, "/runs/x/checkpoint_last");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const core::Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("/runs/x/checkpoint_last: kernel verdict line 2 is '"), std::string::npos)
          << what;
      EXPECT_NE(what.find("expected '<probe and shape><TAB><kernel>'"), std::string::npos) << what;
    }
    EXPECT_EQ(store.serialize(), "") << "a damaged text restored part of itself";
    EXPECT_TRUE(store.restored_lines().empty());
  }
}

TEST(ProbeVerdicts, AVerdictThatCannotBeStoredIsAnError) {
  ProbeVerdicts store;
  EXPECT_THROW(store.choose("k", [] { return ProbeResult{"two\nlines", {}}; }), core::Error);
  EXPECT_THROW(store.choose("k\tey", [] { return ProbeResult{"v", {}}; }), core::Error);
  EXPECT_EQ(store.serialize(), "");
}

}  // namespace
}  // namespace scaffold::kernels
