// The subcommands of `twinpipe`: each Add* registers one on the app and sets
// `exit_code` when it runs (0 ok, 1 runtime failure, 2 bad input).
//
//   CLI::App app; int exit_code = 0;
//   AddSchedule(app, exit_code); AddVerify(app, exit_code);
#pragma once

#include <CLI/CLI.hpp>

namespace twinpipe::cli {

void AddSchedule(CLI::App& app, int& exit_code);
void AddVerify(CLI::App& app, int& exit_code);
void AddPartition(CLI::App& app, int& exit_code);
void AddSimulate(CLI::App& app, int& exit_code);
void AddExecute(CLI::App& app, int& exit_code);
void AddCompare(CLI::App& app, int& exit_code);
void AddRender(CLI::App& app, int& exit_code);
void AddCalibrate(CLI::App& app, int& exit_code);
void AddSearch(CLI::App& app, int& exit_code);
void AddValidate(CLI::App& app, int& exit_code);
void AddExport(CLI::App& app, int& exit_code);
void AddImportTrace(CLI::App& app, int& exit_code);

}  // namespace twinpipe::cli
