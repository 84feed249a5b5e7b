"""twinpipe in Python: the planner, the simulator and the executor of the
`twinpipe` program as a module, over the same C++ library (the C++ extension
`twinpipe._twinpipe`); the program stays the reference, and every JSON
figure here is the one `twinpipe <command> --json` prints.

    import twinpipe
    config = twinpipe.load_config("examples/quickstart.json")
    result = twinpipe.simulate(config)
    result["step_time_s"], result.timeline[0], result.json  # the CLI's JSON text
    run = twinpipe.execute(config, steps=10)      # trains it on the cpu backend
    twinpipe.compare(result, run)["step_time_error"]
    s = twinpipe.schedule(stages=4, micro_batches=8, name="1f1b")
    twinpipe.verify(s)  # [] for a valid schedule

Bad input raises ConfigError or ScheduleError (both ValueError) with the
program's message and its JSON path; a runtime failure RuntimeFailure.
"""
import json as _json
import os as _os
import tempfile as _tempfile

from .errors import ConfigError, RuntimeFailure, ScheduleError
from .results import ExecutionResult, JsonResult, SimulationResult, TracedResult
from .torch_layers import layers_from_torch

try:
    from . import _twinpipe
except ImportError as _error:  # the package without its extension
    _twinpipe = None
    _IMPORT_ERROR = _error
    Config = Schedule = None
else:
    _IMPORT_ERROR = None
    Config = _twinpipe.Config
    Schedule = _twinpipe.Schedule

__all__ = ["ConfigError", "ScheduleError", "RuntimeFailure", "Config", "Schedule", "JsonResult",
           "SimulationResult", "ExecutionResult", "execute", "compare", "import_trace", "calibrate", "load_config", "simulate", "schedule", "read_schedule", "parse_schedule",
           "verify", "validate", "calibrate_runs", "search", "partition", "export", "layers_from_torch", "available"]


def available():
    """True when the C++ extension was built (the pure-Python parts work without it)."""
    return _twinpipe is not None


def _lib():
    if _twinpipe is None:
        raise ImportError("twinpipe: the C++ extension _twinpipe is not built (configure the project with "
                          f"Debian's pybind11-dev installed, then build): {_IMPORT_ERROR}")
    return _twinpipe


def load_config(config):
    """A config from a dict (as the JSON file holds it), a path, or a Config
    (returned as is). Errors name the source ("<dict>" for a dict) and the
    JSON path, as `twinpipe simulate` prints them."""
    lib = _lib()
    if isinstance(config, lib.Config):
        return config
    if isinstance(config, dict):
        return lib.load_config_text(_json.dumps(config), "<dict>")
    if isinstance(config, (str, _os.PathLike)):
        return lib.load_config_file(_os.fspath(config))
    raise TypeError(f"load_config: expected a dict, a path or a twinpipe.Config, got {type(config).__name__}")


def _path_of(value, what, suffix=".json"):
    """A path for a file argument given as a path, or as the text (a
    JsonResult, from calibrate_runs) written to a temporary file; returns
    (path, temporary file or None)."""
    if value is None:
        return "", None
    if isinstance(value, JsonResult):
        f = _tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False)
        f.write(value.json)
        f.close()
        return f.name, f.name
    if isinstance(value, (str, _os.PathLike)):
        return _os.fspath(value), None
    raise TypeError(f"{what}: expected a path or a result of calibrate_runs, got {type(value).__name__}")


def _with_file(value, what, call):
    path, temporary = _path_of(value, what)
    try:
        return call(path)
    finally:
        if temporary:
            _os.unlink(temporary)


def _schedule_argument(schedule, command):
    """(a Schedule object or None, a schedule file's path or "")."""
    if _twinpipe is not None and isinstance(schedule, _twinpipe.Schedule):
        return schedule, ""
    if isinstance(schedule, (str, _os.PathLike)):
        return None, _os.fspath(schedule)
    if schedule is not None:
        raise TypeError(f"{command}: schedule: expected a twinpipe.Schedule or a path, got {type(schedule).__name__}")
    return None, ""


def simulate(config, schedule=None, calibration=None, *, name=None, recompute=None, chunks=0, memory_cap=0,
             format="auto", dialect="auto"):
    """`twinpipe simulate --json` as a SimulationResult (a dict of the same
    figures, .json the same text, .timeline the predicted events).

    schedule: a Schedule to run with the config's model and cluster, or a
    schedule file's path (format and dialect as --format, --dialect);
    calibration: a calibration file's path or calibrate_runs' result; name,
    recompute, chunks, memory_cap: as --schedule, --recompute, --chunks,
    --memory-cap. A predicted out-of-memory (the program's exit 1) is
    result.overflow, not an error."""
    lib = _lib()
    config = load_config(config)
    schedule_object, schedule_file = _schedule_argument(schedule, "simulate")
    simulation = _with_file(calibration, "simulate: calibration", lambda path: lib.simulate(
        config, schedule_object, schedule_file, format, dialect, name or "", recompute or "", chunks,
        float(memory_cap), path))
    return SimulationResult(simulation)


def execute(config, schedule=None, *, steps=0, seed=None, backend="cpu", transport="auto", precision="fp32",
            timeout=60, force=False, name=None, recompute=None, chunks=0, memory_cap=0, format="auto",
            dialect="auto"):
    """`twinpipe execute --json`: train the config's model with the plan
    simulate predicts, as an ExecutionResult (a dict of the same figures,
    .json the same text, .trace / .timeline the kept step's measured trace,
    .notes what the program notes first).

    schedule, name, recompute, chunks, memory_cap, format, dialect: as
    simulate's; steps (default /training/steps), seed (default
    /training/seed), backend ("cpu" or "cuda"), transport and precision (the
    cuda backend's), timeout (seconds a receive may wait), force (run a plan
    predicted out of memory): as --steps, --seed, --backend, --transport,
    --precision, --timeout, --force. A failed run raises RuntimeFailure
    naming the op."""
    lib = _lib()
    config = load_config(config)
    schedule_object, schedule_file = _schedule_argument(schedule, "execute")
    # Beyond the C++ integers' range: the library's own message, not a TypeError.
    if seed is not None and not 0 <= seed <= 2**62:
        raise ConfigError(f"seed {seed}: expected a number in [0, 2^62]")
    if not 0 <= steps <= 2**24:
        raise ConfigError(f"steps {steps}: expected a count of steps in [1, 16777216] (0: /training/steps)")
    return ExecutionResult(lib.execute(
        config, schedule_object, schedule_file, format, dialect, name or "", recompute or "", chunks,
        float(memory_cap), backend, transport, precision, steps, seed, float(timeout),
        force))


def _read_text(path):
    """(a file's text, its path); ConfigError naming it when it cannot be
    read, as the program says it."""
    path = _os.fspath(path)
    if _os.path.isdir(path):
        raise ConfigError(f"{path}: is a directory, not a file")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except OSError as e:
        raise ConfigError(f"{path}: cannot open: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON: byte {e.start} is not UTF-8 text") from None


def _trace_text(trace, what):
    """(the trace's JSON text, its name in messages)."""
    if isinstance(trace, TracedResult):
        return trace.trace_json(), f"the {what} trace ({trace.trace.get('source', what)})"
    if isinstance(trace, dict):
        return _json.dumps(trace), f"the {what} trace (a dict)"
    if isinstance(trace, (str, _os.PathLike)):
        return _read_text(trace)
    raise TypeError(f"compare: {what}: expected a simulate or execute result, a trace dict or a path, "
                    f"got {type(trace).__name__}")


def import_trace(profiles, schedule, *, format="auto", dialect="auto"):
    """`twinpipe import-trace`: torch.profiler traces of a
    torch.distributed.pipelining step (a path, or one per rank in rank
    order; .json or .json.gz) as the measured trace of the schedule that ran
    (a Schedule, or a schedule file's path: twinpipe text, JSON or the torch
    CSV torch ran). Returns the trace as a JsonResult (.json the text
    `import-trace -o` writes; compare takes it) with .summary, the line the
    program prints on stderr."""
    lib = _lib()
    if isinstance(profiles, (str, _os.PathLike)):
        profiles = [profiles]
    schedule_object, schedule_file = _schedule_argument(schedule, "import_trace")
    if schedule_object is None and not schedule_file:
        raise TypeError("import_trace: schedule: expected a twinpipe.Schedule or a path, got None")
    text, summary = lib.import_trace([_os.fspath(p) for p in profiles], schedule_object, schedule_file, format,
                                     dialect)
    result = JsonResult(text)
    result.summary = summary
    return result


def compare(predicted, measured):
    """`twinpipe compare --json`: the predicted trace against the measured
    one, op by op. Each is a simulate or execute result, a native trace as a
    dict, or a trace file's path (simulate --trace, execute --trace,
    import-trace -o)."""
    lib = _lib()
    predicted_text, predicted_name = _trace_text(predicted, "predicted")
    measured_text, measured_name = _trace_text(measured, "measured")
    return JsonResult(lib.compare(predicted_text, predicted_name, measured_text, measured_name))


def schedule(config=None, *, stages=0, micro_batches=0, name=None, chunks=0, recompute=None,
             recompute_timing=None, activation_bytes=0, replicas=1):
    """`twinpipe schedule`: the verified schedule IR of a config's pipeline,
    or with no config one built from stages K, micro_batches M and the
    builder's name (default gpipe), recompute (default none) and its timing
    (overlapped or in-backward), comm of activation_bytes inserted."""
    lib = _lib()
    loaded = None
    if config is not None:
        if stages or micro_batches:
            raise ScheduleError("give either a config or stages and micro_batches, not both")
        if recompute_timing is not None:
            raise ScheduleError("recompute_timing is for a schedule built without a config; set "
                                "/pipeline/recompute_timing in the config")
        loaded = load_config(config)
    return lib.build_schedule(loaded, stages, micro_batches, chunks, name or "", recompute or "",
                              recompute_timing or "overlapped", activation_bytes, replicas)


def read_schedule(path, format="auto", dialect="auto"):
    """A schedule file (twinpipe text, twinpipe JSON or torch CSV), as `twinpipe verify` reads it."""
    return _lib().read_schedule(_os.fspath(path), format, dialect)


def parse_schedule(text, format="text", source="<text>"):
    """A schedule from its text: format text, json or torch-csv."""
    return _lib().parse_schedule(text, format, source)


def verify(schedule):
    """The verifier's diagnostics of a Schedule (or a schedule file): a list
    of {device, position, message, text}, text as `twinpipe verify` prints
    it; [] when the schedule is valid."""
    lib = _lib()
    if not isinstance(schedule, lib.Schedule):
        schedule = read_schedule(schedule)
    return lib.verify(schedule)


def _runs_text(runs):
    """A table of runs' text and source: a JSONL path, or a list of
    {"config": {...}, "step_time_s": t}."""
    if isinstance(runs, (str, _os.PathLike)):
        return _read_text(runs)
    if isinstance(runs, (list, tuple)):
        return "".join(_json.dumps(r) + "\n" for r in runs), "<runs>"
    raise TypeError(f"expected a JSONL path or a list of runs, got {type(runs).__name__}")


def validate(runs, calibration=None):
    """`twinpipe validate --json`: runs, mape, bias, groups, worst, rows.

    calibration: a calibration file's path or calibrate_runs' result, or a
    list of them, one per device kind of a table that mixes kinds: each
    predicts the runs on its kind (the others, counted in
    "uncalibrated_runs", take the catalogue's figures)."""
    lib = _lib()
    text, source = _runs_text(runs)
    calibrations = list(calibration) if isinstance(calibration, (list, tuple)) else [calibration]
    paths, temporaries = [], []
    try:
        for i, c in enumerate(calibrations):
            if c is None:
                continue
            path, temporary = _path_of(c, f"validate: calibration[{i}]" if len(calibrations) > 1
                                       else "validate: calibration")
            paths.append(path)
            if temporary:
                temporaries.append(temporary)
        return JsonResult(lib.validate(text, source, paths))
    finally:
        for t in temporaries:
            _os.unlink(t)


def calibrate(measured, config, *, schedule=None, name=None, recompute=None, chunks=0, memory_cap=0, format="auto",
              dialect="auto"):
    """`twinpipe calibrate TRACES --config ...`: the calibration file fitted
    to measured traces, as a JsonResult (.json the file's text, .save(path)
    writes it); simulate, validate and search take it.

    measured: a trace or a list of them (execute's results, trace dicts, or
    trace files: execute --trace, import-trace -o); config: the config they
    were measured with, or a list with one per trace (runs of several
    micro-batch sizes tell a fixed cost per op from a cost per sample; the
    same path or object twice is one config); schedule (a schedule file's
    path), name, recompute, chunks, memory_cap, format, dialect: the plan
    the traces ran, as simulate's."""
    lib = _lib()
    if isinstance(measured, (TracedResult, dict, str, _os.PathLike)):
        measured = [measured]
    measured = list(measured)
    configs = list(config) if isinstance(config, (list, tuple)) else [config] * len(measured)
    if not measured or len(configs) != len(measured):
        raise ConfigError(f"calibrate: {len(measured)} traces and {len(configs)} configs: give one config for all "
                          "traces, or one per trace, in order")
    if schedule is not None and not isinstance(schedule, (str, _os.PathLike)):
        raise TypeError(f"calibrate: schedule: expected a schedule file's path, got {type(schedule).__name__}")
    groups, where = [], {}
    for i, (trace, c) in enumerate(zip(measured, configs)):
        key = _os.fspath(c) if isinstance(c, (str, _os.PathLike)) else id(c)
        if key not in where:
            where[key] = len(groups)
            groups.append((load_config(c), []))
        groups[where[key]][1].append(_trace_text(trace, f"measured[{i}]"))
    command = f"twinpipe.calibrate({len(measured)} traces, {len(groups)} configs)"
    return JsonResult(lib.calibrate_traces(groups, _os.fspath(schedule) if schedule is not None else "", format,
                                           dialect, name or "", recompute or "", chunks, float(memory_cap), command))


def calibrate_runs(runs, keep_bounds=False):
    """`twinpipe calibrate --runs`: the calibration file fitted to a table of
    runs, as a JsonResult (.json the file's text, .save(path) writes it); it
    is a calibration simulate and validate take."""
    text, source = _runs_text(runs)
    return JsonResult(_lib().calibrate_runs(text, source, keep_bounds))


def search(config, *, devices=0, memory_cap=0, objective="throughput", max_layers=False, calibration=None,
           max_context_parallel=0, min_context_tokens=4096, sharding=("none", "optimizer", "full"),
           tp_comm_overlap="both", max_chunks=0):
    """`twinpipe search --json` (or --max-layers --json): configs_evaluated,
    pareto[], best (a config) and best_prediction. The grid's knobs as the
    program's options: max_context_parallel, min_context_tokens, sharding
    (modes among none, optimizer, full), tp_comm_overlap (off, on or both),
    max_chunks."""
    lib = _lib()
    config = load_config(config)
    if isinstance(sharding, str):
        sharding = [sharding]
    return JsonResult(_with_file(calibration, "search: calibration", lambda path: lib.search(
        config, devices, float(memory_cap), objective, max_layers, path, max_context_parallel, min_context_tokens,
        list(sharding), tp_comm_overlap, max_chunks)))


def partition(config, algorithm=None):
    """`twinpipe partition --json`: the model cut into one cell per stage as
    simulate plans it (algorithm, cells[] with first_layer, last_layer,
    device, cost, time_s, params, peak_memory_bytes, boundary_bytes;
    bottleneck_s, imbalance), with .notes, what the program notes (a manual
    cut of one first layer a device, not a stage, cut by another algorithm).
    algorithm: a partition algorithm's name (default: the config's
    /pipeline/partition)."""
    text, notes = _lib().partition(load_config(config), algorithm or "")
    result = JsonResult(text)
    result.notes = list(notes)
    return result


def export(config, framework, schedule_csv=None):
    """`twinpipe export`: the launch settings that run a config's plan, as
    (text, notes). framework: "megatron" (Megatron-LM's command-line flags)
    or "torchtitan" (its TOML sections); schedule_csv: for torchtitan, the
    path of a torch schedule CSV of this config's pipeline (what
    `Schedule.to_torch_csv()` writes) to run instead of a schedule class.
    text is what the program prints on stdout; notes what it prints after
    "twinpipe export: note: " on stderr (a framework behaviour the
    prediction did not assume)."""
    config = load_config(config)
    path = "" if schedule_csv is None else _os.fspath(schedule_csv)
    text, notes = _lib().export_settings(config, framework, path)
    return text, list(notes)
