#!/usr/bin/python3
"""Our CPU kernels for the modern CNN layers against PyTorch's, case by case.

Runs build/benchmarks/layer_kernels (ours) and benchmarks/peers/torch_layer_kernels.py (PyTorch)
alternately --repeat times, each timing every case's forward and backward pass (the median of
--reps calls); takes the median over the runs of each side, and prints and writes a table: case,
pass, ours ms, PyTorch ms, ratio = PyTorch ms / ours ms (above 1: ours is faster), our GFLOP/s
or GB/s, and whether both computed the same thing (the sums of squares of what each pass wrote
agree to 1e-3). Writes benchmarks/results/layer_kernels_cpu.json (the runs, the medians, the
machine, the commit, the command) and the same table as .md.

    flock /tmp/cnn-build.lock /usr/bin/python3 benchmarks/compare_layer_kernels.py --repeat 3 \\
        --peer-blas /tmp/ob/root/usr/lib/x86_64-linux-gnu/openblas-openmp

Debian's torch takes its BLAS from libblas.so.3, the reference BLAS unless another is installed:
PyTorch's transposed convolution (its SlowTranspose2d path) is a matrix product there, 10 times
slower than with OpenBLAS. --peer-blas DIR puts DIR (a folder holding another libblas.so.3, e.g.
of an unpacked libopenblas0-openmp) first on PyTorch's LD_LIBRARY_PATH. The other convolutions
go through oneDNN (conv_backend in the records), which brings its own kernels.
"""
import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from machine import cpu_flags, cpu_model, git  # noqa: E402
PASSES = ("forward", "backward")


def read_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run(cmd, json_path, env=None):
    """Runs one side; returns (header, records, seconds, load at start)."""
    load = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.run(cmd + ["--json", json_path], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (proc.returncode, " ".join(cmd), proc.stderr))
    lines = read_lines(json_path)
    return lines[0], lines[1:], seconds, load


def checks_agree(ours, theirs):
    """'ok', or what differs (relative difference of the sums of squares above 1e-3)."""
    bad = []
    for name, a in ours.items():
        b = theirs.get(name)
        if b is None:
            bad.append(name + " missing")
            continue
        scale = max(abs(a), abs(b), 1e-30)
        if abs(a - b) / scale > 1e-3:
            bad.append("%s %.6g vs %.6g" % (name, a, b))
    return "ok" if not bad else "DIFFERS: " + "; ".join(bad)


def rate_text(r):
    if r.get("gflops"):
        return "%.1f GFLOP/s" % r["gflops"]
    if r.get("gbps"):
        return "%.1f GB/s" % r["gbps"]
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ours", default=os.path.join(ROOT, "build", "benchmarks", "layer_kernels"),
                    help="our layer_kernels binary (default build/benchmarks/layer_kernels)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side, alternating (medians over them)")
    ap.add_argument("--reps", type=int, default=20, help="timed calls of each pass in a run (its median)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--case", default=".*", help="the cases whose name matches this regular expression")
    ap.add_argument("--peer-blas", default=None, help="a folder holding another libblas.so.3 for PyTorch")
    ap.add_argument("--python", default="/usr/bin/python3", help="the Python that has torch")
    ap.add_argument("--json-out", default=os.path.join(ROOT, "benchmarks", "results", "layer_kernels_cpu.json"))
    ap.add_argument("--md-out", default=None, help="default: --json-out with .md")
    ap.add_argument("--no-write", action="store_true", help="print only")
    a = ap.parse_args()
    md_out = a.md_out or os.path.splitext(a.json_out)[0] + ".md"

    common = ["--threads", str(a.threads), "--repeat", str(a.reps), "--warmup", str(a.warmup), "--case", a.case]
    ours_cmd = [a.ours] + common
    peer_cmd = [a.python, os.path.join(ROOT, "benchmarks", "peers", "torch_layer_kernels.py")] + common
    peer_env = None
    if a.peer_blas:
        peer_env = dict(os.environ, LD_LIBRARY_PATH=a.peer_blas + (":" + os.environ["LD_LIBRARY_PATH"]
                                                                   if os.environ.get("LD_LIBRARY_PATH") else ""))

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeat):
            for side, cmd, env in (("ours", ours_cmd, None), ("pytorch", peer_cmd, peer_env)):
                header, records, seconds, load = run(cmd, os.path.join(tmp, "%s_%d.jsonl" % (side, r)), env)
                runs.append({"side": side, "round": r + 1, "header": header, "records": records,
                             "seconds": round(seconds, 2), "load_at_start": load})
                print("round %d %-8s %6.1f s (load at start %.2f)" % (r + 1, side, seconds, load), flush=True)

    # Medians over the runs, per side, case and pass.
    order, shapes, table = [], {}, {}
    for run_ in runs:
        for rec in run_["records"]:
            case = rec["case"]
            if case not in shapes:
                order.append(case)
                shapes[case] = rec.get("shape", "")
            if "error" in rec:
                for p in PASSES:
                    table.setdefault((case, p), {}).setdefault(run_["side"] + "_error", rec["error"])
                continue
            cell = table.setdefault((case, rec["pass"]), {})
            cell.setdefault(run_["side"], []).append(rec)

    rows = []
    for case in order:
        for p in PASSES:
            cell = table.get((case, p), {})
            row = {"case": case, "pass": p, "shape": shapes[case]}
            ours, theirs = cell.get("ours", []), cell.get("pytorch", [])
            if ours:
                row["ours_ms"] = statistics.median(r["ms"] for r in ours)
                row["ours_runs_ms"] = [r["ms"] for r in ours]
                flop, byte = ours[0].get("flop", 0), ours[0].get("bytes", 0)
                row["flop"], row["bytes"] = flop, byte
                if flop:
                    row["ours_gflops"] = flop / row["ours_ms"] / 1e6
                if byte:
                    row["ours_gbps"] = byte / row["ours_ms"] / 1e6
            if theirs:
                row["pytorch_ms"] = statistics.median(r["ms"] for r in theirs)
                row["pytorch_runs_ms"] = [r["ms"] for r in theirs]
                if theirs[0].get("conv_backend"):
                    row["pytorch_conv_backend"] = theirs[0]["conv_backend"]
                if theirs[0]["shape"] != shapes[case]:
                    row["shape_mismatch"] = theirs[0]["shape"]
            if ours and theirs:
                row["ratio"] = row["pytorch_ms"] / row["ours_ms"]
                row["check"] = checks_agree(ours[0]["check"], theirs[0]["check"])
            for side in ("ours", "pytorch"):
                if side + "_error" in cell:
                    row[side + "_error"] = cell[side + "_error"]
            rows.append(row)

    ours_header = next((r["header"] for r in runs if r["side"] == "ours"), {})
    peer_header = next((r["header"] for r in runs if r["side"] == "pytorch"), {})
    commit = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    command = " ".join(shlex.quote(x) for x in [sys.executable, os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)]
                       + sys.argv[1:])
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit + (" (with uncommitted changes)" if dirty else ""),
        "cpu_model": cpu_model(), "cpu_flags": cpu_flags(), "nproc": os.cpu_count(),
        "threads": a.threads, "repeat": a.repeat, "reps": a.reps, "warmup": a.warmup,
        "ours": ours_header.get("backend"), "ours_instruction_set": ours_header.get("instruction_set"),
        "pytorch": peer_header.get("torch"), "pytorch_blas": a.peer_blas or "Debian's libblas.so.3",
        "command": command,
    }

    def fmt(v, f):
        return f % v if v is not None else "-"

    header = ("| case | shape | pass | ours ms | PyTorch ms | PyTorch / ours | ours rate | same result |\n"
              "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
    lines = []
    for row in rows:
        ours_ms = row.get("ours_ms")
        note = row.get("check", "")
        if "ours_error" in row:
            note = "ours: " + row["ours_error"]
        elif "pytorch_error" in row:
            note = "PyTorch: " + row["pytorch_error"]
        rate = rate_text({"gflops": row.get("ours_gflops"), "gbps": row.get("ours_gbps")}) if ours_ms else ""
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["case"], row["shape"], row["pass"], fmt(ours_ms, "%.3f"), fmt(row.get("pytorch_ms"), "%.3f"),
            fmt(row.get("ratio"), "%.2f"), rate, note))

    print()
    print("%s, %d threads, %s; ours %s; PyTorch %s (BLAS: %s)" % (
        meta["cpu_model"], a.threads, meta["date"], meta["ours"], meta["pytorch"], meta["pytorch_blas"]))
    print("%-36s %-9s %10s %10s %8s %15s  %s" % ("case", "pass", "ours ms", "torch ms", "ratio", "ours rate", "check"))
    for row in rows:
        note = row.get("check", "")
        if "ours_error" in row:
            note = "ours: " + row["ours_error"]
        print("%-36s %-9s %10s %10s %8s %15s  %s" % (
            row["case"], row["pass"], fmt(row.get("ours_ms"), "%.3f"), fmt(row.get("pytorch_ms"), "%.3f"),
            fmt(row.get("ratio"), "%.2f"),
            rate_text({"gflops": row.get("ours_gflops"), "gbps": row.get("ours_gbps")}) if "ours_ms" in row else "",
            note))
    slower = [r for r in rows if r.get("ratio") is not None and r["ratio"] < 1]
    if slower:
        print("\nslower than PyTorch: " + ", ".join("%s %s %.2f" % (r["case"], r["pass"], r["ratio"]) for r in slower))

    if a.no_write:
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(a.json_out)), exist_ok=True)
    with open(a.json_out, "w") as f:
        json.dump({"meta": meta, "rows": rows, "runs": runs}, f, indent=1)
        f.write("\n")
    with open(md_out, "w") as f:
        f.write("# Layer kernels on the CPU: ours against PyTorch\n\n")
        f.write("Written by `benchmarks/compare_layer_kernels.py`; the runs are in `%s`.\n\n" % os.path.basename(a.json_out))
        f.write("- **Command:** `%s`\n" % command)
        f.write("- **Date:** %s; **commit:** `%s`\n" % (meta["date"], meta["commit"]))
        f.write("- **Machine:** %s (%s), %s cores; %d threads on both sides\n" % (
            meta["cpu_model"], ", ".join(meta["cpu_flags"]), meta["nproc"], a.threads))
        f.write("- **Ours:** %s; **PyTorch:** %s, BLAS: %s\n" % (meta["ours"], meta["pytorch"], meta["pytorch_blas"]))
        f.write("- Each side ran %d times, alternating; each run times every pass %d times after %d warm-up "
                "calls and reports the median; the table gives the median over the runs. Ratio: PyTorch ms / "
                "ours ms (above 1: ours is faster). Loads at the runs' starts: %s.\n" % (
                    a.repeat, a.reps, a.warmup, ", ".join("%.2f" % r["load_at_start"] for r in runs)))
        f.write("- Rates: GFLOP/s for convolutions (2 x output elements x input channels per group x kernel "
                "area; backward twice that), otherwise GB/s of the least traffic (each input read and each output "
                "written once). Same result: the sums of squares of every tensor the pass wrote agree to 1e-3.\n\n")
        f.write(header + "\n" + "\n".join(lines) + "\n")
    print("\nwrote %s and %s" % (a.json_out, md_out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
