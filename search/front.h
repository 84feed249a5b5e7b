// The Pareto front of throughput against peak memory: while the search runs,
// the fitting points found so far (as (throughput, peak) pairs, none
// dominating another), which prune the points whose bounds they beat; at its
// end, the fitting candidates ranked into the front it reports.
//
//   Front front;  front.Remember(c.throughput, c.peak_memory_bytes);
//   if (front.Dominates(bound.most_throughput, bound.least_peak)) ... skip the point ...
#pragma once

#include <utility>
#include <vector>

#include "search/search.h"

namespace twinpipe::search {

class Front {
 public:
  // A fitting point: kept unless a remembered one dominates it; the ones it
  // dominates are dropped.
  void Remember(double throughput, double peak_bytes);
  // Whether a remembered point is at least `throughput` fast (samples/s) and
  // at most `peak_bytes` full: a point whose bounds these are cannot be best
  // or on the front.
  bool Dominates(double throughput, double peak_bytes) const;
  // The least peak of a remembered point at least `throughput` fast
  // (infinity: none yet): a point whose peak is no less cannot be best or
  // on the front.
  double LeastPeakAtLeast(double throughput) const;

 private:
  std::vector<std::pair<double, double>> points_;  // (throughput, peak bytes)
};

// The candidates not beaten on both throughput and peak memory by any other,
// fastest first (of equal throughputs, the least peak; then the earlier).
std::vector<Candidate> ParetoFront(std::vector<Candidate> fits);

}  // namespace twinpipe::search
