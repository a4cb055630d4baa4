"""Cost of torch's exponential by the range of its argument (why the projected kernel clamps at -708).

Best of 30 calls of ``torch.exp(t, out=o)`` on 160,000 float64 values drawn uniformly from
``[-hi, -lo]``, one thread, in nanoseconds per value; then the same on ``[-2000, 0]`` after a
``clamp_min(-708)``. Prints a Markdown table.

    python benchmarks/exp_underflow_speed.py
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch


def best(fn, n: int, repeats: int = 30) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) / n * 1e9


def main() -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print(f"load {os.getloadavg()[0]:.2f}, torch {torch.__version__}\n")
    print("| argument range | ns per exp |\n|---|---:|")
    for lo, hi in [(0, 10), (0, 700), (700, 708), (708, 745), (745, 2000), (0, 2000)]:
        t = -torch.from_numpy(rng.uniform(lo, hi, size=160_000))
        out = torch.empty_like(t)
        print(f"| [-{hi}, -{lo}] | {best(lambda: torch.exp(t, out=out), t.numel()):.2f} |")
    t = -torch.from_numpy(rng.uniform(0, 2000, size=160_000))
    out = torch.empty_like(t)
    print(f"| [-2000, 0], clamped at -708 first | "
          f"{best(lambda: out.copy_(t).clamp_min_(-708.0).exp_(), t.numel()):.2f} |")


if __name__ == "__main__":
    main()
