#include "search/front.h"

#include <algorithm>
#include <limits>

namespace twinpipe::search {

void Front::Remember(double throughput, double peak_bytes) {
  if (Dominates(throughput, peak_bytes)) return;
  std::erase_if(points_, [&](const auto& q) { return throughput >= q.first && peak_bytes <= q.second; });
  points_.emplace_back(throughput, peak_bytes);
}

bool Front::Dominates(double throughput, double peak_bytes) const {
  for (const auto& [t, p] : points_) {
    if (t >= throughput && p <= peak_bytes) return true;
  }
  return false;
}

double Front::LeastPeakAtLeast(double throughput) const {
  double least = std::numeric_limits<double>::infinity();
  for (const auto& [t, p] : points_) {
    if (t >= throughput) least = std::min(least, p);
  }
  return least;
}

std::vector<Candidate> ParetoFront(std::vector<Candidate> fits) {
  std::stable_sort(fits.begin(), fits.end(), [](const Candidate& a, const Candidate& b) {
    if (a.throughput != b.throughput) return a.throughput > b.throughput;
    return a.peak_memory_bytes < b.peak_memory_bytes;
  });
  std::vector<Candidate> front;
  for (auto& c : fits) {
    if (front.empty() || c.peak_memory_bytes < front.back().peak_memory_bytes) front.push_back(std::move(c));
  }
  return front;
}

}  // namespace twinpipe::search
