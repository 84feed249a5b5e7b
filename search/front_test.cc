// The search's front, held against brute force over random points with many
// ties: what it answers equals what every point ever remembered answers, and
// ParetoFront keeps exactly the points nothing beats.
#include "search/front.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace twinpipe::search {
namespace {

TEST(Front, AnswersAsEveryPointRememberedWould) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::uniform_int_distribution<int> value(1, 8 + trial % 20);
    Front front;
    std::vector<std::pair<double, double>> all;  // (throughput, peak) of every point remembered
    const int points = 1 + trial % 40;
    for (int k = 0; k < points; ++k) {
      const double throughput = value(rng), peak = value(rng);
      front.Remember(throughput, peak);
      all.emplace_back(throughput, peak);
      for (int q = 0; q < 10; ++q) {
        const double t = value(rng), p = value(rng);
        bool dominated = false;
        double least = std::numeric_limits<double>::infinity();
        for (const auto& [at, ap] : all) {
          dominated |= at >= t && ap <= p;
          if (at >= t) least = std::min(least, ap);
        }
        ASSERT_EQ(front.Dominates(t, p), dominated) << "trial " << trial << " query (" << t << ", " << p << ")";
        ASSERT_EQ(front.LeastPeakAtLeast(t), least) << "trial " << trial << " query " << t;
      }
    }
  }
}

TEST(ParetoFront, KeepsThePointsNothingBeatsFastestFirst) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::uniform_int_distribution<int> value(1, 3 + trial % 12);
    std::vector<Candidate> fits(1 + trial % 30);
    for (size_t i = 0; i < fits.size(); ++i) {
      fits[i].throughput = value(rng);
      fits[i].peak_memory_bytes = value(rng);
      fits[i].micro_batches = static_cast<int>(i);  // the point's index, to name it
    }
    // Point i is kept unless another is at least as fast and at most as
    // full, and strictly better on one axis or an earlier duplicate.
    std::vector<int> kept;
    for (size_t i = 0; i < fits.size(); ++i) {
      bool beaten = false;
      for (size_t j = 0; j < fits.size(); ++j) {
        const Candidate &a = fits[j], &b = fits[i];
        if (j == i || a.throughput < b.throughput || a.peak_memory_bytes > b.peak_memory_bytes) continue;
        beaten |= a.throughput > b.throughput || a.peak_memory_bytes < b.peak_memory_bytes || j < i;
      }
      if (!beaten) kept.push_back(static_cast<int>(i));
    }
    std::sort(kept.begin(), kept.end(),
              [&](int a, int b) { return fits[a].throughput > fits[b].throughput; });

    const std::vector<Candidate> front = ParetoFront(fits);
    std::vector<int> got;
    for (const Candidate& c : front) got.push_back(c.micro_batches);
    ASSERT_EQ(got, kept) << "trial " << trial;
  }
}

}  // namespace
}  // namespace twinpipe::search
