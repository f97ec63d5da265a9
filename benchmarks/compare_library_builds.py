#!/usr/bin/python3
"""Training images/s on the CPU with two builds of libcnnengine, side by side in one run: the same
train_throughput binary loads the library from BEFORE's folder, then AFTER's (LD_LIBRARY_PATH:
the binary's RUNPATH gives way to it), alternating, several rounds, the median of each. For a
change inside the library (a kernel), measured against the commit before it on the same host.
Writes the JSON lines and a markdown table (CPU, date, both commits and the command named).
Standard library only.

  git worktree add /tmp/before COMMIT
  cmake -S /tmp/before -B /tmp/before/build -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build /tmp/before/build --target cnnengine
  python3 benchmarks/compare_library_builds.py --before /tmp/before/build --after build \\
      --cases small-bn:1x28x28:64,resnet18:3x32x32:64 --out benchmarks/results/NAME
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from compare_precision_cpu import matching, median_rate, rates_text, steps_of, throughput  # noqa: E402
from machine import commit, cpu_flags, cpu_model  # noqa: E402


def library_commit(folder):
    """The commit of the tree a build folder was configured from, where CMake's cache names it."""
    try:
        with open(os.path.join(folder, "CMakeCache.txt")) as f:
            source = next(l.split("=", 1)[1].strip() for l in f if l.startswith("CMAKE_HOME_DIRECTORY"))
    except (OSError, StopIteration):
        return "unknown"
    out = subprocess.run(["git", "-C", source, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "benchmarks", "train_throughput"))
    p.add_argument("--before", required=True, help="a folder holding the first build's libcnnengine.so.0")
    p.add_argument("--after", required=True, help="a folder holding the second build's libcnnengine.so.0")
    p.add_argument("--before-commit", help="the commit BEFORE was built from (default: from its CMakeCache.txt)")
    p.add_argument("--after-commit", help="the commit AFTER was built from (default: from its CMakeCache.txt)")
    p.add_argument("--cases", default="small-bn:1x28x28:64,resnet18:3x32x32:64",
                   help="model:CxHxW:batch, comma-separated")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", required=True, help="writes OUT.jsonl and OUT.md")
    a = p.parse_args()
    for folder in (a.before, a.after):
        if not os.path.exists(os.path.join(folder, "libcnnengine.so.0")):
            sys.exit(f"{folder}: no libcnnengine.so.0")
    cases = [(c.split(":")[0], c.split(":")[1], int(c.split(":")[2])) for c in a.cases.split(",")]
    precisions = a.precisions.split(",")
    builds = {"before": a.before, "after": a.after}
    runs = []
    for r in range(a.rounds):
        for model, image, batch in cases:
            # Twice compare_precision_cpu's steps for a small model: about four seconds a run.
            steps = steps_of(model, batch, small_images=10240)
            for precision in precisions:
                for build in ("before", "after") if r % 2 == 0 else ("after", "before"):
                    line = throughput(a.binary, model, batch, precision, image=image, steps=steps, library=builds[build])
                    line.update(build=build, round=r)
                    runs.append(line)
                    print(f"round {r} {model} {precision} {build}: {line['images_per_second']:.1f} img/s", flush=True)
    with open(a.out + ".jsonl", "w") as f:
        for line in runs:
            f.write(json.dumps(line) + "\n")

    lines = [
        "# Two builds of the library, side by side on the CPU",
        "",
        f"Written by `benchmarks/compare_library_builds.py`; the runs are in `{os.path.basename(a.out)}.jsonl`.",
        "",
        f"- **Command:** `python3 benchmarks/compare_library_builds.py {' '.join(sys.argv[1:])}`",
        f"- **Date:** {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; **before:** "
        f"`{a.before_commit or library_commit(a.before)}`; **after:** `{a.after_commit or library_commit(a.after)}`; **train_throughput from:** `{commit()}`",
        f"- **CPU:** {cpu_model()} ({', '.join(cpu_flags(('avx2', 'fma', 'avx512f', 'avx512_bf16')))}), "
        f"{os.cpu_count()} cores; **ours:** {runs[0]['device']}",
        f"- Each case ran {a.rounds} times on each build, the two alternating; the table gives the median. "
        "`train_throughput`: synthetic data in memory, AdamW, the largest micro-batch that fits.",
        "",
        "| model | input | batch | precision | before img/s | after img/s | after / before | before runs | after runs |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for model, image, batch in cases:
        for precision in precisions:
            got = {b: matching(runs, model=model, batch=batch, precision=precision, build=b) for b in builds}
            before, after = median_rate(got["before"]), median_rate(got["after"])
            lines.append(f"| {model} | {image} | {batch} | {precision} | {before:.1f} | {after:.1f} | "
                         f"{after / before:.2f} | {rates_text(got['before'])} | {rates_text(got['after'])} |")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
