#include "ir/channels.h"

namespace twinpipe::ir {

Channels::Channels(const Schedule& s) : of_(s.programs.size()) {
  for (int32_t pass = 0; pass < 2; ++pass) {
    for (int32_t d = 0; d < static_cast<int32_t>(s.programs.size()); ++d) {
      for (const Op& op : s.programs[d]) {
        if (pass == 0 && IsSend(op.kind)) channels_[Add(d, op.peer)].sends.push_back(op.id);
        if (pass == 1 && IsRecv(op.kind)) channels_[Add(op.peer, d)].recvs.push_back(op.id);
      }
    }
  }
}

int32_t Channels::Find(int32_t src, int32_t dst) const {
  for (const auto& [peer, id] : of_[src]) {
    if (peer == dst) return id;
  }
  return -1;
}

int32_t Channels::Add(int32_t src, int32_t dst) {
  if (const int32_t id = Find(src, dst); id >= 0) return id;
  const auto id = static_cast<int32_t>(channels_.size());
  channels_.push_back(Channel{src, dst, {}, {}});
  of_[src].emplace_back(dst, id);
  return id;
}

}  // namespace twinpipe::ir
