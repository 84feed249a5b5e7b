#include "ir/op.h"

#include <array>

#include <fmt/format.h>

namespace twinpipe::ir {
namespace {
constexpr std::array<std::string_view, kNumOpKinds> kNames = {
    "F", "B", "I", "W", "R", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "ALLREDUCE", "STEP"};
}  // namespace

std::string_view OpKindName(OpKind kind) { return kNames[static_cast<int>(kind)]; }

std::optional<OpKind> OpKindFromName(std::string_view name) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    if (kNames[i] == name) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

std::string OpToken(const Op& op) {
  if (op.kind == OpKind::kStep) return "STEP";
  std::string token = HasMicroBatch(op.kind)
                          ? fmt::format("{}{}{}", op.stage, OpKindName(op.kind), op.micro_batch)
                          : fmt::format("{}{}", op.stage, OpKindName(op.kind));
  if (op.bytes != 0) token += fmt::format("@{}", op.bytes);
  return token;
}

}  // namespace twinpipe::ir
