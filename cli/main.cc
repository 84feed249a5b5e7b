// twinpipe: plan, predict and run GPipe-style pipeline-parallel training.
#include <new>
#include <stdexcept>
#include <string_view>

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
  // A legal but enormous config (millions of layers or micro-batches) can
  // ask for more memory than the machine has: a runtime failure.
  auto out_of_memory = [&app](std::string_view why) {
    const auto used = app.get_subcommands();
    fmt::print(stderr, "twinpipe{}: out of memory: {}\n", used.empty() ? "" : " " + used.front()->get_name(), why);
    return twinpipe::cli::kExitRuntime;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return twinpipe::cli::kExitBadInput;
  } catch (const std::bad_alloc&) {
    return out_of_memory("the plan needs more memory than this machine can give");
  } catch (const std::length_error&) {
    return out_of_memory("the plan is larger than a container can hold");
  }
  return exit_code;
}
