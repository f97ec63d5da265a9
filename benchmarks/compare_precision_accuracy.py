#!/usr/bin/python3
"""Test accuracy on Fashion-MNIST of train_images in fp32 and in 16 bits (bf16, fp16), the same model,
epochs and seed: on the CPU each model's runs side by side, one thread each; on a GPU one after
another. Writes each run's epoch and summary lines (JSON) and a markdown table. Standard library only.

  python3 benchmarks/compare_precision_accuracy.py --out benchmarks/results/precision_cpu_accuracy
  python3 benchmarks/compare_precision_accuracy.py --precisions fp32,fp16 --out benchmarks/results/precision_cpu_accuracy_fp16
  python3 benchmarks/compare_precision_accuracy.py --device cuda --precisions fp32,bf16,fp16 --out OUT
"""
import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from compare_precision_cpu import cpu_description  # noqa: E402
from machine import commit  # noqa: E402


def gpu_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return out[0] if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown (no nvidia-smi)"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "examples", "train_images", "train_images"))
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--models", default="small,small-bn")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--precisions", default="fp32,bf16", help="fp32 first, then those compared with it")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--train-args", default="", help="more train_images arguments for every run (--algo-cache FILE)")
    p.add_argument("--out", required=True, help="writes OUT.jsonl and OUT.md")
    a = p.parse_args()
    precisions = a.precisions.split(",")
    if precisions[0] != "fp32" or len(precisions) < 2:
        sys.exit("--precisions: fp32 first, then at least one other")
    others = precisions[1:]
    results, lines = {}, []
    with tempfile.TemporaryDirectory() as scratch:
        for model in a.models.split(","):
            runs = {}
            for precision in precisions:
                metrics = os.path.join(scratch, f"{model}_{precision}.jsonl")
                cmd = [a.binary, "--data", a.data, "--model", model, "--device", a.device,
                       *(["--threads", "1"] if a.device == "cpu" else []), "--epochs", str(a.epochs), "--seed",
                       str(a.seed), "--precision", precision, "--metrics-out", metrics, "--quiet",
                       *shlex.split(a.train_args)]
                print("$ " + " ".join(cmd), flush=True)
                runs[precision] = (subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
                                   metrics)
                if a.device == "cuda":  # one GPU: one run at a time, each timed alone
                    runs[precision][0].wait()
            for precision, (proc, metrics) in runs.items():
                output = proc.communicate()[0]
                if proc.returncode != 0:
                    sys.exit(f"{model} {precision} failed:\n{output}")
                kept = [json.loads(l) for l in open(metrics) if '"type":"step"' not in l]
                for line in kept:
                    line.update(model=model, precision=precision)
                lines += kept
                results[(model, precision)] = next(l for l in kept if l["type"] == "summary")
    with open(a.out + ".jsonl", "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")

    name, flags, cores = cpu_description()
    machine = f"- **CPU:** {name} ({', '.join(flags)}), {cores} cores"
    if a.device == "cuda":
        machine = f"- **GPU:** {gpu_name()}; **CPU:** {name}, {cores} cores"
    table = [
        f"# {' and '.join(precisions)} training on Fashion-MNIST: test accuracy",
        "",
        f"Written by `benchmarks/compare_precision_accuracy.py`; each run's epoch and summary lines are in "
        f"`{os.path.basename(a.out)}.jsonl`.",
        "",
        f"- **Command:** `python3 benchmarks/compare_precision_accuracy.py {shlex.join(sys.argv[1:])}`",
        f"- **Date:** {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; **commit:** `{commit()}`",
        machine,
        f"- `train_images --device {a.device}{' --threads 1' if a.device == 'cpu' else ''} --epochs {a.epochs} "
        f"--seed {a.seed}` and the defaults (batch 64, AdamW, cosine schedule), {', '.join(precisions)} of a model "
        f"{'side by side' if a.device == 'cpu' else 'one after another'}; the test set (10,000 images) once, at "
        "the end.",
        "",
        "| model | fp32 test accuracy | " + " | ".join(f"{p} test accuracy | {p} - fp32 (points)" for p in others) +
        " | " + " | ".join(f"{p} img/s" for p in precisions) + " |",
        "| --- | ---: | " + " | ".join("---: | ---:" for _ in others) + " | " + " | ".join("---:" for _ in precisions) +
        " |",
    ]
    for model in a.models.split(","):
        fp32 = results[(model, "fp32")]
        row = f"| {model} | {fp32['test_accuracy'] * 100:.2f}% | "
        row += " | ".join(f"{results[(model, p)]['test_accuracy'] * 100:.2f}% | "
                          f"{(results[(model, p)]['test_accuracy'] - fp32['test_accuracy']) * 100:+.2f}" for p in others)
        row += " | " + " | ".join(f"{results[(model, p)]['images_per_second']:.0f}" for p in precisions) + " |"
        table.append(row)
    table.append("")
    for model in a.models.split(","):
        if "fp16" in others and "loss_scale" in results[(model, "fp16")]:
            fp16 = results[(model, "fp16")]
            table.append(f"- {model} in fp16: the loss scale at the end {fp16['loss_scale']:g}, "
                         f"{fp16['skipped_steps']} steps skipped (their gradients overflowed)")
    table.append("")
    if a.device == "cpu":
        table.append("The images/s are one thread each with the other run beside it: the speed comparison is "
                     "`precision_cpu.md`'s.")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(table) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
