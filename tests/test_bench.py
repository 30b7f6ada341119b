"""tools/bench.py --quick runs to the end and prints every figure with a sane value.

Benchmarks are not timed tests (docs/testing.md section 3.10): nothing here checks a target, only that each figure
the issue names is measured, positive and finite, on the interpreter running the tests. The
bench boots its own simulated machine in a subprocess, so this needs no `machine` fixture.
"""

from __future__ import print_function

import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "tools", "bench.py")
TIMEOUT = 600  # seconds: --quick takes about a minute; a hang must still end the test

# Every figure the issue names, and the columns each must have a number in.
REQUIRED = ["bulk_recv", "bulk_send", "round_trips", "connections", "udp_datagrams",
            "select_us_per_idle_socket", "memory_growth_kib_after_10k"]
ALSO = ["bulk_recv_recv", "bulk_recv_makefile", "bulk_recv_urllib", "select_us_1", "select_us_10",
        "select_us_100", "select_us_1000", "poll_us_per_idle_socket", "memory_kib_per_idle_connection"]
KEYS = ("name", "unit", "bitsnet", "ceiling_a", "ceiling_b", "ratio")
# Columns allowed to be "n/a": bitsnet's UDP sockets if UDP is missing (and the raw UDP4 loop
# if its driver is missing); the host's select() with 1000 sockets when a descriptor is above
# FD_SETSIZE (1024) -- the bench process holds the simulator's host sockets too.
MAY_BE_MISSING = {"udp_datagrams": ("bitsnet", "ceiling_b"), "select_us_1000": ("ceiling_a",)}
MAY_BE_ZERO = ("memory_growth_kib_after_10k", "select_us_per_idle_socket", "poll_us_per_idle_socket")
# --quick takes one sample per column, so on a loaded machine (tools/check runs two suites at
# once) the host kernel's sample can come out below bitsnet's: seen at 1.5x. A unit or counting
# error is off by far more than this factor.
SAMPLE_NOISE = 3.0


def run_bench(*args):
    proc = subprocess.Popen([sys.executable, BENCH, "--quick"] + list(args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    try:
        out, err = proc.communicate(timeout=TIMEOUT) if sys.version_info[0] >= 3 else proc.communicate()
    except Exception:
        proc.kill()
        raise
    out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    assert proc.returncode == 0, "bench failed (%s):\n%s\n%s" % (proc.returncode, out[-3000:], err[-3000:])
    return out, err


def sane(value, name, column):
    assert isinstance(value, (int, float)), (name, column, value)
    assert not math.isnan(value) and not math.isinf(value), (name, column, value)
    if name in MAY_BE_ZERO:
        assert value > -1e6, (name, column, value)  # a growth/slope can be ~0, even slightly negative
    else:
        assert value > 0, (name, column, value)


def test_quick_json_has_every_figure_with_sane_values():
    out, _ = run_bench("--json")
    report = json.loads(out)
    assert report["quick"] is True
    assert report["crashes"] == []
    figures = dict((f["name"], f) for f in report["figures"])
    for name in REQUIRED + ALSO:
        assert name in figures, "figure %s missing; have %s" % (name, sorted(figures))
        figure = figures[name]
        for key in KEYS:
            assert key in figure, (name, key)
        for column in ("ceiling_a", "ceiling_b", "bitsnet"):
            if figure[column] is None and column in MAY_BE_MISSING.get(name, ()):
                continue
            sane(figure[column], name, column)
        if figure["bitsnet"] is not None and figure["ceiling_b"]:
            assert abs(figure["ratio"] - figure["bitsnet"] / figure["ceiling_b"]) < 1e-6 * abs(figure["ratio"]) + 1e-9
    # A throughput over EFI cannot beat the host kernel it runs on (beyond sampling noise). A
    # sample that says otherwise is taken once more, alone: under load the host's connection
    # loop has come out at 47/s (SYNs dropped while its peer process waited for a CPU).
    for name in ("bulk_recv", "bulk_send", "round_trips", "connections"):
        figure = figures[name]
        if not figure["bitsnet"] < SAMPLE_NOISE * figure["ceiling_a"]:
            again = json.loads(run_bench("--json", "--only", name)[0])
            figure = dict((f["name"], f) for f in again["figures"])[name]
        assert figure["bitsnet"] < SAMPLE_NOISE * figure["ceiling_a"], (figures[name], figure)


def test_quick_table_prints_a_row_per_figure():
    out, _ = run_bench("--only", "round_trips")
    lines = [line for line in out.splitlines() if line.startswith("round_trips ")]
    assert len(lines) == 1, out
    columns = lines[0].split()
    assert columns[1] == "1/s"
    assert float(columns[2]) > 0 and float(columns[3]) > 0 and float(columns[4]) > 0 and float(columns[5]) > 0
