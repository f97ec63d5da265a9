#!/usr/bin/python3
"""Train the `small` network on Fashion-MNIST on the CPU with PyTorch and with
cnnengine's train_images, same settings, and compare speed (whole process and
training images/s), peak RSS and test accuracy; per-epoch images/s of each run;
and the fraction of the machine's SGEMM peak that our convolutions reach.
Standard library only; run with /usr/bin/python3 so that the PyTorch peer finds
Debian's torch. See benchmarks/peers/README.md and benchmarks/results/README.md.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import cpu_flags, cpu_model, git  # noqa: E402
DATA = "/usr/share/datasets/fashion-mnist"


def run(name, cmd, env=None):
    """Run cmd, echo its output prefixed with name; return (stdout lines, peak RSS MiB,
    whole-process wall seconds, load average when it started)."""
    print(f"[{name}] $ {' '.join(cmd)}", flush=True)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        print(f"[{name}] {lines[-1]}", flush=True)
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{name} failed with exit status {proc.returncode}")
    return lines, usage.ru_maxrss / 1024, wall, load  # Linux reports KiB


def run_pytorch(a):
    cmd = [sys.executable, os.path.join(HERE, "peers", "torch_small_cpu.py"),
           "--epochs", str(a.epochs), "--batch", str(a.batch), "--optimizer", a.optimizer,
           "--lr", str(a.lr), "--threads", str(a.threads), "--seed", "1"]
    if a.limit:
        cmd += ["--limit", str(a.limit)]
    env = None
    if a.peer_blas:  # e.g. the openblas-openmp folder of an unpacked libopenblas0-openmp
        env = dict(os.environ, LD_LIBRARY_PATH=a.peer_blas)
    lines, rss, wall, load = run("pytorch", cmd, env)
    result = json.loads(next(l for l in reversed(lines) if l.startswith('{"peer": "pytorch"')))
    epochs = [float(m.group(1)) for m in (re.search(r"^epoch \d+/\d+: .* ([0-9.]+) images/s", l) for l in lines) if m]
    return {"images_per_second": result["images_per_second"], "process_seconds": wall,
            "test_accuracy": result["test_accuracy"], "peak_rss_mib": rss, "load_at_start": load,
            "epoch_images_per_second": epochs, "raw": result}


def run_ours(a, binary, label):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [binary, "--data", DATA, "--model", "small",
               "--epochs", str(a.epochs), "--batch", str(a.batch), "--optimizer", a.optimizer,
               "--lr", str(a.lr), "--threads", str(a.threads), "--seed", "1",
               "--device", "cpu", "--quiet", "--metrics-out", metrics]
        if a.limit:
            cmd += ["--limit", str(a.limit)]
        lines, rss, wall, load = run(label, cmd)
        with open(metrics) as f:
            records = [json.loads(l) for l in f if l.strip()]
    epochs = [r for r in records if r.get("type") == "epoch"]
    summary = next((r for r in reversed(records) if r.get("type") == "summary"), None)
    if not epochs or summary is None:
        sys.exit(f"{label}: {metrics} has no epoch or no summary record")
    # Epochs have equal size, so the harmonic mean of the per-epoch rates is total images
    # over total training time: the PyTorch peer's definition.
    rates = [r["images_per_second"] for r in epochs]
    # Images per CPU second of the process (every thread): what a busy machine changes least.
    per_cpu = [r["images_per_second"] * r["seconds"] / r["cpu_seconds"] for r in epochs if r.get("cpu_seconds")]
    device = next((l.strip() for l in lines if l.strip().startswith("cpu: Eigen")), None)
    return {"images_per_second": statistics.harmonic_mean(rates), "process_seconds": wall,
            "test_accuracy": summary["test_accuracy"], "peak_rss_mib": rss, "load_at_start": load,
            "epoch_images_per_second": rates, "epoch_images_per_cpu_second": per_cpu, "backend": device,
            "raw": summary}


def sgemm_fraction(a, build, label):
    """Our SGEMM peak (square products, 1 and N threads) and the convolutions' GFLOP/s in a
    short training run, from the build's benchmarks/cpu_profile."""
    profile = os.path.join(build, "benchmarks", "cpu_profile")
    if not os.access(profile, os.X_OK):
        print(f"[{label}] no {profile}: no SGEMM-peak fraction", flush=True)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "profile.json")
        run(label + " profile", [profile, "--gemm-peak", "--epochs", "1", "--limit", str(a.profile_limit),
                                 "--threads", str(a.threads), "--batch", str(a.batch), "--optimizer", a.optimizer,
                                 "--count-every", "0", "--json-out", out])
        with open(out) as f:
            p = json.load(f)
    e = p["epochs"][0]
    return {"sgemm_peak_gflops": p["sgemm_peak_gflops"], "conv_gflops": e["conv_gflops"],
            "conv_fraction_of_sgemm_peak": e["conv_fraction_of_sgemm_peak"],
            "conv_gflops_fastest_calls": e["conv_gflops_fastest_calls"],
            "conv_fraction_of_sgemm_peak_fastest_calls": e["conv_fraction_of_sgemm_peak_fastest_calls"],
            "conv_share_of_training_time": e["conv_seconds"] / e["train_seconds"],
            "images": a.profile_limit, "instruction_set": p["instruction_set"]}


def git_commit():
    return git("rev-parse", "HEAD") or None


def cpu_info():
    return cpu_model(), cpu_flags()


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def binary_of(path):
    """A build folder's train_images, or the path itself."""
    if os.path.isdir(path):
        return os.path.join(path, "examples", "train_images", "train_images"), path
    return path, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ours", action="append", default=None, metavar="BUILD_OR_BINARY",
                   help="a build folder (its examples/train_images/train_images) or a train_images binary; "
                        "repeat to compare builds, e.g. --ours build --ours build-avx2 (default: build)")
    p.add_argument("--train-images", default=None, help="the same as one --ours BINARY")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--repeat", type=int, default=1, help="alternate the programs R times, report medians")
    p.add_argument("--no-pytorch", action="store_true", help="ours only (the per-epoch check)")
    p.add_argument("--profile-limit", type=int, default=12800,
                   help="images of the cpu_profile run that measures the convolutions' share of the SGEMM peak "
                        "(0: skip)")
    p.add_argument("--json-out", default=None)
    p.add_argument("--peer-blas", default=None,
                   help="a folder holding another libblas.so.3 for PyTorch (LD_LIBRARY_PATH)")
    a = p.parse_args()
    ours = (a.ours or []) + ([a.train_images] if a.train_images else [])
    if not ours:
        ours = ["build"]
    builds = []
    for path in ours:
        binary, folder = binary_of(path)
        if not os.access(binary, os.X_OK):
            sys.exit(f"{binary}: not an executable; build it or pass --ours")
        builds.append({"label": "cnnengine " + os.path.normpath(folder), "binary": binary, "build": folder})

    runs = {b["label"]: [] for b in builds}
    if not a.no_pytorch:
        runs = {"pytorch": [], **runs}
    for i in range(a.repeat):
        print(f"--- round {i + 1}/{a.repeat}", flush=True)
        if not a.no_pytorch:
            runs["pytorch"].append(run_pytorch(a))
        for b in builds:
            runs[b["label"]].append(run_ours(a, b["binary"], b["label"]))

    keys = ("images_per_second", "process_seconds", "test_accuracy", "peak_rss_mib")
    med = {name: {k: median_of(rs, k) for k in keys} for name, rs in runs.items()}
    for name, rs in runs.items():
        # Last epoch over first, per run, then the median: the throughput that holds over a run.
        held = [r["epoch_images_per_second"][-1] / r["epoch_images_per_second"][0]
                for r in rs if len(r["epoch_images_per_second"]) > 1]
        med[name]["last_over_first_epoch"] = statistics.median(held) if held else None
        held_cpu = [r["epoch_images_per_cpu_second"][-1] / r["epoch_images_per_cpu_second"][0]
                    for r in rs if len(r.get("epoch_images_per_cpu_second", [])) > 1]
        med[name]["last_over_first_epoch_per_cpu_second"] = statistics.median(held_cpu) if held_cpu else None
    profiles = {}
    if a.profile_limit:
        for b in builds:
            profiles[b["label"]] = sgemm_fraction(a, b["build"], b["label"])

    model, vector = cpu_info()
    print(f"\nsmall on Fashion-MNIST, CPU {model} ({' '.join(vector)}), {a.threads} threads, batch {a.batch}, "
          f"{a.optimizer} lr {a.lr}, {a.epochs} epoch(s) + evaluation, median of {a.repeat}")
    print(f"{'':<26}{'process s':>10}{'train img/s':>12}{'last/first':>11}{'peak RSS MiB':>13}{'test acc':>9}")
    for name, m in med.items():
        label = name
        if name == "pytorch":
            label = f"pytorch {runs['pytorch'][0]['raw']['torch_version']}"
        held = f"{m['last_over_first_epoch']:.3f}" if m["last_over_first_epoch"] is not None else "-"
        print(f"{label:<26}{m['process_seconds']:>10.1f}{m['images_per_second']:>12.1f}{held:>11}"
              f"{m['peak_rss_mib']:>13.1f}{m['test_accuracy']:>9.4f}")
    ratios = {}
    for b in builds:
        name = b["label"]
        if not a.no_pytorch:
            ratios[name] = {
                "whole_process": med["pytorch"]["process_seconds"] / med[name]["process_seconds"],
                "training_images_per_second": med[name]["images_per_second"] / med["pytorch"]["images_per_second"]}
            print(f"{name} / pytorch: {ratios[name]['whole_process']:.2f}x whole process, "
                  f"{ratios[name]['training_images_per_second']:.2f}x training images/s")
        for r in runs[name]:
            print(f"{name} per-epoch images/s: {', '.join(f'{x:.0f}' for x in r['epoch_images_per_second'])}"
                  + (f"; per CPU second: {', '.join(f'{x:.0f}' for x in r['epoch_images_per_cpu_second'])}"
                     if r["epoch_images_per_cpu_second"] else "")
                  + f" (load {r['load_at_start']:.1f} at start)")
        if med[name]["last_over_first_epoch_per_cpu_second"] is not None:
            print(f"{name}: last epoch over first, median: {med[name]['last_over_first_epoch']:.3f} (images/s), "
                  f"{med[name]['last_over_first_epoch_per_cpu_second']:.3f} (images per CPU second)")
        prof = profiles.get(name)
        if prof:
            peak = prof["sgemm_peak_gflops"][str(a.threads)]
            print(f"{name}: convolutions {prof['conv_gflops']:.1f} GFLOP/s over the run = "
                  f"{100 * prof['conv_fraction_of_sgemm_peak']:.1f}% of our {a.threads}-thread SGEMM peak "
                  f"({peak:.1f} GFLOP/s; 1 thread {prof['sgemm_peak_gflops']['1']:.1f}); in their fastest calls "
                  f"{prof['conv_gflops_fastest_calls']:.1f} GFLOP/s = "
                  f"{100 * prof['conv_fraction_of_sgemm_peak_fastest_calls']:.1f}%; "
                  f"{100 * prof['conv_share_of_training_time']:.0f}% of the training time "
                  f"({prof['instruction_set']} build)")
    if not a.no_pytorch:
        print(f"(pytorch BLAS: {', '.join(runs['pytorch'][0]['raw']['blas'])})")

    if a.json_out:
        out = {"benchmark": "compare_cpu", "model": "small", "dataset": "fashion-mnist",
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "commit": git_commit(), "host": platform.node(), "cpu": model, "cpu_vector_flags": vector,
               "cores": os.cpu_count(),
               "settings": {k: getattr(a, k) for k in ("epochs", "batch", "threads",
                                                       "optimizer", "lr", "limit", "repeat")},
               "builds": builds, "median": med, "ratios_ours_over_pytorch": ratios,
               "sgemm_peak_fraction": profiles, "runs": runs}
        with open(a.json_out, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
        print(f"wrote {a.json_out}")


if __name__ == "__main__":
    main()
