// Transfer time over a link (alpha-beta): latency + bytes / bandwidth; a
// host-staged transfer is a device-to-host copy then a host-to-device copy.
//
//   double t = TransferTime(*FindLink("pcie3-host-staged"), 1 << 20);
#pragma once

#include "cost_models/catalogue.h"

namespace twinpipe::cost {

// Seconds to move `bytes` one way over an idle link.
double TransferTime(const Link& link, double bytes);

}  // namespace twinpipe::cost
