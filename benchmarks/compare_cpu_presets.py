#!/usr/bin/python3
"""Training images/s on the CPU, cnnengine against PyTorch side by side in one run, per preset:
ours from benchmarks/train_throughput (`--device cpu`, one synthetic batch in memory, AdamW),
PyTorch's from benchmarks/peers/torch_throughput_cpu.py (the same network, optimizer and batch
shape) in NCHW and in channels_last; the three alternate, several rounds, the median of each, and
the ratio of ours to the faster of PyTorch's two. Writes the JSON lines and a markdown table (CPU,
date, commit, PyTorch's version and the command named). Standard library only; PyTorch runs under
--python (pip's torch, in a virtual environment).

  python3 benchmarks/compare_cpu_presets.py --python /path/to/venv/bin/python \\
      --cases resnet18:3x64x64:64,mobilenetv2:3x224x224:16 --out benchmarks/results/cpu_presets
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from compare_precision_cpu import cpu_description, matching, median_rate, rates_text, throughput  # noqa: E402
from machine import commit  # noqa: E402

FORMATS = ("contiguous", "channels_last")


def peer(python, model, image, batch, memory_format, steps, warmup, threads):
    cmd = [python, os.path.join(HERE, "peers", "torch_throughput_cpu.py"), "--model", model, "--input", image,
           "--batch", str(batch), "--memory-format", memory_format, "--steps", str(steps), "--warmup", str(warmup),
           "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    line = json.loads(next(l for l in reversed(out.stdout.splitlines()) if l.startswith("{")))
    line["load_at_start"] = os.getloadavg()[0]
    return line


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "benchmarks", "train_throughput"))
    p.add_argument("--python", required=True, help="a python with torch")
    p.add_argument("--cases", default="resnet18:3x64x64:64,resnet50:3x64x64:64,mobilenetv2:3x64x64:64",
                   help="model:CxHxW:batch, comma-separated")
    p.add_argument("--steps", type=int, default=3, help="timed steps of each run")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=2, help="PyTorch's threads (ours: train_throughput's default)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", required=True, help="writes OUT.jsonl and OUT.md")
    a = p.parse_args()
    cases = [(c.split(":")[0], c.split(":")[1], int(c.split(":")[2])) for c in a.cases.split(",")]
    # The peer builds only the presets its table has: a case it lacks stops the run before any
    # timing, not after an hour of it.
    usage = subprocess.run([a.python, os.path.join(HERE, "peers", "torch_throughput_cpu.py"), "--help"],
                           capture_output=True, text=True).stdout
    choices = re.search(r"--model\s+\{([^}]*)\}", usage)  # argparse's first mention: the usage line
    known = set("".join(choices.group(1).split()).split(",")) if choices else set()
    missing = [model for model, _, _ in cases if model not in known]
    if missing:
        sys.exit(f"PyTorch's peer has no network for {', '.join(missing)} (it has: {', '.join(sorted(known))})")
    runs = []
    jsonl = open(a.out + ".jsonl", "w")  # written as the runs end, so that a failed run keeps the rest
    for r in range(a.rounds):
        for model, image, batch in cases:
            order = ["ours", *FORMATS] if r % 2 == 0 else [*FORMATS, "ours"]
            for who in order:
                if who == "ours":
                    line = throughput(a.binary, model, batch, "fp32", image=image, steps=(a.steps, a.warmup))
                    line.update(engine="cnnengine")
                else:
                    line = peer(a.python, model, image, batch, who, a.steps, a.warmup, a.threads)
                    line.update(engine="pytorch")
                line.update(case=f"{model}:{image}:{batch}", round=r, who=who)
                runs.append(line)
                jsonl.write(json.dumps(line) + "\n")
                jsonl.flush()
                print(f"round {r} {model} {image} {batch} {who}: {line['images_per_second']:.2f} img/s", flush=True)
    jsonl.close()

    model_name, flags, cores = cpu_description()
    torch_version = next((l["torch"] for l in runs if l["engine"] == "pytorch"), "unknown")
    ours_device = next((l["device"] for l in runs if l["engine"] == "cnnengine"), "")
    lines = [
        "# cnnengine against PyTorch, training on the CPU, side by side",
        "",
        f"Written by `benchmarks/compare_cpu_presets.py`; the runs are in `{os.path.basename(a.out)}.jsonl`.",
        "",
        f"- **Command:** `python3 benchmarks/compare_cpu_presets.py {' '.join(sys.argv[1:])}`",
        f"- **Date:** {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; **commit:** `{commit()}`; "
        f"**PyTorch:** {torch_version} (pip), {a.threads} threads",
        f"- **CPU:** {model_name} ({', '.join(flags)}), {cores} cores; **ours:** {ours_device}",
        f"- Each run: {a.warmup} warm-up and {a.steps} timed steps on one synthetic batch in memory, AdamW, "
        f"fp32; {a.rounds} rounds, the three alternating; the table gives the median. **ours / best** is ours "
        "over the faster of PyTorch's NCHW and channels_last.",
        "",
        "| model | input | batch | ours img/s | PyTorch NCHW | PyTorch channels_last | ours / best | ours runs |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for model, image, batch in cases:
        case = f"{model}:{image}:{batch}"
        ours = median_rate(matching(runs, case=case, who="ours"))
        theirs = {f: median_rate(matching(runs, case=case, who=f)) for f in FORMATS}
        best = max(theirs.values())
        lines.append(f"| {model} | {image} | {batch} | {ours:.2f} | {theirs['contiguous']:.2f} | "
                     f"{theirs['channels_last']:.2f} | {ours / best:.2f} | {rates_text(matching(runs, case=case, who='ours'))} |")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
