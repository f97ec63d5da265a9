#!/usr/bin/env python3
"""The GPU session's report: what scripts/gpu_session.sh left in its output folder, as markdown.

Reads session.log (the machine, the versions, the commit, the CUDA tests' summary), ours.jsonl
(benchmarks/train_throughput), torch_gpu.jsonl (benchmarks/peers/torch_gpu.py) and
main_job.jsonl (train_images' metrics: the main job, and small-bn's lines marked "run"), and
writes the tables the GPU issue asks for, each ratio beside the figures it comes from:

  throughput at batch 256: ours eager and with --cuda-graph, PyTorch eager without and with a
      per-step .item(), and torch.compile; ours over PyTorch eager and over compile
  memory at batch 256: what we reserve against torch.cuda.max_memory_reserved, and what the
      driver says our process holds beyond a bare CUDA context
  the largest batch in the budget: ours (planned, run, one more refused) against PyTorch's (run)
  the main job's accuracy and time, and small-bn's time to 93%

    python3 benchmarks/gpu_report.py OUT_FOLDER [--out REPORT.md]

Standard library only: it runs here on the fetched files, and there.
"""
import argparse
import json
import os
import re
import sys


def read_lines(path):
    records = []
    if not os.path.exists(path):
        return records
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return records


def mib(value):
    return "-" if value is None else f"{value / 2**20:,.1f} MiB"


def number(value, digits=0):
    return "-" if value is None else f"{value:,.{digits}f}"


def ratio(ours, theirs):
    return "-" if not ours or not theirs else f"{ours / theirs:.2f}"


def session_facts(folder):
    facts = {"gpu": None, "commit": None, "date": None, "torch": None, "cuda_tests": None}
    path = os.path.join(folder, "session.log")
    if not os.path.exists(path):
        return facts
    text = open(path, errors="replace").read()
    if m := re.search(r"commit (\S+), (\d+) cores, (\S+)", text):
        facts["commit"], facts["date"] = m.group(1), m.group(3)
    for line in text.splitlines():
        if "torch " in line and " cudnn " in line and not facts["torch"]:
            facts["torch"] = line.strip()
        if re.match(r"^NVIDIA|^[A-Z].*, \d+\.\d+.*, \d+ MiB", line) and not facts["gpu"]:
            facts["gpu"] = line.strip()
    if m := re.findall(r"(All tests passed.*|test cases:.*failed.*)", text):
        facts["cuda_tests"] = m[-1]
    return facts


def find(records, **fields):
    """The first record holding every field given, or an empty one."""
    return next((r for r in records if all(r.get(k) == v for k, v in fields.items())), {})


def throughput_table(ours, torch):
    rows = ["| model | precision | ours eager | ours graph | PyTorch eager | PyTorch eager + .item() | "
            "torch.compile | ours ÷ eager | ours ÷ eager + .item() | ours ÷ compile |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for model in ("resnet18", "small"):
        for precision in ("fp32", "tf32"):
            run = {"kind": "throughput", "model": model, "precision": precision}
            eager = find(ours, mode="eager", **run).get("images_per_second")
            graph = find(ours, mode="graph", **run).get("images_per_second")
            best = max([v for v in (eager, graph) if v], default=None)
            t_eager = find(torch, mode="eager", sync="none", **run).get("images_per_second")
            t_item = find(torch, mode="eager", sync="item", **run).get("images_per_second")
            t_compile = find(torch, mode="compile", **run).get("images_per_second")
            rows.append(f"| {model} | {precision} | {number(eager)} | {number(graph)} | {number(t_eager)} | "
                        f"{number(t_item)} | {number(t_compile)} | {ratio(best, t_eager)} | {ratio(best, t_item)} | "
                        f"{ratio(best, t_compile)} |")
    return rows


def memory_table(ours, torch):
    rows = ["| model | precision | ours reserved | PyTorch max_memory_reserved | ours ÷ PyTorch | "
            "driver: ours beyond the context |", "| --- | --- | --- | --- | --- | --- |"]
    for r in ours:
        if r.get("kind") != "throughput" or r.get("mode") != "eager":
            continue
        theirs = find(torch, kind="throughput", model=r.get("model"), precision=r.get("precision"), mode="eager",
                      sync="none").get("max_memory_reserved")
        rows.append(f"| {r.get('model')} | {r.get('precision')} | {mib(r.get('reserved_bytes'))} | {mib(theirs)} | "
                    f"{ratio(r.get('reserved_bytes'), theirs)} | {mib(r.get('driver_bytes_beyond_context'))} |")
    return rows


def largest_table(ours, torch):
    rows = ["| model | budget | ours (planned, ran 2 steps, one more refused) | ours: driver beyond the context | "
            "PyTorch (run; exact) | ours ÷ PyTorch |", "| --- | --- | --- | --- | --- | --- |"]
    for r in ours:
        if r.get("kind") != "largest_batch":
            continue
        theirs = find(torch, kind="largest_batch", model=r.get("model"))
        checks = f"{r.get('largest_batch')} ({'ran' if r.get('trained_steps') == 2 else 'NOT RUN'}, " \
                 f"{'refused' if r.get('one_more_refused') else 'NOT REFUSED'})"
        exact = "exact" if theirs.get("exact") else "not exact"
        rows.append(f"| {r.get('model')} | {r.get('budget')} | {checks} | {mib(r.get('driver_bytes_beyond_context'))} | "
                    f"{theirs.get('largest_batch', '-')} ({exact}) | "
                    f"{ratio(r.get('largest_batch'), theirs.get('largest_batch'))} |")
    return rows


def main_job_lines(records):
    lines = []
    main = [r for r in records if "run" not in r]
    summary = next((r for r in main if r.get("type") == "summary"), None)
    if summary:
        accuracy = summary.get("test_accuracy")
        lines.append(f"- Main job (`train_images --device cuda`, the default network, {summary.get('epochs')} epochs, "
                     f"batch {summary.get('batch')}): test accuracy "
                     f"{'-' if accuracy is None else f'{100 * accuracy:.2f}%'} (the CPU's: README), "
                     f"{number(summary.get('seconds'), 1)} s in all, {number(summary.get('images_per_second'))} "
                     f"images/s training, host waits {summary.get('host_waits')}.")
    small_bn = [r for r in records if r.get("run") == "small-bn" and r.get("type") == "epoch"]
    elapsed, reached = 0.0, None
    for e in small_bn:
        elapsed += e.get("seconds") or 0
        if reached is None and (e.get("test_accuracy") or 0) >= 0.93:
            reached = (e.get("epoch"), elapsed)
    if small_bn:
        best = max((e.get("test_accuracy") or 0) for e in small_bn)
        lines.append(f"- small-bn (`--augment`): " + (f"first at 93% after epoch {reached[0]}, {reached[1]:.1f} s of training"
                     if reached else f"never at 93% in {len(small_bn)} epochs (best {best:.4f}, {elapsed:.1f} s)") + ".")
    return lines


def report(folder):
    ours = read_lines(os.path.join(folder, "ours.jsonl"))
    torch = read_lines(os.path.join(folder, "torch_gpu.jsonl"))
    jobs = read_lines(os.path.join(folder, "main_job.jsonl"))
    facts = session_facts(folder)
    device = next((r.get("device") for r in ours if r.get("device")), None)
    out = ["# GPU session report", "",
           f"- GPU, driver, memory, clock (nvidia-smi): {facts['gpu'] or '-'}",
           f"- Our backend: {device or '-'}",
           f"- PyTorch: {facts['torch'] or '-'}",
           f"- Date {facts['date'] or '-'}, commit {facts['commit'] or '-'}; command: "
           "`bash scripts/gpu_session.sh test`, then `bash scripts/gpu_session.sh bench` (the exact runs in runs.log)",
           f"- CUDA tests: {facts['cuda_tests'] or 'no summary in session.log'}", "",
           "## Training throughput, images/s (batch 256, one device-resident batch)", ""]
    out += throughput_table(ours, torch)
    out += ["", "## Memory at batch 256", ""] + memory_table(ours, torch)
    out += ["", "## The largest batch in the budget", ""] + largest_table(ours, torch)
    out += ["", "## Fashion-MNIST on the GPU", ""] + (main_job_lines(jobs) or ["- no metrics"])
    errors = [r for r in ours + torch if r.get("kind") in ("error", "skipped")]
    if errors:
        out += ["", "## Errors and skipped measurements", ""]
        out += [f"- {json.dumps(r)[:300]}" for r in errors]
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="the GPU session's output folder")
    p.add_argument("--out", help="write the report here (default: print it)")
    args = p.parse_args()
    text = report(args.folder)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
