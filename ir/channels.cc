#include "ir/channels.h"

#include <algorithm>

namespace twinpipe::ir {

Channels::Channels(const Schedule& s) : of_(s.programs.size()) {
  // One sweep, channels in the order met; then numbered by first send (ids
  // are canonical, so the smallest send id is the first met device by
  // device), receive-only ones after, by first receive.
  for (size_t d = 0; d < s.programs.size(); ++d) {
    const auto dev = static_cast<int32_t>(d);
    for (const Op& op : s.programs[d]) {
      if (IsSend(op.kind)) channels_[Add(dev, op.peer)].sends.push_back(op.id);
      if (IsRecv(op.kind)) channels_[Add(op.peer, dev)].recvs.push_back(op.id);
    }
  }
  auto key = [](const Channel& c) {
    return c.sends.empty() ? std::pair<int, int32_t>{1, c.recvs.front()} : std::pair<int, int32_t>{0, c.sends.front()};
  };
  std::sort(channels_.begin(), channels_.end(), [&](const Channel& a, const Channel& b) { return key(a) < key(b); });
  for (auto& peers : of_) peers.clear();
  for (size_t i = 0; i < channels_.size(); ++i) {
    of_[channels_[i].src].emplace_back(channels_[i].dst, static_cast<int32_t>(i));
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
