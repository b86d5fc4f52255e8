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
    return std::string("onednn");
  };
  EXPECT_EQ(store.choose("gemm 4x8 by 16x8", probe), "onednn");
  EXPECT_EQ(store.choose("gemm 4x8 by 16x8", [] { return std::string("libtorch"); }), "onednn");
  EXPECT_EQ(store.choose("gemm 2x8 by 16x8", [] { return std::string("libtorch"); }), "libtorch");
  EXPECT_EQ(probes, 1);
  EXPECT_TRUE(store.restored_lines().empty());
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
        return std::string("winograd");
      });
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(probes.load(), 1);
  for (const std::string& s : seen) EXPECT_EQ(s, "winograd");
}

TEST(ProbeVerdicts, SerializedVerdictsRestoreIntoAnotherStoreAndReplaceItsOwn) {
  ProbeVerdicts first;
  first.choose("spectral b", [] { return std::string("fft"); });
  first.choose("gemm a", [] { return std::string("onednn"); });
  const std::string text = first.serialize();
  EXPECT_EQ(text, "gemm a\tonednn\nspectral b\tfft\n");  // sorted by key, one line each

  ProbeVerdicts second;  // a new process, which had probed one shape already, differently
  second.choose("gemm a", [] { return std::string("libtorch"); });
  EXPECT_EQ(second.restore(text, "checkpoint_last"), 2u);
  int probes = 0;
  const auto probe = [&] {
    ++probes;
    return std::string("probed");
  };
  EXPECT_EQ(second.choose("gemm a", probe), "onednn");
  EXPECT_EQ(second.choose("spectral b", probe), "fft");
  EXPECT_EQ(second.choose("new shape", probe), "probed");
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(second.restored_lines(),
            (std::vector<std::string>{"gemm a -> onednn (restored from the checkpoint)",
                                      "spectral b -> fft (restored from the checkpoint)"}));
  EXPECT_EQ(second.restore("", "empty"), 0u);
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
  EXPECT_THROW(store.choose("k", [] { return std::string("two\nlines"); }), core::Error);
  EXPECT_THROW(store.choose("k\tey", [] { return std::string("v"); }), core::Error);
  EXPECT_EQ(store.serialize(), "");
}

}  // namespace
}  // namespace scaffold::kernels
