#!/usr/bin/python3
"""Train the `small` network on Fashion-MNIST on the CPU with PyTorch and with
cnnengine's train_images, same settings, and compare throughput, peak RSS and
test accuracy. Standard library only; run with /usr/bin/python3 so that the
PyTorch peer finds Debian's torch. See benchmarks/peers/README.md.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = "/usr/share/datasets/fashion-mnist"


def run(name, cmd, env=None):
    """Run cmd, echo its output prefixed with name; return (stdout lines, peak RSS MiB)."""
    print(f"[{name}] $ {' '.join(cmd)}", flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        print(f"[{name}] {lines[-1]}", flush=True)
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{name} failed with exit status {proc.returncode}")
    return lines, usage.ru_maxrss / 1024  # Linux reports KiB


def run_pytorch(a):
    cmd = [sys.executable, os.path.join(HERE, "peers", "torch_small_cpu.py"),
           "--epochs", str(a.epochs), "--batch", str(a.batch), "--optimizer", a.optimizer,
           "--lr", str(a.lr), "--threads", str(a.threads), "--seed", "1"]
    if a.limit:
        cmd += ["--limit", str(a.limit)]
    env = None
    if a.peer_blas:  # e.g. the openblas-openmp folder of an unpacked libopenblas0-openmp
        env = dict(os.environ, LD_LIBRARY_PATH=a.peer_blas)
    lines, rss = run("pytorch", cmd, env)
    result = json.loads(next(l for l in reversed(lines) if l.startswith('{"peer": "pytorch"')))
    return {"images_per_second": result["images_per_second"],
            "test_accuracy": result["test_accuracy"], "peak_rss_mib": rss, "raw": result}


def run_ours(a):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [a.train_images, "--data", DATA, "--model", "small",
               "--epochs", str(a.epochs), "--batch", str(a.batch), "--optimizer", a.optimizer,
               "--lr", str(a.lr), "--threads", str(a.threads), "--seed", "1",
               "--device", "cpu", "--metrics-out", metrics]
        if a.limit:
            cmd += ["--limit", str(a.limit)]
        _, rss = run("cnnengine", cmd)
        with open(metrics) as f:
            records = [json.loads(l) for l in f if l.strip()]
    epochs = [r for r in records if r.get("type") == "epoch"]
    summary = next((r for r in reversed(records) if r.get("type") == "summary"), None)
    if not epochs or summary is None:
        sys.exit(f"cnnengine: {metrics} has no epoch or no summary record")
    # Epochs have equal size, so the harmonic mean of the per-epoch rates is total images
    # over total training time: the PyTorch peer's definition.
    ips = statistics.harmonic_mean([r["images_per_second"] for r in epochs])
    return {"images_per_second": ips, "test_accuracy": summary["test_accuracy"],
            "peak_rss_mib": rss, "raw": summary}


def git_commit():
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def cpu_model():
    with open("/proc/cpuinfo") as f:
        return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train-images", default="build/examples/train_images/train_images")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--repeat", type=int, default=1, help="alternate the two R times, report medians")
    p.add_argument("--json-out", default=None)
    p.add_argument("--peer-blas", default=None,
                   help="a folder holding another libblas.so.3 for PyTorch (LD_LIBRARY_PATH)")
    a = p.parse_args()
    if not os.access(a.train_images, os.X_OK):
        sys.exit(f"{a.train_images}: not an executable; build it or pass --train-images")

    runs = {"pytorch": [], "cnnengine": []}
    for i in range(a.repeat):
        print(f"--- round {i + 1}/{a.repeat}", flush=True)
        runs["pytorch"].append(run_pytorch(a))
        runs["cnnengine"].append(run_ours(a))

    med = {name: {k: median_of(rs, k) for k in ("images_per_second", "test_accuracy",
                                                 "peak_rss_mib")}
           for name, rs in runs.items()}
    ratio = med["cnnengine"]["images_per_second"] / med["pytorch"]["images_per_second"]
    torch_raw = runs["pytorch"][0]["raw"]

    print(f"\nsmall on Fashion-MNIST, CPU, {a.threads} threads, batch {a.batch}, "
          f"{a.optimizer} lr {a.lr}, {a.epochs} epoch(s), "
          f"{torch_raw['train_images']} training images, median of {a.repeat}")
    print(f"{'':<24}{'images/s':>12}{'peak RSS MiB':>14}{'test acc':>10}")
    for name, label in (("pytorch", f"pytorch {torch_raw['torch_version']}"),
                        ("cnnengine", "cnnengine")):
        m = med[name]
        print(f"{label:<24}{m['images_per_second']:>12.1f}{m['peak_rss_mib']:>14.1f}"
              f"{m['test_accuracy']:>10.4f}")
    print(f"ratio ours/pytorch: {ratio:.2f}x   (pytorch BLAS: {', '.join(torch_raw['blas'])})")

    if a.json_out:
        out = {"benchmark": "compare_cpu", "model": "small", "dataset": "fashion-mnist",
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "commit": git_commit(), "host": platform.node(), "cpu": cpu_model(),
               "cores": os.cpu_count(),
               "settings": {k: getattr(a, k) for k in ("epochs", "batch", "threads",
                                                       "optimizer", "lr", "limit", "repeat")},
               "median": med, "ratio_ours_over_pytorch": ratio, "runs": runs}
        with open(a.json_out, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
        print(f"wrote {a.json_out}")


if __name__ == "__main__":
    main()
