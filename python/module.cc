// _twinpipe: the C++ side of the `twinpipe` Python package (python/twinpipe/),
// a thin layer over api/ and the libraries: it converts arguments, calls the
// functions the `twinpipe` program calls, and turns an error into
// twinpipe.ConfigError / ScheduleError (bad input) or RuntimeFailure, with
// the message the program prints after "twinpipe <command>: ".
//
//   import twinpipe
//   result = twinpipe.simulate(twinpipe.load_config("examples/quickstart.json"))
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "api/commands.h"
#include "api/execution.h"
#include "api/plan_source.h"
#include "api/schedule_io.h"
#include "cost_models/calibration.h"
#include "cost_models/config.h"
#include "ir/json_format.h"
#include "twinpipe_commit.h"
#include "ir/text_format.h"
#include "ir/torch_csv.h"
#include "ir/verifier.h"
#include "search/search.h"
#include "simulate/runs.h"
#include "traces/svg_timeline.h"
#include "traces/trace.h"

namespace py = pybind11;

namespace twinpipe::python {
namespace {

// The class of twinpipe.errors that an error of `kind` raises: bad input is
// `bad_input` (ConfigError or ScheduleError), the rest RuntimeFailure.
[[noreturn]] void Raise(const Error& error, const char* bad_input) {
  const char* name = error.kind == ErrorKind::kBadInput ? bad_input : "RuntimeFailure";
  py::object type = py::module_::import("twinpipe.errors").attr(name);
  py::object instance = type(error.message);
  PyErr_SetObject(type.ptr(), instance.ptr());
  throw py::error_already_set();
}

template <typename T>
T Take(Result<T> result, const char* bad_input) {
  if (!result) Raise(result.error(), bad_input);
  return std::move(*result);
}

constexpr const char* kConfigError = "ConfigError";
constexpr const char* kScheduleError = "ScheduleError";

// A loaded config with the text it was read from (search writes its best
// candidate as that text changed).
struct LoadedConfig {
  cost::Config config;
  std::string text;
};

LoadedConfig LoadConfigText(const std::string& text, const std::string& source) {
  return {Take(cost::LoadConfig(text, source), kConfigError), text};
}

LoadedConfig LoadConfigPath(const std::string& path) {
  cost::Config config = Take(cost::LoadConfigFile(path), kConfigError);
  return {std::move(config), Take(api::ReadFile(path), kConfigError)};
}

std::optional<simulate::Calibration> CalibrationFor(const std::string& path, const cost::Config& config) {
  return Take(api::LoadCalibration(path, config), kConfigError);
}

py::list Programs(const ir::Schedule& s) {
  py::list devices;
  for (const auto& program : s.programs) {
    py::list ops;
    for (const ir::Op& op : program) {
      py::dict d;
      d["kind"] = std::string(ir::OpKindName(op.kind));
      d["device"] = op.device;
      d["stage"] = op.stage;
      d["micro_batch"] = op.micro_batch;
      d["peer"] = op.peer;
      d["bytes"] = op.bytes;
      d["token"] = ir::OpToken(op);
      ops.append(std::move(d));
    }
    devices.append(std::move(ops));
  }
  return devices;
}

std::string TorchCsv(const ir::Schedule& s, const std::string& torch_version, bool compute_only) {
  ir::TorchExportOptions options{.compute_only = compute_only};
  if (!torch_version.empty()) {
    Result<ir::TorchVersion> version = ir::ParseTorchVersion(torch_version);
    if (!version) Raise({"torch_version: " + version.error().message}, kScheduleError);
    options.version = *version;
  }
  Result<std::string> csv = ir::ExportTorchCsv(s, options);
  if (!csv) Raise({"to_torch_csv: " + csv.error().message, csv.error().kind}, kScheduleError);
  return *csv;
}

ir::Schedule ReadSchedule(const std::string& path, const std::string& format, const std::string& dialect) {
  return Take(api::LoadSchedule(path, format, dialect), kScheduleError).schedule;
}

ir::Schedule ParseSchedule(const std::string& text, const std::string& format, const std::string& source) {
  if (format == "text") return Take(ir::ParseText(text, source), kScheduleError);
  if (format == "json") return Take(ir::ParseJson(text, source), kScheduleError);
  if (format == "torch-csv") {
    return Take(ir::ImportTorchCsv(text, source, ir::TorchDialect::kAuto), kScheduleError).schedule;
  }
  Raise({"format '" + format + "': expected text, json or torch-csv"}, kScheduleError);
}

py::list Diagnostics(const ir::Schedule& s) {
  py::list out;
  for (const ir::Diagnostic& d : ir::Verify(s)) {
    py::dict x;
    x["device"] = d.device;
    x["position"] = d.position;
    x["message"] = d.message;
    x["text"] = ir::FormatDiagnostic(s, d);
    out.append(std::move(x));
  }
  return out;
}

api::Simulation Simulate(const LoadedConfig& loaded, const ir::Schedule* schedule, const api::PlanSource& source,
                         const std::string& calibration_path) {
  auto calibration = CalibrationFor(calibration_path, loaded.config);
  api::Simulation sim = Take(api::RunSimulation(loaded.config, source, calibration ? &*calibration : nullptr, schedule,
                                                "the schedule given"),
                             schedule || !source.schedule_file.empty() ? kScheduleError : kConfigError);
  // What a schedule file leaves of the config, as the program's warnings.
  for (const std::string& w : api::ScheduleFileWarnings(source, sim.config, sim.plan.schedule)) {
    if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), 1) != 0) throw py::error_already_set();
  }
  return sim;
}

std::vector<simulate::Run> Runs(const std::string& text, const std::string& source) {
  return Take(api::LoadRunsText(text, source), kConfigError);
}

std::string Validate(const std::string& runs_text, const std::string& source,
                     const std::vector<std::string>& calibration_paths) {
  const std::vector<simulate::Run> runs = Runs(runs_text, source);
  const std::vector<simulate::Calibration> loaded =
      Take(api::LoadRunCalibrations(calibration_paths, runs, source), kConfigError);
  std::vector<const simulate::Calibration*> cals;
  bool covered = false;
  for (const auto& c : loaded) {
    cals.push_back(&c);
    covered = covered || c.coverage;
  }
  const simulate::Validation v = Take(simulate::ValidateRuns(runs, cals), kConfigError);
  const auto outside = api::RunExtrapolations(runs, cals);
  return api::ValidateJson(v, covered ? &outside : nullptr);
}

std::string CalibrateRuns(const std::string& runs_text, const std::string& source, bool keep_bounds) {
  const std::vector<simulate::Run> runs = Runs(runs_text, source);
  simulate::Calibration cal = Take(simulate::FitRuns(runs, {.keep_bounds = keep_bounds}), kConfigError);
  cal.command = "twinpipe.calibrate_runs(" + source + (keep_bounds ? ", keep_bounds=True)" : ")");
  cal.commit = TWINPIPE_COMMIT;
  return cost::WriteCalibration(cal);
}

std::string Search(const LoadedConfig& loaded, int devices, double memory_cap_bytes, const std::string& objective,
                   bool max_layers, const std::string& calibration_path, const api::SearchKnobs& knobs) {
  auto calibration = CalibrationFor(calibration_path, loaded.config);
  search::SearchOptions options;
  Take(api::ApplySearchKnobs(knobs, options), kConfigError);
  options.calibration = calibration ? &*calibration : nullptr;
  options.devices = devices;
  options.memory_cap_bytes = memory_cap_bytes;
  if (objective != "throughput" && objective != "memory") {
    Raise({"objective '" + objective + "': expected throughput or memory"}, kConfigError);
  }
  options.objective = objective == "memory" ? search::Objective::kMemory : search::Objective::kThroughput;
  if (max_layers) {
    return api::MaxLayersJson(loaded.config, Take(search::MaxLayers(loaded.config, options), kConfigError));
  }
  const search::SearchResult result = Take(search::Search(loaded.config, options), kConfigError);
  nlohmann::ordered_json best;
  if (result.best) {
    best = search::CandidateConfig(nlohmann::ordered_json::parse(loaded.text), *result.best,
                                   devices > 0 ? devices : loaded.config.cluster.NumDevices(), memory_cap_bytes);
  }
  return api::SearchJson(result, best);
}

// One `execute` run: the config as run (its seed set), the plan, the result
// and the notes the program prints before running.
struct Execution {
  cost::Config config;
  cost::Plan plan;
  execute::ExecuteResult result;
  std::vector<std::string> notes;
};

Execution Execute(const LoadedConfig& loaded, const ir::Schedule* schedule, const api::PlanSource& source,
                  const api::ExecuteRequest& request, bool force) {
  const char* bad_input = schedule || !source.schedule_file.empty() ? kScheduleError : kConfigError;
  Execution e{.config = loaded.config};
  const execute::ExecuteOptions options = Take(api::ExecuteOptionsFor(e.config, request), kConfigError);
  e.plan = Take(api::PlanExecution(e.config, source, schedule, force), bad_input);
  for (const std::string& w : api::ScheduleFileWarnings(source, e.config, e.plan.schedule)) {
    if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), 1) != 0) throw py::error_already_set();
  }
  e.notes = api::ExecuteNotes(e.config, request.backend);
  Result<execute::ExecuteResult> result;
  {
    py::gil_scoped_release release;  // the run's threads need no Python; other Python threads go on
    result = api::RunExecution(e.config, e.plan, request.backend, options);
  }
  e.result = Take(std::move(result), bad_input);
  return e;
}

std::string CompareTraces(const std::string& predicted, const std::string& predicted_name,
                          const std::string& measured, const std::string& measured_name) {
  const traces::Trace p = Take(traces::ReadTraceJson(predicted, predicted_name), kConfigError);
  const traces::Trace m = Take(traces::ReadTraceJson(measured, measured_name), kConfigError);
  return Take(api::CompareJson(p, m, predicted_name, measured_name), kConfigError);
}

// `import-trace`: (the measured trace's JSON, what the program says of it).
py::tuple ImportTrace(const std::vector<std::string>& profiles, const ir::Schedule* schedule,
                      const std::string& schedule_file, const std::string& format, const std::string& dialect) {
  ir::Schedule from_file;
  if (schedule && (format != "auto" || dialect != "auto")) {
    Raise({"the schedule given runs as given: format and dialect read a schedule file"}, kScheduleError);
  }
  if (!schedule) {
    from_file = Take(api::LoadSchedule(schedule_file, format, dialect), kScheduleError).schedule;
    schedule = &from_file;
  }
  const traces::TorchProfileImport m = Take(api::ImportTrace(profiles, *schedule), kConfigError);
  return py::make_tuple(traces::WriteTraceJson(m.trace), api::ImportSummary(m));
}

// `calibrate` from traces: groups of (config, [(trace text, name)]), the
// calibration file's text stamped with `command` and this build's commit.
std::string CalibrateTraces(const std::vector<std::pair<const LoadedConfig*, std::vector<std::pair<std::string, std::string>>>>& measured,
                            const api::PlanSource& source, const std::string& command) {
  std::vector<api::MeasuredGroup> groups;
  for (const auto& [config, traces] : measured) {
    api::MeasuredGroup g{.config = config->config};
    for (const auto& [text, name] : traces) g.traces.push_back(Take(traces::ReadTraceJson(text, name), kConfigError));
    groups.push_back(std::move(g));
  }
  const char* bad_input = source.schedule_file.empty() ? kConfigError : kScheduleError;
  simulate::Calibration cal = Take(api::CalibrateTraces(std::move(groups), source, [](const std::string& w) {
    if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), 1) != 0) throw py::error_already_set();
  }), bad_input);
  cal.command = command;
  cal.commit = TWINPIPE_COMMIT;
  return cost::WriteCalibration(cal);
}

// `partition --json` and what `partition` notes.
py::tuple Partition(const LoadedConfig& loaded, const std::string& algorithm) {
  const partition::PartitionReport report = Take(api::PartitionConfig(loaded.config, algorithm), kConfigError);
  return py::make_tuple(api::PartitionJson(loaded.config, report),
                        api::PartitionNotes(loaded.config, algorithm, report));
}

py::tuple Export(const LoadedConfig& loaded, const std::string& framework, const std::string& schedule_csv) {
  partition::LaunchSettings settings =
      Take(api::ExportSettings(loaded.config, loaded.config.source, framework, schedule_csv),
           schedule_csv.empty() ? kConfigError : kScheduleError);
  return py::make_tuple(settings.text, settings.notes);
}

}  // namespace
}  // namespace twinpipe::python

PYBIND11_MODULE(_twinpipe, m) {
  using namespace twinpipe;
  using namespace twinpipe::python;
  m.doc() = "twinpipe's C++ library; use the `twinpipe` package, which wraps it";

  py::class_<LoadedConfig>(m, "Config")
      .def_property_readonly("source", [](const LoadedConfig& c) { return c.config.source; })
      .def_property_readonly("text", [](const LoadedConfig& c) { return c.text; })
      .def_property_readonly("devices", [](const LoadedConfig& c) { return c.config.cluster.NumDevices(); })
      .def("__repr__", [](const LoadedConfig& c) { return "<twinpipe.Config " + c.config.source + ">"; });
  m.def("load_config_text", &LoadConfigText, py::arg("text"), py::arg("source"));
  m.def("load_config_file", &LoadConfigPath, py::arg("path"));

  py::class_<ir::Schedule>(m, "Schedule")
      .def_readonly("num_stages", &ir::Schedule::num_stages)
      .def_readonly("num_micro_batches", &ir::Schedule::num_micro_batches)
      .def_readonly("num_devices", &ir::Schedule::num_devices)
      .def_readonly("replicas", &ir::Schedule::replicas)
      .def_readonly("placement", &ir::Schedule::placement)
      .def_property_readonly("programs", &Programs)
      .def("to_text", &ir::PrintText)
      .def("to_json", &ir::PrintJson)
      .def("to_torch_csv", &TorchCsv, py::arg("torch_version") = "", py::arg("compute_only") = false)
      .def("__eq__", [](const ir::Schedule& a, const ir::Schedule& b) { return a == b; });
  m.def("build_schedule",
        [](const LoadedConfig* config, int stages, int micro_batches, int chunks, std::string schedule,
           std::string recompute, std::string recompute_timing, int64_t activation_bytes, int replicas) {
          api::ScheduleRequest r{stages, micro_batches, chunks, std::move(schedule), std::move(recompute),
                                 std::move(recompute_timing), activation_bytes, replicas};
          return Take(api::BuildSchedule(config ? &config->config : nullptr, std::move(r)), kScheduleError);
        });
  m.def("read_schedule", &ReadSchedule, py::arg("path"), py::arg("format") = "auto", py::arg("dialect") = "auto");
  m.def("parse_schedule", &ParseSchedule, py::arg("text"), py::arg("format"), py::arg("source"));
  m.def("verify", &Diagnostics);

  py::class_<api::Simulation>(m, "Simulation")
      .def("json", &api::SimulateJson)
      .def("trace_json", [](const api::Simulation& s) { return traces::WriteTraceJson(api::SimulationTrace(s)); })
      .def("chrome_json", [](const api::Simulation& s) { return traces::WriteChromeTrace(api::SimulationTrace(s)); })
      .def("svg", [](const api::Simulation& s) {  // as `twinpipe render` draws the trace
        const traces::Trace trace = api::SimulationTrace(s);
        return traces::RenderTimelineSvg(trace, nullptr, trace.source, "");
      })
      .def("overflow", &api::OverflowMessage)
      .def_property_readonly("schedule", [](const api::Simulation& s) { return s.plan.schedule; });
  m.def("simulate",
        [](const LoadedConfig& config, const ir::Schedule* schedule, std::string schedule_file, std::string format,
           std::string dialect, std::string schedule_name, std::string recompute, int chunks, double memory_cap_bytes,
           const std::string& calibration) {
          api::PlanSource source{std::move(schedule_file), std::move(format), std::move(dialect),
                                 std::move(schedule_name), std::move(recompute), chunks, memory_cap_bytes};
          return Simulate(config, schedule, source, calibration);
        });
  m.def("validate", &Validate);
  m.def("calibrate_runs", &CalibrateRuns);
  m.def("search", [](const LoadedConfig& config, int devices, double memory_cap_bytes, const std::string& objective,
                      bool max_layers, const std::string& calibration, int max_context_parallel,
                      int min_context_tokens, std::vector<std::string> sharding, std::string tp_comm_overlap,
                      int max_chunks) {
    const api::SearchKnobs knobs{max_context_parallel, min_context_tokens, std::move(sharding),
                                 std::move(tp_comm_overlap), max_chunks};
    return Search(config, devices, memory_cap_bytes, objective, max_layers, calibration, knobs);
  });
  m.def("partition", &Partition);

  py::class_<Execution>(m, "Execution")
      .def("json", [](const Execution& e) { return api::ExecuteJson(e.config, e.plan, e.result); })
      .def("trace_json", [](const Execution& e) { return traces::WriteTraceJson(e.result.trace); })
      .def("chrome_json", [](const Execution& e) { return traces::WriteChromeTrace(e.result.trace); })
      .def("svg", [](const Execution& e) {  // as `twinpipe render` draws the measured trace
        return traces::RenderTimelineSvg(e.result.trace, nullptr, e.result.trace.source, "");
      })
      .def_readonly("notes", &Execution::notes)
      .def_property_readonly("parameters", [](const Execution& e) { return e.result.parameters; })
      .def_property_readonly("schedule", [](const Execution& e) { return e.plan.schedule; });
  m.def("execute",
        [](const LoadedConfig& config, const ir::Schedule* schedule, std::string schedule_file, std::string format,
           std::string dialect, std::string schedule_name, std::string recompute, int chunks, double memory_cap_bytes,
           std::string backend, std::string transport, std::string precision, int steps, std::optional<int64_t> seed,
           double timeout_s, bool force) {
          api::PlanSource source{std::move(schedule_file), std::move(format), std::move(dialect),
                                 std::move(schedule_name), std::move(recompute), chunks, memory_cap_bytes};
          api::ExecuteRequest request{.backend = std::move(backend), .transport = std::move(transport),
                                      .precision = std::move(precision), .steps = steps, .seed = seed,
                                      .timeout_s = timeout_s};
          return Execute(config, schedule, source, request, force);
        });
  m.def("compare", &CompareTraces);
  m.def("import_trace", &ImportTrace);
  m.def("calibrate_traces",
        [](const std::vector<std::pair<const LoadedConfig*, std::vector<std::pair<std::string, std::string>>>>& measured,
           std::string schedule_file, std::string format, std::string dialect, std::string schedule_name,
           std::string recompute, int chunks, double memory_cap_bytes, const std::string& command) {
          const api::PlanSource source{std::move(schedule_file), std::move(format), std::move(dialect),
                                       std::move(schedule_name), std::move(recompute), chunks, memory_cap_bytes};
          return CalibrateTraces(measured, source, command);
        });
  m.def("export_settings", &Export);
}
