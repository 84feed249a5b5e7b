#!/usr/bin/env python3
"""Predicted against measured step time of a table of runs, as a PNG (no
plotting library needed: the picture is drawn pixel by pixel and written
with zlib).

Reads `twinpipe validate RUNS --json` (its rows[]) once uncalibrated and,
with --calibration, once calibrated: the left panel uncalibrated, the right
calibrated. Both axes are seconds on a log scale over the runs' range; the
grey line is predicted = measured, the light lines +-10%. A dot per run:
blue for bf16 (and fp16/fp32), orange for fp8. Tick labels are seconds.

  scripts/validation_png.py build/twinpipe traces/published/h100-dgx-cloud/runs.jsonl \\
      --calibration traces/published/h100-dgx-cloud/calibration_all.json -o validation.png
"""
import argparse
import json
import math
import struct
import subprocess
import sys
import zlib

# A 3 x 5 font for tick labels.
GLYPHS = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010",
}
SIZE, MARGIN = 420, 50


class Canvas:
    def __init__(self, width, height):
        self.w, self.h = width, height
        self.px = bytearray(b"\xff" * (width * height * 3))

    def dot(self, x, y, rgb):
        if 0 <= x < self.w and 0 <= y < self.h:
            i = 3 * (y * self.w + x)
            self.px[i:i + 3] = bytes(rgb)

    def line(self, x0, y0, x1, y1, rgb):
        n = max(abs(x1 - x0), abs(y1 - y0), 1)
        for k in range(n + 1):
            self.dot(round(x0 + (x1 - x0) * k / n), round(y0 + (y1 - y0) * k / n), rgb)

    def disc(self, x, y, r, rgb):
        for dy in range(-r, r + 1):
            for dx in range(-r, r + 1):
                if dx * dx + dy * dy <= r * r:
                    self.dot(x + dx, y + dy, rgb)

    def text(self, x, y, s, rgb=(0, 0, 0), scale=2):
        for ch in s:
            g = GLYPHS.get(ch)
            if g:
                for k, bit in enumerate(g):
                    if bit == "1":
                        for a in range(scale):
                            for b in range(scale):
                                self.dot(x + (k % 3) * scale + a, y + (k // 3) * scale + b, rgb)
            x += 4 * scale

    def png(self):
        raw = b"".join(b"\x00" + bytes(self.px[3 * self.w * y:3 * self.w * (y + 1)]) for y in range(self.h))
        chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xffffffff)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def rows_of(twinpipe, runs, calibration):
    cmd = [twinpipe, "validate", runs, "--json"] + (["--calibration", calibration] if calibration else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"validation_png: {' '.join(cmd)}: {out.stderr.strip()}")
    return json.loads(out.stdout)["rows"]


def panel(canvas, x0, rows, dtypes, lo, hi):
    scale = lambda s: (math.log(s) - math.log(lo)) / (math.log(hi) - math.log(lo)) * (SIZE - 2 * MARGIN)
    X = lambda s: round(x0 + MARGIN + scale(s))
    Y = lambda s: round(SIZE - MARGIN - scale(s))
    canvas.line(X(lo), Y(lo), X(hi), Y(lo), (0, 0, 0))
    canvas.line(X(lo), Y(lo), X(lo), Y(hi), (0, 0, 0))
    for f, rgb in ((1.0, (150, 150, 150)), (1.1, (215, 215, 215)), (1 / 1.1, (215, 215, 215))):
        canvas.line(X(max(lo, lo / f)), Y(max(lo, lo * f)), X(min(hi, hi / f)), Y(min(hi, hi * f)), rgb)
    tick = 1.0
    while tick < lo:
        tick *= 2
    while tick <= hi:
        canvas.line(X(tick), Y(lo), X(tick), Y(lo) + 5, (0, 0, 0))
        canvas.line(X(lo) - 5, Y(tick), X(lo), Y(tick), (0, 0, 0))
        label = f"{tick:g}"
        canvas.text(X(tick) - 4 * len(label), Y(lo) + 10, label)
        canvas.text(X(lo) - 10 - 8 * len(label), Y(tick) - 5, label)
        tick *= 2
    for r, dtype in zip(rows, dtypes):
        canvas.disc(X(r["measured_s"]), Y(r["predicted_s"]), 3,
                    (230, 120, 20) if dtype == "fp8" else (30, 90, 200))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("twinpipe")
    ap.add_argument("runs")
    ap.add_argument("--calibration")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    dtypes = [json.loads(l)["config"]["model"].get("dtype", "fp32") for l in open(a.runs) if l.strip()]
    sets = [rows_of(a.twinpipe, a.runs, None)] + ([rows_of(a.twinpipe, a.runs, a.calibration)] if a.calibration else [])
    values = [v for rows in sets for r in rows for v in (r["measured_s"], r["predicted_s"])]
    lo, hi = min(values) / 1.15, max(values) * 1.15
    canvas = Canvas(SIZE * len(sets), SIZE)
    for i, rows in enumerate(sets):
        panel(canvas, i * SIZE, rows, dtypes, lo, hi)
    with open(a.output, "wb") as f:
        f.write(canvas.png())
    print(f"validation_png: {a.output}: {len(sets)} panel(s), {len(sets[0])} runs")


if __name__ == "__main__":
    main()
