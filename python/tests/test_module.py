"""The twinpipe module against the twinpipe program: the same JSON byte for
byte, the same errors with their JSON paths, schedules that round-trip."""
import json

import pytest

from conftest import SOURCE_DIR, cli_error, cli_notes, import_twinpipe

twinpipe = import_twinpipe()

EXAMPLES = sorted((SOURCE_DIR / "examples").glob("*.json"))
INPUTS = SOURCE_DIR / "tests" / "inputs"
VTRAIN = SOURCE_DIR / "traces" / "published" / "vtrain-a100"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_simulate_json_is_the_programs(cli, path):
    run = cli("simulate", path, "--json")
    if run.returncode == 2:  # a config the program does not simulate: the same error
        with pytest.raises(twinpipe.ConfigError) as e:
            twinpipe.simulate(str(path))
        assert e.value.message == cli_error(run, "simulate")
        return
    result = twinpipe.simulate(str(path))
    assert result.json == run.stdout
    assert result == json.loads(run.stdout)
    if run.returncode == 1:  # predicted out of memory: the JSON, and the message
        assert result.overflow == cli_error(run, "simulate")
    else:
        assert run.returncode == 0, run.stderr
        assert result.overflow is None


def test_simulate_from_a_dict_equals_from_its_file():
    path = SOURCE_DIR / "examples" / "quickstart.json"
    from_dict = twinpipe.simulate(json.loads(path.read_text()))
    assert from_dict.json == twinpipe.simulate(str(path)).json


def test_simulate_overrides_are_the_programs_flags(cli):
    path = SOURCE_DIR / "examples" / "quickstart.json"
    run = cli("simulate", path, "--json", "--schedule", "1f1b", "--recompute", "none")
    assert run.returncode == 0, run.stderr
    assert twinpipe.simulate(str(path), name="1f1b", recompute="none").json == run.stdout


def test_timeline_and_svg_are_the_programs_trace_and_render(cli, tmp_path):
    path = SOURCE_DIR / "examples" / "quickstart.json"
    trace, svg = tmp_path / "t.json", tmp_path / "t.svg"
    assert cli("simulate", path, "--trace", trace).returncode == 0
    assert cli("render", trace, "--svg", svg).returncode == 0
    result = twinpipe.simulate(str(path))
    assert result.trace_json() == trace.read_text()
    assert result.timeline == json.loads(trace.read_text())["events"]
    assert {"kind", "device", "start_s", "end_s", "microbatch"} <= set(result.timeline[0])
    assert result._repr_svg_() == svg.read_text()


def test_to_dataframe_has_a_row_per_op():
    pandas = pytest.importorskip("pandas", reason="pandas is not installed: to_dataframe not tested")
    result = twinpipe.simulate(str(SOURCE_DIR / "examples" / "quickstart.json"))
    frame = result.to_dataframe()
    assert isinstance(frame, pandas.DataFrame)
    assert len(frame) == len(result.timeline)
    assert list(frame["kind"]) == [e["kind"] for e in result.timeline]


# Errors: the program's message, with its JSON path.

def test_config_error_carries_the_programs_message_and_path(cli):
    path = INPUTS / "config_stages_string.json"
    run = cli("simulate", path)
    assert run.returncode == 2
    with pytest.raises(twinpipe.ConfigError) as e:
        twinpipe.load_config(str(path))
    assert isinstance(e.value, ValueError)
    assert e.value.message == cli_error(run, "simulate")
    assert e.value.json_path == "/pipeline/stages"


def test_config_error_of_a_dict_names_its_path():
    config = json.loads((SOURCE_DIR / "examples" / "quickstart.json").read_text())
    config["pipeline"]["stages"] = "four"
    with pytest.raises(twinpipe.ConfigError) as e:
        twinpipe.simulate(config)
    assert e.value.json_path == "/pipeline/stages"
    assert str(e.value).startswith("<dict>: /pipeline/stages: expected an integer")


# (program's arguments, the module's call, its error class, the JSON path)
SAME_ERRORS = {
    "bad line of runs": (["validate", INPUTS / "runs_bad.jsonl"],
                         lambda: twinpipe.validate(str(INPUTS / "runs_bad.jsonl")), twinpipe.ConfigError,
                         "/step_time_s"),
    "calibration of another device": (
        ["simulate", SOURCE_DIR / "examples" / "transformer_h100.json", "--calibration",
         INPUTS / "cpu_quickstart.calibration.json"],
        lambda: twinpipe.simulate(str(SOURCE_DIR / "examples" / "transformer_h100.json"),
                                  calibration=str(INPUTS / "cpu_quickstart.calibration.json")),
        twinpipe.ConfigError, "/device"),
    "bad schedule token": (["verify", INPUTS / "bad_token.txt"],
                           lambda: twinpipe.read_schedule(str(INPUTS / "bad_token.txt")), twinpipe.ScheduleError,
                           None),
    "unknown schedule": (["schedule", "-k", 4, "-m", 8, "-s", "zigzag"],
                         lambda: twinpipe.schedule(stages=4, micro_batches=8, name="zigzag"), twinpipe.ScheduleError,
                         None),
}


@pytest.mark.parametrize("case", SAME_ERRORS)
def test_errors_carry_the_programs_message_and_path(cli, case):
    args, call, error, json_path = SAME_ERRORS[case]
    run = cli(*args)
    assert run.returncode == 2
    with pytest.raises(error) as e:
        call()
    assert isinstance(e.value, ValueError)
    assert e.value.message == cli_error(run, args[0])
    assert e.value.json_path == json_path


# Schedules: the program's, and round trips.

@pytest.mark.parametrize("name,chunks", [("gpipe", 0), ("1f1b", 0), ("interleaved", 2), ("zb-h1", 0), ("zb-v", 2)])
def test_schedule_is_the_programs_and_round_trips(cli, name, chunks):
    args = ["-k", 4, "-m", 8, "-s", name, "--activation-bytes", 4096] + (["-v", chunks] if chunks else [])
    s = twinpipe.schedule(stages=4, micro_batches=8, name=name, chunks=chunks, activation_bytes=4096)
    for fmt, text in [("text", s.to_text()), ("json", s.to_json()), ("torch-csv", s.to_torch_csv())]:
        run = cli("schedule", *args, "--format", fmt)
        assert run.returncode == 0, run.stderr
        assert text == run.stdout, fmt
    assert twinpipe.parse_schedule(s.to_text(), "text") == s
    assert twinpipe.parse_schedule(s.to_json(), "json").to_json() == s.to_json()
    assert twinpipe.verify(s) == []
    assert s.num_stages == 4 * (chunks or 1) and s.num_micro_batches == 8
    ops = [op for program in s.programs for op in program]
    forwards = [op for op in ops if op["kind"] == "F"]
    assert len(forwards) == s.num_stages * 8
    sends = [op for op in ops if op["kind"] == "SEND_F"]
    assert sends and all(op["bytes"] == 4096 and op["peer"] >= 0 for op in sends)
    assert set(ops[0]) == {"kind", "device", "stage", "micro_batch", "peer", "bytes", "token"}


def test_schedule_of_a_config_is_the_programs(cli):
    path = SOURCE_DIR / "examples" / "quickstart.json"
    run = cli("schedule", path, "--format", "json")
    assert run.returncode == 0, run.stderr
    assert twinpipe.schedule(str(path)).to_json() == run.stdout


def test_schedule_refuses_what_the_program_refuses_with_a_config():
    path = str(SOURCE_DIR / "examples" / "quickstart.json")
    with pytest.raises(twinpipe.ScheduleError, match="not both"):
        twinpipe.schedule(path, stages=4)
    with pytest.raises(twinpipe.ScheduleError, match="/pipeline/recompute_timing"):
        twinpipe.schedule(path, recompute_timing="in-backward")


def test_schedule_refuses_bad_numbers_as_bad_input():
    # The program's option ranges, held for the module too: bad input, not a runtime failure.
    for kwargs, message in [(dict(activation_bytes=-1), "activation bytes: expected 0 or more, got -1"),
                            (dict(replicas=0), "replicas: expected at least 1, got 0")]:
        with pytest.raises(twinpipe.ScheduleError, match=message):
            twinpipe.schedule(stages=4, micro_batches=8, **kwargs)
    with pytest.raises(twinpipe.ScheduleError, match="stages: expected at least 1, got -2"):
        twinpipe.schedule(stages=-2, micro_batches=8)
    with pytest.raises(twinpipe.ScheduleError, match="micro-batches: expected at least 1, got -1"):
        twinpipe.schedule(stages=4, micro_batches=-1)


def test_a_schedule_file_warns_as_the_program_does(cli, tmp_path):
    # A torch CSV of one replica on a config of four: the program's warning, as a Python warning.
    config = str(SOURCE_DIR / "tests" / "inputs" / "today_h100.json")
    csv = tmp_path / "one_replica.csv"
    assert cli("schedule", config, "--format", "torch-csv", "-o", csv).returncode == 0
    run = cli("simulate", config, "--schedule-file", csv)
    assert run.returncode == 0
    with pytest.warns(UserWarning) as caught:
        twinpipe.simulate(config, str(csv))
    said = [line.split("warning: ", 1)[1] for line in run.stderr.splitlines() if "warning: " in line]
    assert [str(w.message) for w in caught] == said
    assert "the other 12 stay idle (a torch CSV describes one replica)" in said[0]


def test_recompute_timing_is_the_programs(cli):
    args = dict(stages=2, micro_batches=4, recompute="full", recompute_timing="in-backward")
    run = cli("schedule", "-k", 2, "-m", 4, "--recompute", "full", "--recompute-timing", "in-backward")
    assert run.returncode == 0, run.stderr
    s = twinpipe.schedule(**args)
    assert s.to_text() == run.stdout
    assert s.to_text() != twinpipe.schedule(stages=2, micro_batches=4, recompute="full").to_text()


def test_verify_reports_what_the_program_reports(cli, tmp_path):
    s = twinpipe.schedule(stages=2, micro_batches=2)
    # Device 0 issues its first backward before its forwards: out of order.
    broken = s.to_text().replace("0F0 0SEND_F0", "0SEND_F0 0F0", 1)
    assert broken != s.to_text(), s.to_text()
    path = tmp_path / "broken.txt"
    path.write_text(broken)
    run = cli("verify", path)
    assert run.returncode == 2
    diagnostics = twinpipe.verify(str(path))
    assert diagnostics
    expected = [line[len(f"{path}: "):] for line in run.stderr.splitlines()[:-1]]
    assert [d["text"] for d in diagnostics] == expected
    assert all({"device", "position", "message"} <= set(d) for d in diagnostics)


def test_simulate_a_schedule_object_equals_the_schedule_file(cli, tmp_path):
    config = SOURCE_DIR / "examples" / "quickstart.json"
    s = twinpipe.schedule(str(config), name="1f1b")
    path = tmp_path / "pipe.txt"
    path.write_text(s.to_text())
    run = cli("simulate", config, "--schedule-file", path, "--json")
    assert run.returncode == 0, run.stderr
    assert twinpipe.simulate(str(config), schedule=str(path)).json == run.stdout
    assert twinpipe.simulate(str(config), schedule=s)["step_time_s"] == json.loads(run.stdout)["step_time_s"]


def test_options_that_would_be_ignored_are_refused(cli, tmp_path):
    # Ignored they would be: the program refuses them as flags, the module as arguments.
    config = str(SOURCE_DIR / "examples" / "quickstart.json")
    s = twinpipe.schedule(config, name="1f1b")
    for kwargs, message in [(dict(format="json"), "format 'json'"), (dict(dialect="older"), "dialect 'older'")]:
        with pytest.raises(twinpipe.ConfigError, match=message + ": the format and dialect of a schedule file"):
            twinpipe.simulate(config, **kwargs)
    # A Schedule runs as given: every option that would plan one is refused with it.
    for kwargs in [dict(format="json"), dict(dialect="older"), dict(name="gpipe"), dict(chunks=2),
                   dict(recompute="full"), dict(memory_cap=1e9)]:
        with pytest.raises(twinpipe.ScheduleError, match="the schedule given runs as given"):
            twinpipe.simulate(config, schedule=s, **kwargs)
    assert cli("simulate", config, "--dialect", "older").returncode == 2
    # A dialect for a file read as text.
    path = tmp_path / "pipe.txt"
    path.write_text(s.to_text())
    run = cli("verify", path, "--dialect", "older")
    assert run.returncode == 2
    with pytest.raises(twinpipe.ScheduleError) as e:
        twinpipe.simulate(config, schedule=str(path), dialect="older")
    assert "--dialect older reads torch CSV files, and this one is read as twinpipe text" in e.value.message
    assert cli_error(run, "verify") == e.value.message


# Tables of runs: validate and calibrate_runs on the published runs.

def test_validate_is_the_programs(cli):
    path = VTRAIN / "runs_tp.jsonl"
    run = cli("validate", path, "--json")
    assert run.returncode == 0, run.stderr
    result = twinpipe.validate(str(path))
    assert result.json == run.stdout
    assert result["runs"] == len(path.read_text().splitlines())


def test_validate_a_list_of_runs_equals_its_file():
    path = VTRAIN / "runs_tp.jsonl"
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    from_list, from_file = twinpipe.validate(runs), twinpipe.validate(str(path))
    assert from_list["mape"] == from_file["mape"] and from_list["rows"] == from_file["rows"]


def test_calibrate_runs_is_the_programs_and_validates(cli, tmp_path):
    path = VTRAIN / "runs_layers12.jsonl"
    out = tmp_path / "cal.json"
    run = cli("calibrate", "--runs", path, "-o", out)
    assert run.returncode == 0, run.stderr
    calibration = twinpipe.calibrate_runs(str(path))
    expected = json.loads(out.read_text())
    for key in ("command", "commit"):
        expected.pop(key, None)
    assert {k: v for k, v in calibration.items() if k not in ("command", "commit")} == expected
    assert calibration["command"] == f"twinpipe.calibrate_runs({path})"
    run = cli("validate", path, "--calibration", out, "--json")
    assert run.returncode == 0, run.stderr
    assert twinpipe.validate(str(path), calibration=calibration).json == run.stdout


def test_validate_a_mixed_table_takes_a_calibration_per_kind_as_the_program(cli, tmp_path):
    """runs_mixed.jsonl: two A100 runs, then two H100 ones. A list of calibrations, one per kind, is the
    program's repeated --calibration; the A100's alone leaves the H100 runs on the catalogue's figures."""
    mixed, a100 = INPUTS / "runs_mixed.jsonl", INPUTS / "runs_coverage.jsonl"
    out = tmp_path / "a100.json"
    assert cli("calibrate", "--runs", a100, "-o", out).returncode == 0
    run = cli("validate", mixed, "--calibration", out, "--json")
    assert run.returncode == 0, run.stderr
    assert "no calibration was fitted on 'H100-SXM'" in run.stderr
    for calibration in (str(out), [str(out)], [twinpipe.calibrate_runs(str(a100))]):
        result = twinpipe.validate(str(mixed), calibration=calibration)
        assert result["uncalibrated_runs"] == 2
        assert [r["calibrated"] for r in result["rows"]] == [True, True, False, False]
    assert twinpipe.validate(str(mixed), calibration=str(out)).json == run.stdout
    uncalibrated = twinpipe.validate(str(mixed))
    assert "uncalibrated_runs" not in uncalibrated
    assert [g["value"] for g in uncalibrated["groups"] if g["key"] == "device"] == ["A100-80GB", "H100-SXM"]
    # The H100 runs keep the uncalibrated prediction; two calibrations of one kind are refused.
    calibrated = twinpipe.validate(str(mixed), calibration=str(out))
    assert [r["predicted_s"] for r in calibrated["rows"][2:]] == [r["predicted_s"] for r in uncalibrated["rows"][2:]]
    with pytest.raises(twinpipe.ConfigError) as e:
        twinpipe.validate(str(mixed), calibration=[str(out), str(out)])
    assert "give one calibration per device kind" in e.value.message
    with pytest.raises(twinpipe.ConfigError) as e:
        twinpipe.calibrate_runs(str(mixed))
    assert "a profile is fitted to one device kind" in e.value.message


# search: the program's figures (its wall time aside).

def test_search_is_the_programs(cli):
    path = SOURCE_DIR / "examples" / "transformer_h100.json"
    run = cli("search", path, "--devices", 8, "--json")
    assert run.returncode == 0, run.stderr
    expected = json.loads(run.stdout)
    result = twinpipe.search(str(path), devices=8)
    for figures in (expected, result):
        figures.pop("wall_s")
    assert result == expected
    run = cli("search", path, "--max-layers", "--json")
    assert twinpipe.search(str(path), max_layers=True).json == run.stdout
    # The grid's knobs, as the program's options.
    run = cli("search", path, "--devices", 8, "--sharding", "optimizer", "--tp-comm-overlap", "on", "--max-chunks", 2,
              "--max-context-parallel", 2, "--min-context-tokens", 0, "--json")
    assert run.returncode == 0, run.stderr
    expected = json.loads(run.stdout)
    result = twinpipe.search(str(path), devices=8, sharding="optimizer", tp_comm_overlap="on", max_chunks=2,
                             max_context_parallel=2, min_context_tokens=0)
    for figures in (expected, result):
        figures.pop("wall_s")
    assert result == expected and result["configs_evaluated"] < twinpipe.search(str(path), devices=8)[
        "configs_evaluated"]
    for bad, what in (({"sharding": "zero3"}, "sharding 'zero3'"), ({"sharding": []}, "sharding: expected one"),
                      ({"tp_comm_overlap": "maybe"}, "tp_comm_overlap 'maybe'"),
                      ({"max_chunks": -1}, "max_chunks -1"),
                      ({"max_context_parallel": -1, "max_chunks": -5}, "max_context_parallel -1:")):
        with pytest.raises(twinpipe.ConfigError, match=what):
            twinpipe.search(str(path), **bad)


# execute and compare: the program's run (its wall times aside) and its comparison.

def _untimed(figures):
    """execute --json's figures that do not depend on the wall clock."""
    return {"losses": figures["losses"], "final_loss": figures["final_loss"], "param_norm": figures["param_norm"],
            "peak_memory_bytes": [d["peak_memory_bytes"] for d in figures["devices"]],
            "links": [(l["src"], l["dst"], l["bytes"]) for l in figures["links"]], "keys": list(figures)}


def test_execute_trains_as_the_program(cli, tmp_path):
    path = SOURCE_DIR / "examples" / "quickstart.json"
    run = cli("execute", path, "--steps", 2, "--seed", 7, "-s", "1f1b", "--json", "--trace", tmp_path / "m.json")
    assert run.returncode == 0, run.stderr
    expected = json.loads(run.stdout)
    result = twinpipe.execute(str(path), steps=2, seed=7, name="1f1b")
    assert _untimed(result) == _untimed(expected)
    # No note but, on a CPU whose model OpenBLAS does not know, the one on its kernels.
    assert len(result["losses"]) == 2 and [n for n in result.notes if not n.startswith("OpenBLAS took")] == []
    assert [e["kind"] for e in result.timeline] == [e["kind"] for e in json.loads((tmp_path / "m.json").read_text())["events"]]
    # The same schedule given as an object trains alike; a GPU config on the cpu backend is noted.
    config = twinpipe.load_config(str(path))
    again = twinpipe.execute(config, twinpipe.schedule(config, name="1f1b"), steps=2, seed=7)
    assert again["losses"] == result["losses"] and again["param_norm"] == result["param_norm"]
    h100 = INPUTS / "exec_h100_tiny.json"
    run = cli("execute", h100, "--steps", 1)
    assert run.returncode == 0, run.stderr
    assert twinpipe.execute(str(h100), steps=1).notes == cli_notes(run, "execute") != []


def test_execute_refuses_as_the_program(cli):
    quickstart = str(SOURCE_DIR / "examples" / "quickstart.json")
    run = cli("execute", quickstart, "--precision", "bf16")
    assert run.returncode == 2
    with pytest.raises(twinpipe.ConfigError) as e:
        twinpipe.execute(quickstart, precision="bf16")
    assert e.value.message == cli_error(run, "execute")
    for bad in ({"backend": "tpu"}, {"transport": "pigeon"}, {"steps": -1}, {"steps": 1 << 25}, {"steps": 1 << 40},
                {"seed": -5}, {"seed": (1 << 62) + 1}, {"seed": 1 << 63}, {"timeout": float("nan")}):
        with pytest.raises(twinpipe.ConfigError):
            twinpipe.execute(quickstart, **bad)
    small = str(INPUTS / "exec_small_memory.json")
    run = cli("execute", small)
    assert run.returncode == 1
    with pytest.raises(twinpipe.RuntimeFailure) as e:
        twinpipe.execute(small)
    assert e.value.message == cli_error(run, "execute")
    assert twinpipe.execute(small, steps=1, force=True)["final_loss"] > 0
    with pytest.raises(twinpipe.ScheduleError):
        twinpipe.execute(quickstart, twinpipe.schedule(twinpipe.load_config(quickstart)), name="gpipe")


def test_compare_is_the_programs(cli, tmp_path):
    path = SOURCE_DIR / "examples" / "quickstart.json"
    predicted, measured = tmp_path / "p.json", tmp_path / "m.json"
    assert cli("simulate", path, "--trace", predicted).returncode == 0
    assert cli("execute", path, "--steps", 2, "--trace", measured).returncode == 0
    run = cli("compare", predicted, measured, "--json")
    assert run.returncode == 0, run.stderr
    assert twinpipe.compare(predicted, measured).json == run.stdout
    assert twinpipe.compare(json.loads(predicted.read_text()), str(measured)).json == run.stdout
    # Results straight from the calls, as their traces are.
    simulation, execution = twinpipe.simulate(str(path)), twinpipe.execute(str(path), steps=2)
    c = twinpipe.compare(simulation, execution)
    assert c.json == twinpipe.compare(simulation.trace, execution.trace).json
    assert c["step_time_predicted_s"] == simulation["step_time_s"]
    # Traces of different schedules: the program's message, naming both files.
    other = tmp_path / "other.json"
    assert cli("simulate", path, "-s", "1f1b", "--trace", other).returncode == 0
    run = cli("compare", predicted, other)
    assert run.returncode == 2
    with pytest.raises(twinpipe.ConfigError) as e:
        twinpipe.compare(predicted, other)
    assert e.value.message == cli_error(run, "compare")
    with pytest.raises(TypeError):
        twinpipe.compare(3, measured)
    with pytest.raises(twinpipe.ConfigError, match="absent.json: cannot open"):
        twinpipe.compare(tmp_path / "absent.json", measured)
    # A directory and a file that is not text: the program's words, not a Python error.
    run = cli("compare", tmp_path, measured)
    with pytest.raises(twinpipe.ConfigError) as e:
        twinpipe.compare(tmp_path, measured)
    assert run.returncode == 2 and e.value.message == cli_error(run, "compare")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(twinpipe.ConfigError, match="binary.json: not valid JSON"):
        twinpipe.compare(binary, measured)


# calibrate from traces: the program's fit, then the closed loop in Python.

def test_calibrate_from_traces_is_the_programs(cli, tmp_path):
    path = SOURCE_DIR / "examples" / "quickstart.json"
    traces = [tmp_path / f"m{i}.json" for i in range(2)]
    for i, trace in enumerate(traces):
        assert cli("execute", path, "-s", "gpipe", "--steps", 3, "--seed", i, "--trace", trace).returncode == 0
    out = tmp_path / "cal.json"
    run = cli("calibrate", *traces, "--config", path, "-s", "gpipe", "-o", out)
    assert run.returncode == 0, run.stderr
    expected = json.loads(out.read_text())
    calibration = twinpipe.calibrate(traces, str(path), name="gpipe")
    unstamped = lambda c: {k: v for k, v in c.items() if k not in ("command", "commit")}
    assert unstamped(calibration) == unstamped(expected)
    assert calibration["command"] == "twinpipe.calibrate(2 traces, 1 configs)"
    # The same traces as dicts, one config given per trace: one config, the same fit.
    dicts = [json.loads(t.read_text()) for t in traces]
    assert unstamped(twinpipe.calibrate(dicts, [str(path), str(path)], name="gpipe")) == unstamped(expected)
    # Predictions with it, as the program's.
    run = cli("simulate", path, "-s", "gpipe", "--calibration", out, "--json")
    assert twinpipe.simulate(str(path), calibration=calibration, name="gpipe").json == run.stdout
    # Profile, calibrate, predict, run, compare: all in Python.
    profile = twinpipe.execute(str(path), name="gpipe", steps=3)
    predicted = twinpipe.simulate(str(path), calibration=twinpipe.calibrate(profile, str(path), name="gpipe"),
                                  name="gpipe")
    assert set(twinpipe.compare(predicted, profile)) >= {"step_time_error", "per_kind", "devices"}
    # A trace of another plan: the program's message.
    run = cli("calibrate", traces[0], "--config", path, "-s", "interleaved")
    assert run.returncode == 2
    with pytest.raises(twinpipe.ConfigError) as e:
        twinpipe.calibrate(str(traces[0]), str(path), name="interleaved")
    assert e.value.message == cli_error(run, "calibrate")
    with pytest.raises(twinpipe.ConfigError, match="2 traces and 3 configs"):
        twinpipe.calibrate(traces, [str(path)] * 3)


# import_trace: torch.profiler traces read as the program reads them, then compared.

def test_import_trace_is_the_programs(cli, tmp_path):
    profiles = INPUTS / "torch_profile" / "w4"
    ranks = [profiles / f"interleaved.rank{r}.json.gz" for r in range(4)]
    csv = profiles / "interleaved.csv"
    out = tmp_path / "measured.json"
    run = cli("import-trace", *ranks, "--schedule-file", csv, "-o", out)
    assert run.returncode == 0, run.stderr
    measured = twinpipe.import_trace(ranks, csv)
    assert measured.json == out.read_text()
    assert "twinpipe import-trace: " + measured.summary in run.stderr
    # The schedule as an object reads alike; compare takes the result as a trace.
    assert twinpipe.import_trace(ranks, twinpipe.read_schedule(str(csv))).json == measured.json
    with pytest.raises(twinpipe.ScheduleError, match="runs as given"):
        twinpipe.import_trace(ranks, twinpipe.read_schedule(str(csv)), format="torch-csv")
    predicted = tmp_path / "predicted.json"
    config = SOURCE_DIR / "examples" / "mlp_cpu.json"
    assert cli("simulate", config, "--schedule-file", csv, "--trace", predicted).returncode == 0
    run = cli("compare", predicted, out, "--json")
    assert twinpipe.compare(predicted, measured).json == run.stdout
    # A rank missing: the program's message.
    run = cli("import-trace", *ranks[:3], "--schedule-file", csv)
    assert run.returncode == 2
    with pytest.raises(twinpipe.ConfigError) as e:
        twinpipe.import_trace(ranks[:3], csv)
    assert e.value.message == cli_error(run, "import-trace")


# A schedule file is cut for the recompute mode given with it, as the builder's schedule is.

@pytest.mark.parametrize("example, name, recompute", [("transformer_h100.json", "zb-v", "none"),
                                                      ("llama3_8b_h100.json", "dualpipev", "full"),
                                                      ("llama3_8b_h100.json", "1f1b", "selective")])
def test_a_schedule_file_plans_to_the_recompute_given(cli, tmp_path, example, name, recompute):
    path = str(SOURCE_DIR / "examples" / example)
    built = twinpipe.schedule(twinpipe.load_config(path), name=name, recompute=recompute)
    schedule_file = tmp_path / "pipe.txt"
    schedule_file.write_text(built.to_text())
    expected = twinpipe.simulate(path, name=name, recompute=recompute).json
    assert twinpipe.simulate(path, schedule=str(schedule_file), recompute=recompute).json == expected
    run = cli("simulate", path, "--schedule-file", schedule_file, "--recompute", recompute, "--json")
    assert run.returncode == 0, run.stderr
    assert run.stdout == expected
    with pytest.raises(twinpipe.ScheduleError, match="recompute 'sometimes'"):
        twinpipe.simulate(path, schedule=str(schedule_file), recompute="sometimes")


# partition: the program's cut, byte for byte, for every example and algorithm.

@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_partition_is_the_programs(cli, path):
    for algorithm in (None, "minmax", "memory", "gpipe"):
        args = ("--algo", algorithm) if algorithm else ()
        run = cli("partition", path, *args, "--json")
        if run.returncode != 0:  # a cut that cannot fit: the same error, the same kind
            error = twinpipe.RuntimeFailure if run.returncode == 1 else twinpipe.ConfigError
            with pytest.raises(error) as e:
                twinpipe.partition(str(path), algorithm)
            assert e.value.message == cli_error(run, "partition")
            continue
        result = twinpipe.partition(str(path), algorithm)
        assert result.json == run.stdout, algorithm
        cells = result["cells"]  # consecutive layers from the first
        assert cells[0]["first_layer"] == 0
        assert all(b["first_layer"] == a["last_layer"] + 1 for a, b in zip(cells, cells[1:]))


def test_partition_notes_as_the_program(cli):
    path = INPUTS / "interleaved_first_layers_per_device.json"
    run = cli("partition", path, "--json")
    assert run.returncode == 0, run.stderr
    result = twinpipe.partition(str(path))
    assert result.json == run.stdout
    assert result.notes == cli_notes(run, "partition") != []


def test_partition_refuses_what_it_cannot_cut(cli):
    with pytest.raises(twinpipe.ConfigError) as e:
        twinpipe.partition(str(SOURCE_DIR / "examples" / "quickstart.json"), "fastest")
    assert "partition algorithm 'fastest': expected one of" in e.value.message and "minmax" in e.value.message
    run = cli("partition", INPUTS / "too_big.json")
    assert run.returncode == 1
    with pytest.raises(twinpipe.RuntimeFailure) as e:
        twinpipe.partition(str(INPUTS / "too_big.json"))
    assert e.value.message == cli_error(run, "partition")


@pytest.mark.parametrize("framework", ["megatron", "torchtitan"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_export_is_the_programs(cli, path, framework):
    run = cli("export", framework, path)
    if run.returncode != 0:  # a plan the framework cannot run: the same error
        assert run.returncode == 2, run.stderr
        with pytest.raises(twinpipe.ConfigError) as e:
            twinpipe.export(str(path), framework)
        assert e.value.message == cli_error(run, "export")
        return
    text, notes = twinpipe.export(str(path), framework)
    assert text == run.stdout
    assert notes == cli_notes(run, "export")


def test_export_runs_a_schedule_csv_of_the_configs_pipeline_only(cli, tmp_path):
    path = SOURCE_DIR / "examples" / "llama3_8b_h100.json"
    config = twinpipe.load_config(str(path))
    csv = tmp_path / "pipe.csv"
    csv.write_text(twinpipe.schedule(config).to_torch_csv())
    run = cli("export", "torchtitan", path, "--schedule-csv", csv)
    assert run.returncode == 0, run.stderr
    text, _ = twinpipe.export(config, "torchtitan", schedule_csv=csv)
    assert text == run.stdout and str(csv) in text
    # One more micro-batch than the config plans: refused by both, alike.
    other = tmp_path / "other.csv"
    stages = json.loads(path.read_text())["pipeline"]["stages"]
    micro_batches = twinpipe.schedule(config).num_micro_batches
    other.write_text(twinpipe.schedule(stages=stages, micro_batches=micro_batches + 1).to_torch_csv())
    run = cli("export", "torchtitan", path, "--schedule-csv", other)
    assert run.returncode == 2
    with pytest.raises(twinpipe.ScheduleError) as e:
        twinpipe.export(config, "torchtitan", schedule_csv=other)
    assert e.value.message == cli_error(run, "export")
    assert "micro-batches" in e.value.message
    with pytest.raises(twinpipe.ConfigError) as e:
        twinpipe.export(config, "deepspeed")
    assert "expected megatron or torchtitan" in str(e.value)
