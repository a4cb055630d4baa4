"""Wall time of `hdgp --help` and `hdgp predict --help` in fresh processes (issue #43, fast start).

Usage: python benchmarks/cli_start_time.py [SRC_DIR ...] [--runs N]

Each SRC_DIR is an hdgp source folder (e.g. ``src`` of this checkout, and ``src`` of an older
checkout made with ``git worktree add``); each is put first on PYTHONPATH and both commands run
``--runs`` times as ``python -m hdgp ...``. Prints the median and the range in seconds, and whether
torch was imported (``-X importtime`` is not needed: the child reports ``"torch" in sys.modules``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

_PROBE = ("import sys, runpy; sys.argv = ['hdgp'] + sys.argv[1:]\n"
          "try:\n    runpy.run_module('hdgp', run_name='__main__')\n"
          "except SystemExit:\n    pass\n"
          "sys.stderr.write('TORCH=%d' % ('torch' in sys.modules))")


def _time(src: str, args: list[str], runs: int) -> tuple[list[float], bool]:
    env = dict(os.environ, PYTHONPATH=src)
    times, torch_loaded = [], False
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _PROBE, *args], env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        torch_loaded = "TORCH=1" in done.stderr
    return times, torch_loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", default=["src"])
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print("| source | command | median s | min–max s | torch imported |\n|---|---|---|---|---|")
    for src in opts.sources:
        for args in (["--help"], ["predict", "--help"]):
            times, torch_loaded = _time(src, args, opts.runs)
            print(f"| {src} | hdgp {' '.join(args)} | {statistics.median(times):.2f} | "
                  f"{min(times):.2f}–{max(times):.2f} | {'yes' if torch_loaded else 'no'} |")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
