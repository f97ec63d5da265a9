#!/usr/bin/env python3
"""Where a training step's device time goes, kernel by kernel, from Nsight Compute's CSV.

Reads the output of
  ncu --clock-control none --metrics gpu__time_duration.sum --csv PROGRAM ...
(ncu's own "==PROF==" lines and the program's output may be mixed in) and prints each kernel's
time and launches per step, the largest first, and the step's summed kernel time: ours beside
benchmarks/peers/torch_gpu_kernels.py's table for PyTorch. Standard library only.

  python3 benchmarks/ncu_kernels.py NCU_OUTPUT --steps 2 [--top 30] [--title TEXT]
"""
import argparse
import collections
import csv

UNIT_MS = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}


def kernel_times(path):
    """(kernel name -> total ms, kernel name -> launches) over every profiled launch."""
    with open(path, errors="replace") as f:
        lines = [line for line in f if line.startswith('"')]
    total, launches = collections.defaultdict(float), collections.Counter()
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"]
        value = float(row["Metric Value"].replace(",", ""))
        total[name] += value * UNIT_MS.get(row.get("Metric Unit", "nsecond"), 1e-6)
        launches[name] += 1
    return total, launches


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ncu_output")
    p.add_argument("--steps", type=int, default=2, help="the training steps the profile covers")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--title", default="")
    a = p.parse_args()
    total, launches = kernel_times(a.ncu_output)
    if not total:
        raise SystemExit(f"ncu_kernels: no gpu__time_duration.sum rows in {a.ncu_output}")
    step_ms = sum(total.values()) / a.steps
    print(f"{a.title}{' ' if a.title else ''}{sum(launches.values())} kernels over {a.steps} steps: "
          f"{step_ms:.3f} ms of kernels a step; per step:")
    for name in sorted(total, key=total.get, reverse=True)[:a.top]:
        print(f"{total[name] / a.steps:9.3f} ms {launches[name] / a.steps:6.1f} x  {name[:110]}")


if __name__ == "__main__":
    main()
