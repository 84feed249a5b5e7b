// Lower bounds on a grid point's step time and peak memory, taken without
// simulating (and mostly without building comm or a plan), so that the
// search simulates only the points a fitting one does not already beat:
// a cheap bound for every point, and a finer bound on the peak for the
// points fast enough for it to matter. Held against the simulation in the
// tests (SearchOptions::check_bounds).
//
//   LowerBounds lower(evaluator, /*check=*/false);
//   Bounds b = lower.Of(point);   // b.most_throughput, b.least_peak, b.over_cap
#pragma once

#include <map>

#include "search/evaluation.h"
#include "search/search.h"

namespace twinpipe::search {

// A point's lower bounds (or why it cannot be run at all).
struct Bounds {
  bool runs = false;          // its shape builds and its partition exists
  bool over_cap = false;      // even the lower bound on memory is over the cap
  double most_throughput = 0; // from the lower bound on the step time
  double least_peak = 0;
  bool over_cap_whatever_the_cut = false;  // over the cap by the totals alone (then no partition is made)
};

class LowerBounds {
 public:
  // `check` (SearchOptions::check_bounds): every bound is taken in full.
  LowerBounds(Evaluator& evaluator, bool check) : evaluator_(evaluator), check_(check) {}

  // Lower bounds on the step time and the peak, without building comm or
  // simulating: device d starts no earlier than micro-batch 0's forward
  // (and its transfers) reaches its first stage, is then busy for its ops'
  // summed time, and then takes its optimizer step or, when its last op made
  // the input gradient of stage s, waits for the stages below s to pass that
  // gradient down, whichever is longer; it holds its static bytes plus,
  // on each stage, the stash of its most in-flight micro-batches while the
  // last one's forward runs.
  Bounds Of(const Candidate& c);

  // A lower bound on the peak of the point's plan, finer than Of's (and
  // dearer: a fraction of a plan), by plan; infinity where no plan exists.
  // `auto`, from the start of each variant of its greedy builder
  // (ir::AutoLeastPeak: half its ops, stopping at `enough`): Of
  // gives it one micro-batch in flight, far below what the builder holds as
  // it plans to the cap. Other schedules, from their compute stream's own
  // memory walked in program order (Of counts only the stash at its most
  // in flight, not the I-to-W bytes a zero-bubble schedule holds, nor both
  // at once).
  double Peak(const Candidate& c, double enough);

 private:
  // Whatever the cut, the fullest device holds at least the mean over the
  // devices of what they hold for good (every parameter's bytes, the
  // optimizer's included, sharded over the gradient's ranks where the point
  // shards them) and of the activation a forward of one of its
  // stages allocates while it runs (one micro-batch's; a device with v
  // stages, at least 1/v of theirs): a point over the cap by that needs no
  // partition, shape or cost table (Use(c) first).
  bool OverCapWhateverTheCut(const Candidate& c) const;

  Evaluator& evaluator_;
  const bool check_;
  std::map<PlanKey, double> peak_bounds_;  // Peak's, by plan
};

}  // namespace twinpipe::search
