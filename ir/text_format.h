// The twinpipe text form of a schedule: a header line, then one line per
// device with torch-style tokens, so a torch CSV row and a device line read
// alike. Round trip: PrintText(ParseText(PrintText(s))) == PrintText(s).
//
//   # twinpipe schedule v1
//   stages=2 microbatches=2 devices=2 replicas=1 placement=0,1
//   0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B1 0B1 0RECV_B0 0B0 STEP
//   1RECV_F0 1F0 1RECV_F1 1F1 1B1 1SEND_B1 1B0 1SEND_B0 STEP
//
// Comm tokens may carry bytes ("0SEND_F1@4096"); peers follow from the
// placement. An empty program is written "-". Without a header line the
// stages, micro-batches and placement are inferred from the tokens (a stage
// lives on the device whose line first names it).
#pragma once

#include <string>
#include <string_view>

#include "ir/result.h"
#include "ir/schedule.h"

namespace twinpipe::ir {

std::string PrintText(const Schedule& schedule);

// `source` names the input in messages ("pipe.txt:3: ...").
Result<Schedule> ParseText(std::string_view text, std::string_view source);

// Parses one token ("2F0", "0SEND_F1@4096", "STEP"); stage and micro-batch
// are checked for form only. Shared by the text and torch CSV readers.
Result<Op> ParseToken(std::string_view token);

// Sets each comm op's peer from the placement (-1 where the neighbour stage
// does not exist; the verifier reports it).
void AssignPeers(Schedule& schedule);

// Infers K, M and placement from the ops (K = max stage + 1, M = max
// micro-batch + 1, a stage on the device that first holds one of its ops,
// compute ops before comm ops). Fails naming a stage that has no ops.
Result<void> InferShape(Schedule& schedule);

// The most stages, micro-batches or devices a schedule file may declare.
inline constexpr int32_t kMaxShape = 1 << 24;

}  // namespace twinpipe::ir
