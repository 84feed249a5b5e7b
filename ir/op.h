// One operation of the schedule IR: what a device does, for which stage and
// micro-batch, and (comm ops) with which peer and how many bytes.
//
//   Op f{.kind = OpKind::kForward, .device = 0, .stage = 0, .micro_batch = 3};
//   OpToken(f) == "0F3"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace twinpipe::ir {

enum class OpKind : uint8_t {
  kForward,         // F: forward of (stage, micro_batch)
  kBackward,        // B: input and weight gradients
  kBackwardInput,   // I: input gradient only (zero-bubble split)
  kBackwardWeight,  // W: weight gradient only, after its I
  kRecompute,       // R: re-run forward from the stored boundary input
  kSendF,           // SEND_F: activation of stage to stage+1's device
  kRecvF,           // RECV_F: activation of stage-1 into stage's device
  kSendB,           // SEND_B: input gradient of stage to stage-1's device
  kRecvB,           // RECV_B: gradient from stage+1's device into stage
  kAllReduce,       // ALLREDUCE: data-parallel gradient reduction of a stage
  kStep,            // STEP: optimizer update, once per mini-batch per device
};
inline constexpr int kNumOpKinds = 11;

// Text name as torch.distributed.pipelining writes it ("F", "SEND_F", ...).
std::string_view OpKindName(OpKind kind);
// Inverse of OpKindName; nullopt for an unknown name.
std::optional<OpKind> OpKindFromName(std::string_view name);

inline bool IsComm(OpKind k) {
  return k == OpKind::kSendF || k == OpKind::kRecvF || k == OpKind::kSendB ||
         k == OpKind::kRecvB;
}
inline bool IsSend(OpKind k) { return k == OpKind::kSendF || k == OpKind::kSendB; }
inline bool IsRecv(OpKind k) { return k == OpKind::kRecvF || k == OpKind::kRecvB; }
// Ops that compute an input gradient (the ones a SEND_B follows).
inline bool IsInputBackward(OpKind k) {
  return k == OpKind::kBackward || k == OpKind::kBackwardInput;
}
// Ops that run on a device's compute stream: F, B, I, W, R and STEP.
inline bool IsCompute(OpKind k) {
  return k == OpKind::kForward || k == OpKind::kBackward || k == OpKind::kBackwardInput ||
         k == OpKind::kBackwardWeight || k == OpKind::kRecompute || k == OpKind::kStep;
}
// Ops that need a micro-batch index (all but ALLREDUCE and STEP).
inline bool HasMicroBatch(OpKind k) { return k != OpKind::kAllReduce && k != OpKind::kStep; }

struct Op {
  int32_t id = -1;           // unique in its schedule; see Renumber()
  OpKind kind = OpKind::kForward;
  int32_t device = 0;        // device whose program holds the op
  int32_t stage = -1;        // global stage index; -1 for STEP
  int32_t micro_batch = -1;  // -1 for ALLREDUCE and STEP
  int32_t peer = -1;         // comm ops: the other device; else -1
  int64_t bytes = 0;         // comm and all-reduce ops: payload bytes; 0 = unknown
  // An F that runs overlapped with its device's next input backward (B or
  // I), as one of torch's OVERLAP_F_B actions or a DualPipe pair: each op's
  // communication (the expert all-to-alls) hides behind the other's compute.
  // Written "0F3+" in the text form, "paired": true in JSON.
  bool paired = false;

  bool operator==(const Op&) const = default;
};

// The op's text token: "2F0", "0SEND_F1", "3ALLREDUCE", "STEP"; comm and
// all-reduce ops with known bytes append "@bytes" ("0SEND_F1@4096").
std::string OpToken(const Op& op);

}  // namespace twinpipe::ir
