// The JSON form of a schedule, for tools: every op with its id, kind, device,
// stage, micro-batch, peer and bytes. Round trip:
// PrintJson(ParseJson(PrintJson(s))) == PrintJson(s).
//
//   {"format": "twinpipe-schedule", "version": 1, "stages": 2, ...,
//    "programs": [[{"id": 0, "kind": "F", "device": 0, "stage": 0, "microbatch": 0}, ...]]}
#pragma once

#include <string>
#include <string_view>

#include "ir/result.h"
#include "ir/schedule.h"

namespace twinpipe::ir {

std::string PrintJson(const Schedule& schedule);

// Errors name `source` and the JSON path ("s.json: /programs/1/4/kind: ...").
Result<Schedule> ParseJson(std::string_view text, std::string_view source);

}  // namespace twinpipe::ir
