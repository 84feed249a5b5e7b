#include "cost_models/model.h"

#include <algorithm>
#include <cmath>

namespace twinpipe::cost {

bool RunsFor(const Kernel& kn, double samples) {
  if (kn.variant == Kernel::Variant::kAlways) return true;
  const bool whole = std::fmod(samples * kn.batch, kn.quantum) == 0;
  return whole == (kn.variant == Kernel::Variant::kFused);
}

double SharedWeightCopies(const std::vector<Layer>& layers, int first, int last) {
  double copies = 0;
  for (int i = first; i <= last; ++i) {
    if (HoldsSharedCopy(i, layers[i].shares_weights_of, first, last)) copies += layers[i].shared_params;
  }
  return copies;
}

bool SameCosts(const Layer& a, const Layer& b) {
  auto same = [](const Kernel& x, const Kernel& y) {  // the name is for reports only
    return x.pass == y.pass && x.gemm == y.gemm && x.collective == y.collective && x.group == y.group && x.m == y.m &&
           x.n == y.n && x.k == y.k && x.batch == y.batch && x.scaled == y.scaled && x.bytes == y.bytes &&
           x.variant == y.variant && x.quantum == y.quantum && x.launches == y.launches &&
           x.framework_ops == y.framework_ops && x.fp8 == y.fp8 && x.over == y.over && x.fixed_bytes == y.fixed_bytes &&
           x.overlaps == y.overlaps && x.exposed == y.exposed && x.accumulate_bytes == y.accumulate_bytes;
  };
  return a.fwd_flops == b.fwd_flops && a.bwd_input_flops == b.bwd_input_flops &&
         a.bwd_weight_flops == b.bwd_weight_flops && a.params == b.params && a.out_bytes == b.out_bytes &&
         a.stash_bytes == b.stash_bytes && a.rematerialized == b.rematerialized &&
         a.input_replicas == b.input_replicas && a.kind == b.kind &&
         (a.kernels.SharedWith(b.kernels) ||
          std::equal(a.kernels.begin(), a.kernels.end(), b.kernels.begin(), b.kernels.end(), same));
}

int RematerializedEnd(const Model& model, int first, int last) {
  int end = first;
  for (int i = first; i <= last; ++i) {
    if (model.layers[i].rematerialized) end = i + 1;
  }
  return end;
}

std::vector<double> CutBytes(const Model& model) {
  const int L = static_cast<int>(model.layers.size());
  std::vector<double> cut(std::max(0, L - 1), 0.0);
  if (model.edges.empty()) {
    for (int j = 0; j + 1 < L; ++j) cut[j] = model.layers[j].out_bytes;
    return cut;
  }
  // A tensor of layer u is live across cuts u..last_consumer(u)-1.
  std::vector<int> last(L, -1);
  for (const auto& [from, to] : model.edges) last[from] = std::max(last[from], to);
  std::vector<double> delta(L + 1, 0.0);
  for (int u = 0; u < L; ++u) {
    if (last[u] > u) {
      delta[u] += model.layers[u].out_bytes;
      delta[last[u]] -= model.layers[u].out_bytes;
    }
  }
  double live = 0;
  for (int j = 0; j + 1 < L; ++j) {
    live += delta[j];
    cut[j] = live;
  }
  return cut;
}

}  // namespace twinpipe::cost
