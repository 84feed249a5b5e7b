// twinpipe: plan, predict and run GPipe-style pipeline-parallel training.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/process.h"
#include "cli/fail.h"

int main(int argc, char** argv) {
  twinpipe::cli::KeepFreedMemory();
  CLI::App app{"twinpipe: plan, predict and run GPipe-style pipeline-parallel training"};
  app.require_subcommand(1);
  int exit_code = twinpipe::cli::kExitOk;
  twinpipe::cli::AddSchedule(app, exit_code);
  twinpipe::cli::AddVerify(app, exit_code);
  twinpipe::cli::AddPartition(app, exit_code);
  twinpipe::cli::AddSimulate(app, exit_code);
  twinpipe::cli::AddExecute(app, exit_code);
  twinpipe::cli::AddCompare(app, exit_code);
  twinpipe::cli::AddRender(app, exit_code);
  twinpipe::cli::AddCalibrate(app, exit_code);
  twinpipe::cli::AddValidate(app, exit_code);
  twinpipe::cli::AddSearch(app, exit_code);
  twinpipe::cli::AddExport(app, exit_code);
  twinpipe::cli::AddImportTrace(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return twinpipe::cli::kExitBadInput;
  }
  return exit_code;
}
