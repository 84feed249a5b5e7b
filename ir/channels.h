// The transfers a schedule implies, once, for the verifier and both of the
// simulator's engines: a channel per ordered device pair that carries
// anything, holding its sends (in the sender's program order) and its
// receives (in the receiver's). The k-th send pairs with the k-th receive:
// NCCL's per-peer FIFO, which the verifier checks and the engines rely on.
// Channels are numbered by first send, device by device, then pairs that
// only receive, the same way (the order the simulator lists links in).
// Ops are named by id: the schedule's ids must be canonical (the verifier
// checks that before it builds this).
//
//   Channels ch(schedule);
//   for (const Channel& c : ch) ... c.sends[k] pairs with c.recvs[k] ...
//   int32_t i = ch.Find(src, dst);   // -1: nothing between them
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ir/schedule.h"

namespace twinpipe::ir {

struct Channel {
  int32_t src = 0, dst = 0;
  std::vector<int32_t> sends;  // op ids on src, ascending (program order)
  std::vector<int32_t> recvs;  // op ids on dst, ascending
};

class Channels {
 public:
  // Peers in range and ids canonical (the verifier checks both first).
  explicit Channels(const Schedule& s);

  int32_t Find(int32_t src, int32_t dst) const;
  size_t size() const { return channels_.size(); }
  const Channel& operator[](size_t i) const { return channels_[i]; }
  std::vector<Channel>::const_iterator begin() const { return channels_.begin(); }
  std::vector<Channel>::const_iterator end() const { return channels_.end(); }

 private:
  int32_t Add(int32_t src, int32_t dst);
  std::vector<Channel> channels_;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> of_;  // per src: (dst, channel); few per device
};

}  // namespace twinpipe::ir
