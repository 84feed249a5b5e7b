#!/usr/bin/env python3
"""Tests of scripts/published_runs.py: the shared schema's table converts row by row, every value the
schema lists becomes the config it stands for, bad input ends with exit 2 and FILE:LINE: COLUMN, and
the vTrain mode writes the committed tables byte for byte.

  python3 scripts/published_runs_test.py   (from anywhere; ctest runs it as scripts.published_runs)
"""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "published_runs.py"
H100 = "traces/published/h100-dgx-cloud"
VTRAIN = "traces/published/vtrain-a100"
HELD_OUT = "traces/published/heldout-dgx-cloud"


def convert(csv_path, *options):
    """Runs the converter from the repository root: (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, str(SCRIPT), str(csv_path), *options], cwd=ROOT, capture_output=True,
                       text=True)
    return p.returncode, p.stdout, p.stderr


def runs_of(stdout):
    return [json.loads(line) for line in stdout.splitlines()]


# The program, whose megatron partition lays out the cells the converter names: ctest's, else the build's.
TWINPIPE = os.environ.get("TWINPIPE_BINARY") or next(
    (str(p) for p in [ROOT / "build" / "twinpipe"] if p.exists()), None)


class CellsTest(unittest.TestCase):
    """A test that holds a config's cells to a list through `twinpipe partition`. Without the program those
    checks are noted and the test skips once its other checks have run."""

    def expect_cells(self, config, expected):
        if not TWINPIPE:
            self.cells_unchecked = True
            return
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(config, f)
            f.flush()
            p = subprocess.run([TWINPIPE, "partition", f.name, "--json"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([cell["first_layer"] for cell in json.loads(p.stdout)["cells"]], expected)

    def tearDown(self):
        if getattr(self, "cells_unchecked", False):
            self.skipTest("no twinpipe program (TWINPIPE_BINARY, build/twinpipe): the cells were not checked")


# A row of the shared schema (Llama-shaped, 2 nodes of 8) that every test below varies, with columns the
# converter must ignore around it.
BASE = {
    "source": "synthetic", "row_id": "synthetic-001", "model": "a model", "layers": "16", "hidden": "2048",
    "heads": "16", "kv_heads": "4", "ffn": "8192", "seq": "4096", "vocab": "32000", "norm": "rmsnorm",
    "mlp": "swiglu", "position": "rope", "precision": "bf16", "gpu": "H100-SXM", "gpus": "16",
    "gpus_per_node": "8", "inter_node": "ib-ndr", "tp": "2", "pp": "2", "dp": "4", "cp": "1", "vp": "1",
    "sequence_parallel": "yes", "data_parallel_sharding": "optimizer", "tp_comm_overlap": "yes",
    "recompute": "none", "micro_batch": "2", "global_batch": "64", "step_time_s": "1.5", "trust": "A",
    "provenance": "made up, with a comma, and a\nline break", "an_unknown_column": "ignored",
}


class Table:
    """A CSV written to a temporary folder; rows are BASE with changes. Line numbers: the header is line 1,
    and each BASE row takes two lines (its provenance holds a line break)."""

    def __init__(self, test, rows, columns=None, text=None):
        self.dir = tempfile.TemporaryDirectory()
        test.addCleanup(self.dir.cleanup)
        self.path = Path(self.dir.name) / "table.csv"
        if text is None:
            columns = columns or list(BASE)
            out = io.StringIO()
            w = csv.DictWriter(out, columns, extrasaction="ignore", lineterminator="\n")
            w.writeheader()
            for changes in rows:
                w.writerow({**BASE, **changes})
            text = out.getvalue()
        self.path.write_text(text)

    def line(self, row_index):
        return 2 + 2 * row_index


class SharedTable(CellsTest):
    def test_the_shared_table_converts_to_86_runs(self):
        code, out, err = convert(f"{H100}/runs.csv")
        self.assertEqual(code, 0, err)
        runs = runs_of(out)
        self.assertEqual(len(runs), 86)
        self.assertIn("86 runs", err)
        # tp_comm_overlap "unknown": on in the 40 rows of tp > 1 with sequence parallelism (their recipes set it),
        # off in the 30 of tp 1 (nothing to overlap).
        self.assertIn("tp_comm_overlap unknown read as on in 40 (tp > 1 with sequence parallelism) and off in 30", err)
        # Rows left out by --tensor-parallel count in no reading: the 30 rows at t = 1 alone.
        code, out, err = convert(f"{H100}/runs.csv", "--tensor-parallel", "1")
        self.assertEqual(code, 0, err)
        self.assertEqual(len(runs_of(out)), 30)
        self.assertIn("30 runs (56 rows left out", err)
        self.assertIn("tp_comm_overlap unknown read as on in 0 (tp > 1 with sequence parallelism) and off in 30", err)
        overlaps = {}
        with open(ROOT / H100 / "runs.csv", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        for run, row in zip(runs, rows):
            p = run["config"]["pipeline"]
            key = (row["tp_comm_overlap"], row["tp"] != "1")
            overlaps.setdefault(key, set()).add(p.get("tp_comm_overlap", False))
        self.assertEqual(overlaps, {("yes", True): {True}, ("unknown", True): {True}, ("unknown", False): {False}})
        gpt = runs[0]  # GPT-3 175B on 128 H100s, bf16, tp 4, pp 8, vp 12
        self.assertEqual((gpt["row"], gpt["source"], gpt["step_time_s"]), (2, f"{H100}/runs.csv:2", 8.91))
        m, t, p, c = (gpt["config"][k] for k in ("model", "training", "pipeline", "cluster"))
        self.assertEqual(m["vocab"], 50688)  # 50257 up to a multiple of 128 x 4
        self.assertEqual((m["dtype"], m["bias"], m["norm"], m["position"], m["kv_heads"]), ("bf16", True, "layernorm",
                                                                                          "learned", 96))
        self.assertEqual((t["batch"], t["microbatches"], t["bytes_per_param"]), (64, 64, 18))
        self.assertEqual((p["schedule"], p["chunks"], p["stages"], p["tensor_parallel"]), ("interleaved", 12, 8, 4))
        self.assertNotIn("p2p", p)
        self.assertEqual(p["partition"], "megatron")
        self.assertNotIn("first_layers", p)
        self.expect_cells(gpt["config"], [0] + list(range(2, 97)))  # 96 cells of one block
        self.assertEqual((c["device"], c["devices"], c["link"], c["inter_node_link"]),
                         ("H100-SXM", 128, "nvlink4", "ib-ndr"))
        by_row = {r["row"]: r["config"] for r in runs}
        llama70 = next(r for r in runs if r["config"]["model"]["layers"] == 80)["config"]
        self.expect_cells(llama70, [0] + [1 + 4 * cell for cell in range(1, 4 * 5)])  # 4 blocks a cell
        self.assertEqual((llama70["model"]["bias"], llama70["model"]["vocab"]), (False, 128512))
        llama8 = [r for r in by_row.values() if r["model"]["layers"] == 32]
        self.assertTrue(llama8)
        for config in llama8:
            self.assertEqual(config["pipeline"]["context_parallel"], 2)
            self.assertEqual(config["training"]["batch"], 32)  # global_batch / dp, whatever the scale
            self.assertEqual((config["pipeline"]["schedule"], config["pipeline"]["p2p"]), ("1f1b", "blocking"))
            self.assertFalse(config["pipeline"]["sequence_parallel"])

    def test_the_committed_runs_jsonl_is_what_the_script_writes(self):
        code, out, err = convert(f"{H100}/runs.csv")
        self.assertEqual(code, 0, err)
        self.assertEqual(out, (ROOT / H100 / "runs.jsonl").read_text())


class EveryListedValue(CellsTest):
    """The values the shared table does not hold, each in a row of its own."""

    def convert_rows(self, rows, *options, columns=None):
        table = Table(self, rows, columns)
        code, out, err = convert(table.path, *options)
        self.assertEqual(code, 0, err)
        runs = runs_of(out)
        self.assertEqual([r["row"] for r in runs], [table.line(i) for i in range(len(rows))])
        self.assertEqual([r["source"] for r in runs], [f"{table.path}:{r['row']}" for r in runs])
        return [r["config"] for r in runs], err

    def test_unknown_overlap_read_as_megatrons_default(self):
        configs, err = self.convert_rows([{"tp_comm_overlap": "unknown"}, {}], "--tp-comm-overlap-unknown", "off")
        self.assertEqual([c["pipeline"]["tp_comm_overlap"] for c in configs], [False, True])
        self.assertIn("tp_comm_overlap unknown read as on in 0 (tp > 1 with sequence parallelism) and off in 1", err)

    def test_values_absent_from_the_shared_rows(self):
        rows = [
            {"precision": "fp16"},
            {"gpu": "A100-80GB", "inter_node": "ib-hdr"},
            {"gpu": "H200", "inter_node": "roce"},
            {"data_parallel_sharding": "none"},
            {"data_parallel_sharding": "full"},
            {"recompute": "selective"},
            {"recompute": "full"},
            {"recompute": "unknown"},
            {"tp_comm_overlap": "unknown"},
            {"tp_comm_overlap": "unknown", "sequence_parallel": "no"},
            {"tp_comm_overlap": "unknown", "tp": "1", "dp": "8", "sequence_parallel": "yes"},
            {"cp": "2", "dp": "2"},
            {"vp": "4"},
            {"sequence_parallel": "no"},
            {"mlp": "squared-relu", "norm": "layernorm", "position": "learned"},
            {"tp": "1", "dp": "8", "sequence_parallel": "yes"},
        ]
        configs, err = self.convert_rows(rows)
        (fp16, a100, h200, unsharded, fsdp, selective, full, unknown, unknown_overlap, unknown_overlap_no_sp,
         unknown_overlap_tp1, cp, vp, no_sp, gpt, tp1) = configs
        self.assertEqual((fp16["model"]["dtype"], fp16["training"]["bytes_per_param"]), ("fp16", 20))
        self.assertEqual(a100["model"]["dtype"], "bf16")
        self.assertEqual(a100["training"]["bytes_per_param"], 18)
        self.assertEqual((a100["cluster"]["device"], a100["cluster"]["link"], a100["cluster"]["inter_node_link"]),
                         ("A100-80GB", "nvlink3", "ib-hdr"))
        self.assertEqual((h200["cluster"]["device"], h200["cluster"]["link"], h200["cluster"]["inter_node_link"]),
                         ("H200", "nvlink4", "roce"))
        self.assertEqual(unsharded["training"]["data_parallel_sharding"], "none")
        self.assertEqual(fsdp["training"]["data_parallel_sharding"], "full")
        self.assertEqual(selective["pipeline"]["recompute"], "selective")
        self.assertNotIn("recompute_granularity", selective["pipeline"])
        self.assertEqual((full["pipeline"]["recompute"], full["pipeline"]["recompute_granularity"]), ("full", "layer"))
        self.assertEqual(full["pipeline"]["recompute_timing"], "in-backward")
        self.assertEqual(unknown["pipeline"]["recompute"], "none")
        self.assertIn("recompute unknown read as none in 1 rows", err)
        # unknown: on where tp > 1 with sequence parallelism (as the recipes run), off without it (TE's overlap
        # splits sequence parallelism's collectives); the BASE row says yes.
        self.assertIs(unknown_overlap["pipeline"]["tp_comm_overlap"], True)
        self.assertIs(unknown_overlap_no_sp["pipeline"]["tp_comm_overlap"], False)
        self.assertIs(unknown_overlap_tp1["pipeline"]["tp_comm_overlap"], False)  # sequence_parallel yes, but t = 1
        self.assertIs(fp16["pipeline"]["tp_comm_overlap"], True)
        self.assertIn("tp_comm_overlap unknown read as on in 1 (tp > 1 with sequence parallelism) and off in 2", err)
        # cp: the replica's 32 sequences shared by its 2 context-parallel ranks.
        self.assertEqual(cp["pipeline"]["context_parallel"], 2)
        self.assertEqual((cp["training"]["batch"], cp["training"]["microbatches"]), (32, 16))
        self.assertEqual(fp16["pipeline"]["context_parallel"], 1)
        self.assertEqual((vp["pipeline"]["schedule"], vp["pipeline"]["chunks"]), ("interleaved", 4))
        self.assertNotIn("p2p", vp["pipeline"])
        self.expect_cells(vp, [0, 3, 5, 7, 9, 11, 13, 15])  # 16 blocks in 8 cells
        self.assertEqual((fp16["pipeline"]["schedule"], fp16["pipeline"]["p2p"]), ("1f1b", "blocking"))
        self.assertNotIn("chunks", fp16["pipeline"])
        self.expect_cells(fp16, [0, 9])
        self.assertIs(no_sp["pipeline"]["sequence_parallel"], False)
        self.assertIs(fp16["pipeline"]["sequence_parallel"], True)
        self.assertEqual((gpt["model"]["mlp"], gpt["model"]["norm"], gpt["model"]["position"]),
                         ("squared-relu", "layernorm", "learned"))
        self.assertIs(gpt["model"]["bias"], True)  # layernorm blocks have biases
        self.assertIs(fp16["model"]["bias"], False)  # rmsnorm blocks have none
        self.assertIs(tp1["pipeline"]["sequence_parallel"], False)  # nothing to shard at tp 1
        self.assertEqual(tp1["model"]["vocab"], 32000)  # a multiple of 128 already
        self.assertEqual(fp16["model"]["vocab"], 32000)  # and of 256
        self.assertIn("sequence_parallel yes at tp 1 as off in 2", err)
        # yes without sequence parallelism, or at tp 1: off, as NeMo's comm-overlap setup turns it off there.
        self.assertIs(no_sp["pipeline"]["tp_comm_overlap"], False)
        self.assertIs(tp1["pipeline"]["tp_comm_overlap"], False)
        self.assertIn("tp_comm_overlap yes without tp > 1 and sequence parallelism as off in 2", err)
        for config in configs:
            self.assertEqual((config["model"]["attention"], config["model"]["causal"]), ("fused", True))
            self.assertIs(config["model"]["tied_embeddings"], False)
            self.assertEqual(config["training"]["optimizer"], "adam")
            self.assertEqual(config["model"]["kv_heads"], 4)

    def test_uneven_cells_give_the_first_cells_one_more_block(self):
        configs, _ = self.convert_rows([{"layers": "9", "vp": "2"}, {"layers": "7", "pp": "2", "vp": "1"},
                                        {"layers": "4", "vp": "2"}])
        for config in configs:
            self.assertEqual(config["pipeline"]["partition"], "megatron")
            self.assertNotIn("account_for_embedding", config["pipeline"])
            self.assertNotIn("account_for_loss", config["pipeline"])
        # 9 blocks in 4 cells: 3, 2, 2, 2 (layer 0 the embedding, 10 the head)
        self.expect_cells(configs[0], [0, 4, 6, 8])
        self.expect_cells(configs[1], [0, 5])  # 4 and 3
        self.expect_cells(configs[2], [0, 2, 3, 4])  # one each

    def test_the_embedding_and_the_loss_take_a_slot_where_only_then_the_split_is_even(self):
        configs, _ = self.convert_rows([{"layers": "14", "vp": "2"}, {"layers": "6", "vp": "4"},
                                        {"layers": "13", "vp": "2"}])
        accounts = [(c["pipeline"].get("account_for_embedding"), c["pipeline"].get("account_for_loss"))
                    for c in configs]
        self.assertEqual(accounts, [(True, True), (True, True), (None, None)])
        # 14 blocks + 2 in 4 cells of 4 slots: embedding + 3 blocks, 4, 4, 3 blocks + the head (layer 15)
        self.expect_cells(configs[0], [0, 4, 8, 12])
        # 6 + 2 in 8 cells: the embedding alone, one block each, the head alone (layer 7)
        self.expect_cells(configs[1], list(range(8)))
        # 13 + 2 is not a multiple of 4: Megatron's plain split, 4, 3, 3, 3
        self.expect_cells(configs[2], [0, 5, 8, 11])

    def test_the_vocabulary_is_padded_to_128_times_tp(self):
        configs, _ = self.convert_rows([{"vocab": "50257", "tp": "8", "dp": "1"},
                                        {"vocab": "128256", "tp": "8", "dp": "1"},
                                        {"vocab": "50257", "tp": "1", "dp": "8", "sequence_parallel": "no"}])
        self.assertEqual([c["model"]["vocab"] for c in configs], [51200, 129024, 50304])

    def test_bias_option(self):
        rows = [{"norm": "layernorm"}, {"norm": "rmsnorm"}]
        self.assertEqual([c["model"]["bias"] for c in self.convert_rows(rows, "--bias", "auto")[0]], [True, False])
        self.assertEqual([c["model"]["bias"] for c in self.convert_rows(rows, "--bias", "yes")[0]], [True, True])
        self.assertEqual([c["model"]["bias"] for c in self.convert_rows(rows, "--bias", "no")[0]], [False, False])

    def test_columns_are_read_by_name_in_any_order(self):
        columns = list(reversed(BASE))
        in_order, _ = self.convert_rows([{}, {"precision": "fp8"}])
        reversed_, _ = self.convert_rows([{}, {"precision": "fp8"}], columns=columns)
        self.assertEqual(in_order, reversed_)
        self.assertEqual(reversed_[1]["model"]["dtype"], "fp8")
        self.assertEqual(reversed_[1]["training"]["bytes_per_param"], 18)

    def test_filters(self):
        table = Table(self, [{}, {"layers": "8"}, {"tp": "1", "dp": "8", "sequence_parallel": "no"}])
        code, out, err = convert(table.path, "--layers", "16", "--tensor-parallel", "2")
        self.assertEqual(code, 0, err)
        self.assertEqual([r["row"] for r in runs_of(out)], [2])
        self.assertIn("1 runs (2 rows left out", err)
        # --gpu keeps one device kind's rows (a table may mix them; calibrate --runs fits one kind); a kind no
        # row is on is named, with the table's kinds.
        table = Table(self, [{}, {"gpu": "A100-80GB", "inter_node": "ib-hdr"}, {"gpu": "H200"}, {}])
        code, out, err = convert(table.path)
        self.assertEqual(code, 0, err)
        self.assertEqual([r["config"]["cluster"]["device"] for r in runs_of(out)],
                         ["H100-SXM", "A100-80GB", "H200", "H100-SXM"])
        code, out, err = convert(table.path, "--gpu", "H100-SXM", "--gpu", "H200")
        self.assertEqual(code, 0, err)
        self.assertEqual([r["row"] for r in runs_of(out)], [table.line(0), table.line(2), table.line(3)])
        self.assertIn("3 runs (1 rows left out", err)
        code, out, err = convert(table.path, "--gpu", "H100-PCIe")
        self.assertEqual((code, out), (2, ""), err)
        self.assertIn(f"{table.path}: --gpu H100-PCIe: no row is on it (the table's: H100-SXM, A100-80GB, H200)",
                      err)


class BadInput(unittest.TestCase):
    """Each bad table ends with exit 2, nothing on stdout, and FILE:LINE: COLUMN: on stderr."""

    def assertRefused(self, table, line, column, *words):
        code, out, err = convert(table.path)
        self.assertEqual(code, 2, err)
        self.assertEqual(out, "")
        self.assertNotIn("Traceback", err)
        self.assertIn(f"{table.path}:{line}: {column}: ", err)
        for word in words:
            self.assertIn(word, err)
        return err

    def test_a_missing_column(self):
        for column in ("kv_heads", "step_time_s", "recompute", "inter_node"):
            with self.subTest(column=column):
                columns = [c for c in BASE if c != column]
                err = self.assertRefused(Table(self, [{}], columns), 1, column, "missing column")
                self.assertEqual(err.count("missing column"), 1)

    def test_a_column_named_twice(self):
        text = "tp," + ",".join(BASE) + "\n"
        self.assertRefused(Table(self, [], text=text), 1, "tp", "named twice")

    def test_values_outside_the_lists(self):
        cases = {"precision": "fp4", "gpu": "H100", "inter_node": "ethernet", "norm": "batchnorm", "mlp": "relu",
                 "position": "alibi", "sequence_parallel": "true", "data_parallel_sharding": "zero3",
                 "tp_comm_overlap": "no", "recompute": "partial"}
        for column, value in cases.items():
            with self.subTest(column=column):
                self.assertRefused(Table(self, [{}, {column: value}]), 4, column, "expected one of", repr(value))

    def test_non_integers(self):
        for column, value in [("layers", "16.0"), ("hidden", ""), ("tp", "two"), ("gpus", "-16"), ("vp", "0"),
                              ("global_batch", "6.4e1"), ("gpus_per_node", "8 GPUs")]:
            with self.subTest(column=column):
                self.assertRefused(Table(self, [{column: value}]), 2, column, "expected an integer", repr(value))

    def test_integers_beyond_what_a_config_holds(self):
        self.assertRefused(Table(self, [{"layers": "99999999999999999999"}]), 2, "layers",
                           "expected an integer from 1 to 2147483647", "'99999999999999999999'")

    def test_step_times(self):
        for value in ("0", "-1.5", "nan", "inf", "1.5 s", "", "2e6"):
            with self.subTest(value=value):
                self.assertRefused(Table(self, [{"step_time_s": value}]), 2, "step_time_s",
                                   "expected a positive number")

    def test_inconsistent_rows(self):
        cases = [
            ({"gpus": "32"}, "gpus", "tp x pp x dp x cp = 2 x 2 x 4 x 1 = 16, got 32"),
            ({"cp": "2"}, "gpus", "= 32, got 16"),
            ({"global_batch": "60"}, "global_batch", "dp x micro_batch = 4 x 2 = 8"),
            ({"layers": "3", "vp": "2"}, "layers", "at least pp x vp = 2 x 2 = 4 blocks"),
            ({"layers": "5", "vp": "4"}, "layers", "or 2 fewer when the embedding and the loss take"),
            ({"kv_heads": "5"}, "kv_heads", "a divisor of heads (16)"),
            ({"pp": "1", "dp": "8", "vp": "2"}, "vp", "expected 1 when pp is 1"),
        ]
        for changes, column, words in cases:
            with self.subTest(column=column, changes=changes):
                self.assertRefused(Table(self, [{}, changes]), 4, column, words)

    def test_every_bad_row_is_named(self):
        err = self.assertRefused(Table(self, [{"tp": "x"}, {}, {"mlp": "relu"}]), 2, "tp")
        self.assertIn(":6: mlp: ", err)
        self.assertEqual(len(err.splitlines()), 2)

    def test_a_short_row_and_a_long_row(self):
        header = ",".join(c for c in BASE if c != "provenance")
        values = [BASE[c] for c in BASE if c != "provenance"]
        short = header + "\n" + ",".join(values[:5]) + "\n"
        self.assertRefused(Table(self, [], text=short), 2, "heads", "row ends before this column")
        long_ = header + "\n" + ",".join(values + ["extra"]) + "\n"
        self.assertRefused(Table(self, [], text=long_), 2, f"field {len(values) + 1}", f"expected {len(values)} fields")

    def test_files_that_are_no_table(self):
        empty = Table(self, [], text="")
        code, out, err = convert(empty.path)
        self.assertEqual((code, out), (2, ""))
        self.assertIn(f"{empty.path}:1: expected a header", err)
        header_only = Table(self, [], text=",".join(BASE) + "\n")
        code, out, err = convert(header_only.path)
        self.assertEqual((code, out), (2, ""))
        self.assertIn(f"{header_only.path}:2: expected a row of a run below the header, got none", err)
        code, out, err = convert(Path(empty.dir.name) / "absent.csv")
        self.assertEqual((code, out), (2, ""))
        self.assertIn("absent.csv: cannot read it", err)
        binary = Table(self, [], text="")
        binary.path.write_bytes(b"layers,hidden\n\xff\xfe,1\n")
        code, out, err = convert(binary.path)
        self.assertEqual((code, out), (2, ""))
        self.assertNotIn("Traceback", err)
        self.assertIn(f"{binary.path}:", err)


class HeldOutTable(CellsTest):
    """The held-out DGX Cloud table (Llama 3.1 405B, Nemotron-4 15B and 340B) is what the script writes."""

    def test_the_committed_runs_jsonl_is_what_the_script_writes(self):
        code, out, err = convert(f"{HELD_OUT}/runs.csv", "--bias", "no")
        self.assertEqual(code, 0, err)
        self.assertIn("108 runs", err)
        self.assertEqual(out, (ROOT / HELD_OUT / "runs.jsonl").read_text())
        runs = runs_of(out)
        # NeMo 2's Llama 3.1 405B: 126 blocks on 8 x 8 cells, the embedding and the loss a slot each
        full = [r["config"] for r in runs if r["config"]["model"]["layers"] == 126
                and (r["config"]["pipeline"]["stages"], r["config"]["pipeline"].get("chunks")) == (8, 8)]
        self.assertTrue(full)
        for config in full:
            self.assertEqual((config["pipeline"]["account_for_embedding"], config["pipeline"]["account_for_loss"]),
                             (True, True))
        self.expect_cells(full[0], [2 * cell for cell in range(64)])
        self.assertTrue(all(r["config"]["model"]["mlp"] == "squared-relu" for r in runs
                            if r["config"]["model"]["vocab"] >= 256000))


class VTrainMode(unittest.TestCase):
    """The vTrain tables the project holds are what the script writes, byte for byte."""

    def test_the_committed_tables_are_regenerated_byte_for_byte(self):
        csv_path = f"{VTRAIN}/single_node_layers_12_20.csv"
        tables = {"runs_all.jsonl": [], "runs.jsonl": ["--tensor-parallel", "1"],
                  "runs_tp.jsonl": ["--tensor-parallel", "2", "--tensor-parallel", "4", "--tensor-parallel", "8"],
                  "runs_layers12.jsonl": ["--tensor-parallel", "1", "--layers", "12"],
                  "runs_layers20.jsonl": ["--tensor-parallel", "1", "--layers", "20"]}
        for name, options in tables.items():
            with self.subTest(table=name):
                code, out, err = convert(csv_path, *options)
                self.assertEqual(code, 0, err)
                self.assertEqual(out.encode(), (ROOT / VTRAIN / name).read_bytes())

    def test_the_schema_is_detected_or_named(self):
        code, out, _ = convert(f"{VTRAIN}/single_node_layers_12_20.csv", "--schema", "vtrain", "--layers", "12",
                               "--tensor-parallel", "1")
        self.assertEqual((code, out.encode()), (0, (ROOT / VTRAIN / "runs_layers12.jsonl").read_bytes()))
        code, out, err = convert(f"{VTRAIN}/single_node_layers_12_20.csv", "--schema", "shared")
        self.assertEqual((code, out), (2, ""))
        self.assertIn(f"{VTRAIN}/single_node_layers_12_20.csv:1: kv_heads: missing column", err)

    def test_bad_vtrain_rows_are_named(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "v.csv"
            path.write_text("gpus,global_batch,micro_batch,hidden,heads,layers,seq,tensor_parallel,data_parallel,"
                            "pipeline_parallel,iteration_time_ms\n4,16,2,1024,16,twelve,1024,1,2,2,140.8\n")
            code, out, err = convert(path)
            self.assertEqual((code, out), (2, ""))
            self.assertIn(f"{path}:2: layers: expected an integer", err)


MOE = "traces/published/moe-dgx-cloud"


class MoeSchema(unittest.TestCase):
    """The MoE runs schema (traces/published/moe-dgx-cloud/README.md): told apart by its header, its
    free-text columns read by their documented meaning."""

    def rows(self):
        with open(ROOT / MOE / "runs.csv", newline="") as f:
            return list(csv.DictReader(f))

    def write(self, d, rows):
        path = Path(d) / "moe.csv"
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        return path

    def test_the_grok_table_converts_to_40_runs(self):
        code, out, err = convert(f"{MOE}/runs.csv")
        self.assertEqual(code, 0, err)
        runs = runs_of(out)
        self.assertEqual(len(runs), 40)
        self.assertIn("grouped_gemm unknown read as Megatron-Core's default (off) in 4", err)
        first = runs[0]["config"]
        # Row 1: Grok-1 proxy, 2 blocks, 8 H100s, tp 4, ep 2, etp 4, BF16, capacity 1.0 padded, no grouped GEMM.
        self.assertEqual(first["model"]["experts"], 8)
        self.assertEqual(first["model"]["top_k"], 2)
        self.assertEqual(first["model"]["moe_ffn"], 32768)
        self.assertEqual(first["model"]["capacity_factor"], 1.0)
        self.assertFalse(first["model"]["grouped_gemm"])
        self.assertEqual((first["model"]["mlp"], first["model"]["norm"], first["model"]["position"]),
                         ("swiglu", "rmsnorm", "rope"))
        self.assertEqual(first["model"]["vocab"], 128512)  # 128256 padded to 128 x 4
        self.assertEqual((first["pipeline"]["expert_parallel"], first["pipeline"]["expert_tensor_parallel"]), (2, 4))
        self.assertTrue(first["pipeline"]["tp_comm_overlap"])
        self.assertEqual(first["training"], {"batch": 512, "bytes_per_param": 18, "data_parallel_sharding":
                                             "optimizer", "microbatches": 512, "optimizer": "adam"})
        last = runs[-1]["config"]  # NeMo 2: etp 1, FP8 without fp8_params, VP 8
        self.assertEqual(last["pipeline"]["expert_tensor_parallel"], 1)
        self.assertEqual((last["pipeline"]["schedule"], last["pipeline"]["chunks"]), ("interleaved", 8))
        self.assertEqual(last["model"]["dtype"], "fp8")
        self.assertNotIn("fp8_params", last["training"])
        fp8_params = [r["config"]["training"].get("fp8_params") for r in runs if r["config"]["model"]["dtype"] == "fp8"]
        self.assertEqual(fp8_params.count(True), 18)  # NeMo 1's recipe says fp8_params=True

    def test_the_committed_runs_jsonl_is_what_the_script_writes(self):
        code, out, _ = convert(f"{MOE}/runs.csv")
        self.assertEqual((code, out.encode()), (0, (ROOT / MOE / "runs.jsonl").read_bytes()))

    def test_bad_rows_are_named(self):
        cases = [
            ("attention", "MLA (DeepSeek)", "attention: multi-head latent attention is not modelled yet"),
            ("edp", "3", "edp: expected etp x ep x edp = tp x cp x dp"),
            ("moe_layer_pattern", "first 3 dense", "moe_layer_pattern: expected 'every layer MoE' or 'every N layers'"),
            ("dispatcher", "flex (DeepEP)", "dispatcher: expected alltoall or allgather"),
            ("token_drop_capacity", "token dropping", "token_drop_capacity: expected 'dropless' or a capacity factor"),
            ("arch_notes", "no bias", "arch_notes: expected the norm"),
            ("head_dim", "96", "head_dim: expected hidden / heads"),
            ("interconnect", "ethernet", "interconnect: expected the inter-node fabric"),
        ]
        for column, value, message in cases:
            with self.subTest(column=column), tempfile.TemporaryDirectory() as d:
                rows = self.rows()[:2]
                rows[1][column] = value
                path = self.write(d, rows)
                code, out, err = convert(path)
                self.assertEqual((code, out), (2, ""))
                self.assertIn(f"{path}:3: {message}", err)

    def test_the_allgather_dispatcher(self):
        with tempfile.TemporaryDirectory() as d:
            rows = self.rows()[:2]
            rows[1]["dispatcher"] = "allgather"
            code, out, err = convert(self.write(d, rows))
            self.assertEqual(code, 0, err)
            first, second = (r["config"]["model"] for r in runs_of(out))
            self.assertNotIn("dispatcher", first)  # alltoall, the default
            self.assertEqual(second["dispatcher"], "allgather")

    def test_every_nth_block_and_dropless(self):
        with tempfile.TemporaryDirectory() as d:
            rows = self.rows()[:1]
            rows[0].update({"moe_layer_pattern": "every 2 layers", "dense_ffn_hidden": "16384",
                            "token_drop_capacity": "dropless", "grouped_gemm": "yes"})
            code, out, err = convert(self.write(d, rows))
            self.assertEqual(code, 0, err)
            model = runs_of(out)[0]["config"]["model"]
            self.assertEqual((model["moe_every"], model["ffn"], model["capacity_factor"], model["grouped_gemm"]),
                             (2, 16384, 0.0, True))


if __name__ == "__main__":
    os.chdir(ROOT)
    unittest.main()
