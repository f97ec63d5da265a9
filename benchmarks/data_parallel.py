#!/usr/bin/env python3
"""Data-parallel throughput on the CPU: `mpirun -np 2 train_images --threads 1` against one
process with one thread, the same network, batch and data, in alternating rounds so that both
see the same load. Reports each round's training images/s (train_images' summary: the epoch's
samples over its training seconds), the median ratio, and the time each rank waited per step for
the other's gradients (after its own backward: the communication computation did not hide).

  benchmarks/data_parallel.py --train build/examples/train_images/train_images --rounds 5 \
      --out benchmarks/results/data_parallel_cpu

writes OUT.md and OUT.jsonl (one line per run). Needs mpirun (openmpi-bin) and a build with MPI.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_flags, cpu_model  # noqa: E402


def vector_flags():
    return cpu_flags(("avx512f", "avx2", "fma"))


def run(command, metrics, env):
    started = datetime.datetime.now(datetime.timezone.utc)
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} exited {result.returncode}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    summary = None
    with open(metrics) as f:
        for line in f:
            record = json.loads(line)
            if record["type"] == "summary":
                summary = record
    return {"started": started.isoformat(timespec="seconds"), "load": os.getloadavg()[0], **summary}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", required=True, help="the train_images binary")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--model", action="append", help="repeatable (default: small and resnet)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--limit", type=int, default=12800, help="training samples per run")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", help="write OUT.md and OUT.jsonl")
    args = parser.parse_args()
    models = args.model or ["small", "resnet"]

    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    common = ["--data", args.data, "--epochs", "1", "--limit", str(args.limit), "--batch", str(args.batch),
              "--threads", "1", "--quiet"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    runs, rows = [], []
    with tempfile.TemporaryDirectory() as work:
        metrics = os.path.join(work, "metrics.jsonl")
        for model in models:
            one_command = [args.train, *common, "--model", model, "--metrics-out", metrics]
            two_command = [args.mpirun, "--oversubscribe", "-np", "2", *one_command]
            ratios, one_rates, two_rates, waits = [], [], [], []
            for r in range(args.rounds):
                one = run(one_command, metrics, env)
                two = run(two_command, metrics, env)
                for ranks, record in ((1, one), (2, two)):
                    runs.append({"model": model, "ranks": ranks, "round": r + 1, **record})
                one_rates.append(one["images_per_second"])
                two_rates.append(two["images_per_second"])
                ratios.append(two["images_per_second"] / one["images_per_second"])
                waits.append(two["communication_seconds_per_step"])
                print(f"{model} round {r + 1}: 1 rank {one['images_per_second']:.0f} img/s, 2 ranks "
                      f"{two['images_per_second']:.0f} img/s ({ratios[-1]:.2f}x), waited "
                      f"{1e3 * two['communication_seconds_per_step']:.2f} ms/step, load {two['load']:.1f}", flush=True)
            rows.append((model, statistics.median(one_rates), statistics.median(two_rates), statistics.median(ratios),
                         min(ratios), max(ratios), statistics.median(waits)))

    header = (f"# Data-parallel throughput on the CPU: 2 ranks against 1, one thread each\n\n"
              f"- CPU: {cpu_model()} ({os.cpu_count()} cores seen; vector units {', '.join(vector_flags())})\n"
              f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='minutes')}, commit {commit}\n"
              f"- runs: train_images --epochs 1 --limit {args.limit} --batch {args.batch} --threads 1, Fashion-MNIST, "
              f"one process against `mpirun -np 2`, {args.rounds} alternating rounds per network\n"
              f"- command: `benchmarks/data_parallel.py {' '.join(sys.argv[1:])}`\n\n"
              "| network | 1 rank, img/s | 2 ranks, img/s | 2 ranks / 1 (median, min to max) | waited per step for the other rank |\n"
              "|---|---|---|---|---|\n")
    table = "".join(f"| {m} | {a:.0f} | {b:.0f} | {r:.2f}x ({lo:.2f} to {hi:.2f}) | {1e3 * w:.2f} ms |\n"
                    for m, a, b, r, lo, hi, w in rows)
    print("\n" + header + table)
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(header + table)
        with open(args.out + ".jsonl", "w") as f:
            for record in runs:
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
