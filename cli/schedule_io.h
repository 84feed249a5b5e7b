// The files the commands read and write (api/schedule_io.h), by their names
// in the command line's namespace.
#pragma once

#include "api/schedule_io.h"
#include "cli/fail.h"

namespace twinpipe::cli {

using api::LoadedSchedule;
using api::LoadSchedule;
using api::LoadTrace;
using api::ReadFile;
using api::WriteOutput;

}  // namespace twinpipe::cli
