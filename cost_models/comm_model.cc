#include "cost_models/comm_model.h"

namespace twinpipe::cost {

double TransferTime(const Link& link, double bytes) {
  if (bytes <= 0) return 0;
  const double one_copy = link.latency_s + bytes / link.bandwidth;
  return link.host_staged ? 2 * one_copy : one_copy;
}

}  // namespace twinpipe::cost
