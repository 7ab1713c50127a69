// The held team of core/spin_team.h: parallel_for inside it covers every index once, across
// the helpers; nested calls run inline; errors from chunks and from the body come back.
#include <gtest/gtest.h>

#include <omp.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <set>
#include <stdexcept>
#include <vector>

#include "core/parallel.h"
#include "core/spin_team.h"

namespace {

using mminfer::parallel_for;
using mminfer::run_with_spin_team;

TEST(SpinTeam, ParallelForCoversEachIndexOnceOverManyCalls) {
  mminfer::ThreadScope scope(2);
  std::vector<int> hits(1000, 0);
  std::set<int> threads_seen;
  std::atomic<int> calls{0};
  run_with_spin_team(2, [&] {
    EXPECT_EQ(mminfer::detail::spin_team_size(), 2);
    for (int round = 0; round < 500; ++round)
      parallel_for(static_cast<int64_t>(hits.size()), 1, [&](int64_t b, int64_t e) {
        calls.fetch_add(1);
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
#pragma omp critical
        threads_seen.insert(omp_get_thread_num());
      });
  });
  for (int h : hits) ASSERT_EQ(h, 500);
  EXPECT_EQ(calls.load(), 1000);  // two chunks a call
  EXPECT_EQ(threads_seen, (std::set<int>{0, 1}));
  EXPECT_FALSE(mminfer::detail::spin_team_here());  // the team ends with the call
}

TEST(SpinTeam, UnevenPacesStillCoverEachItemOnce) {
  // Each item costs the leader twice what it costs a helper, so the split moves (how far depends
  // on the host's load); every item must still be covered once.
  mminfer::ThreadScope scope(2);
  auto busy = [](std::chrono::nanoseconds d) {
    for (auto until = std::chrono::steady_clock::now() + d; std::chrono::steady_clock::now() < until;) {
    }
  };
  constexpr int kItems = 100, kRounds = 200;
  std::vector<int> hits(kItems, 0);
  run_with_spin_team(2, [&] {
    for (int round = 0; round < kRounds; ++round)
      parallel_for(kItems, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
        busy(std::chrono::microseconds(omp_get_thread_num() == 0 ? 2 : 1) * (e - b));
      });
  });
  for (int h : hits) ASSERT_EQ(h, kRounds);
}

TEST(SpinTeam, LeaderShareMovesTowardEvenFinishes) {
  using mminfer::detail::next_leader_share;
  // Equal paces keep an even split.
  EXPECT_DOUBLE_EQ(next_leader_share(0.5, 2, 50, 100, 1000.0, 1000.0), 0.5);
  // A leader twice as slow: the balanced share is 1/3, and each call moves a fifth of the way.
  double share = 0.5;
  share = next_leader_share(share, 2, 50, 100, 2000.0, 1000.0);
  EXPECT_NEAR(share, 0.8 * 0.5 + 0.2 / 3, 1e-12);
  for (int i = 0; i < 100; ++i) {
    const int64_t lead = std::llround(share * 100);
    share = next_leader_share(share, 2, lead, 100, 2.0 * static_cast<double>(lead), static_cast<double>(100 - lead));
  }
  EXPECT_NEAR(share, 1.0 / 3, 0.01);
  // A faster leader with two helpers (their part counted together), bounded to 1.5 / size.
  EXPECT_DOUBLE_EQ(next_leader_share(0.45, 3, 40, 100, 100.0, 1000.0), 0.5);
  // No timing, or a split that gave one side nothing, changes nothing.
  EXPECT_EQ(next_leader_share(0.4, 2, 50, 100, 0.0, 1000.0), 0.4);
  EXPECT_EQ(next_leader_share(0.4, 2, 100, 100, 10.0, 1000.0), 0.4);
}

TEST(SpinTeam, FewerChunksThanThreadsRunEachChunkOnce) {
  mminfer::ThreadScope scope(3);  // more threads than cores here: the helpers spin with pause
  std::vector<int> hits(2, 0);
  run_with_spin_team(3, [&] {
    for (int round = 0; round < 200; ++round)
      parallel_for(2, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      });
  });
  EXPECT_EQ(hits, (std::vector<int>{200, 200}));
}

TEST(SpinTeam, NestedCallsRunInlineAndSmallWorkStaysOnTheLeader) {
  mminfer::ThreadScope scope(2);
  std::atomic<int> inner_chunks{0}, small_chunks{0};
  run_with_spin_team(2, [&] {
    parallel_for(4, 1, [&](int64_t, int64_t) {
      parallel_for(100, 1, [&](int64_t b, int64_t e) {
        EXPECT_EQ(b, 0);
        EXPECT_EQ(e, 100);
        inner_chunks.fetch_add(1);
      });
    });
    parallel_for(3, 3, [&](int64_t b, int64_t e) {  // one grain: one chunk
      EXPECT_EQ(omp_get_thread_num(), 0);
      small_chunks.fetch_add(static_cast<int>(e - b));
    });
  });
  EXPECT_EQ(inner_chunks.load(), 2);
  EXPECT_EQ(small_chunks.load(), 3);
}

TEST(SpinTeam, ErrorsFromChunksAndFromTheBodyComeBack) {
  mminfer::ThreadScope scope(2);
  EXPECT_THROW(run_with_spin_team(2, [] {
                 parallel_for(10, 1, [](int64_t b, int64_t) {
                   if (b > 0) throw std::runtime_error("helper chunk");
                 });
               }),
               std::runtime_error);
  int after = 0;
  EXPECT_THROW(run_with_spin_team(2, [&] {
                 parallel_for(10, 1, [&](int64_t, int64_t e) { after += e == 10; });
                 throw std::invalid_argument("body");
               }),
               std::invalid_argument);
  EXPECT_EQ(after, 1);
  // A team still works after both.
  std::atomic<int64_t> sum{0};
  run_with_spin_team(2, [&] { parallel_for(10, 1, [&](int64_t b, int64_t e) { sum += e - b; }); });
  EXPECT_EQ(sum.load(), 10);
}

TEST(SpinTeam, OneThreadOrAnOpenRegionRunsTheBodyPlainly) {
  bool ran = false;
  run_with_spin_team(1, [&] {
    ran = true;
    EXPECT_FALSE(mminfer::detail::spin_team_here());
  });
  EXPECT_TRUE(ran);
  int inside = 0;
#pragma omp parallel num_threads(2)
  {
    run_with_spin_team(2, [&] {
      EXPECT_FALSE(mminfer::detail::spin_team_here());
#pragma omp atomic
      ++inside;
    });
  }
  EXPECT_EQ(inside, 2);
}

}  // namespace
