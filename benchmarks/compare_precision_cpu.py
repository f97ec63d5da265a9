#!/usr/bin/python3
"""Training images/s of cnnengine on the CPU in fp32 and in bf16 (or fp16), side by side in one run:
train_throughput for each model, the precisions alternating, several rounds, the median of each.
Writes the JSON lines and a markdown table (the CPU, its bf16 instructions, date, commit and
command named). Standard library only.

  python3 benchmarks/compare_precision_cpu.py --out benchmarks/results/precision_cpu
  python3 benchmarks/compare_precision_cpu.py --precision fp16 --out benchmarks/results/precision_cpu_fp16
  python3 benchmarks/compare_precision_cpu.py --lower-isa avx512_bf16 --cases resnet18:3x64x64:64 --out ...

A case is model:batch (the input INPUTS names) or model:CxHxW:batch. --lower-isa runs the 16-bit
precision once more in each round with CNN_CPU_ISA set to it (an AMX host's bf16 on AVX512-BF16).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from machine import commit, cpu_flags, cpu_model  # noqa: E402

INPUTS = {"small": "1x28x28", "small-bn": "1x28x28", "resnet18": "3x32x32"}


def steps_of(model, batch, small_images=5120):
    """Timed and warm-up steps: `small_images` images of a small model (about two seconds at the
    default), 256 of any other (resnet18 at 32x32: about four seconds)."""
    if not model.startswith("small"):
        return max(2, 256 // batch), 1
    return max(10, small_images // batch), 3


def cpu_description():
    return cpu_model(), cpu_flags(("avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_bf16", "avx512_vp2intersect")), \
        os.cpu_count()


def throughput(binary, model, batch, precision, image=None, steps=None, library=None, isa=None):
    """One train_throughput run's JSON line: the input INPUTS names unless given, steps_of's steps
    unless given (timed, warm-up), the library from the folder `library` where given, the kernels
    on at most `isa` (CNN_CPU_ISA) where given."""
    steps, warmup = steps or steps_of(model, batch)
    cmd = [binary, "--device", "cpu", "--model", model, "--input", image or INPUTS[model], "--batch", str(batch),
           "--steps", str(steps), "--warmup", str(warmup), "--precision", precision]
    env = dict(os.environ)
    if library:
        env["LD_LIBRARY_PATH"] = os.path.abspath(library)
    if isa:
        env["CNN_CPU_ISA"] = isa
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        with_env = (f"LD_LIBRARY_PATH={library} " if library else "") + (f"CNN_CPU_ISA={isa} " if isa else "")
        sys.exit(f"{with_env}{' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    line = json.loads(next(l for l in reversed(out.stdout.splitlines()) if l.startswith("{")))
    line["load_at_start"] = os.getloadavg()[0]
    line["cpu_isa"] = isa or "best"
    return line


def matching(runs, **fields):
    """The runs whose fields equal `fields`, in the order they ran."""
    return [l for l in runs if all(l[k] == v for k, v in fields.items())]


def median_rate(runs):
    return statistics.median(l["images_per_second"] for l in runs)


def rates_text(runs):
    """Each run's images/s, for a table's runs column."""
    return ", ".join(f"{l['images_per_second']:.0f}" for l in runs)


def parse_case(text):
    """model:batch or model:CxHxW:batch -> (model, input, batch)."""
    parts = text.split(":")
    if len(parts) == 2:
        return parts[0], INPUTS[parts[0]], int(parts[1])
    return parts[0], parts[1], int(parts[2])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "benchmarks", "train_throughput"))
    p.add_argument("--cases", default="small:64,small:256,small-bn:64,resnet18:64",
                   help="model:batch or model:CxHxW:batch, comma-separated (64: train_images' default batch)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--precision", default="bf16", choices=("bf16", "fp16"), help="the one compared with fp32")
    p.add_argument("--lower-isa", help="also the 16-bit precision on at most this instruction set (CNN_CPU_ISA)")
    p.add_argument("--out", required=True, help="writes OUT.jsonl and OUT.md")
    a = p.parse_args()
    cases = [parse_case(c) for c in a.cases.split(",")]
    # (precision, CNN_CPU_ISA): fp32 and the 16-bit precision on the host's best, and on a lower one.
    kinds = [("fp32", None), (a.precision, None)] + ([(a.precision, a.lower_isa)] if a.lower_isa else [])
    runs = []
    for r in range(a.rounds):
        for model, image, batch in cases:
            for precision, isa in kinds if r % 2 == 0 else list(reversed(kinds)):
                line = throughput(a.binary, model, batch, precision, image=image, isa=isa)
                line["round"] = r
                runs.append(line)
                print(f"round {r} {model} {image} batch {batch} {precision} {isa or ''}: "
                      f"{line['images_per_second']:.1f} img/s", flush=True)
    with open(a.out + ".jsonl", "w") as f:
        for line in runs:
            f.write(json.dumps(line) + "\n")

    name, flags, cores = cpu_description()
    device = runs[0]["device"]
    lower = f"{a.precision} on {a.lower_isa}" if a.lower_isa else None
    lines = [
        f"# fp32 and {a.precision} training on the CPU, side by side",
        "",
        f"Written by `benchmarks/compare_precision_cpu.py`; the runs are in `{os.path.basename(a.out)}.jsonl`.",
        "",
        f"- **Command:** `python3 benchmarks/compare_precision_cpu.py {' '.join(sys.argv[1:])}`",
        f"- **Date:** {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; **commit:** `{commit()}`",
        f"- **CPU:** {name} ({', '.join(flags)}), {cores} cores; **ours:** {device}",
        f"- Each case ran {a.rounds} times in each precision, the runs alternating; the table gives the median. "
        "`train_throughput`: synthetic data in memory, AdamW, the largest micro-batch that fits (the whole batch here).",
        ("- bf16: the convolutions' and dense layers' operands rounded to bfloat16, their products summed in float "
         "(AMX's tiles where the CPU has them, else vdpbf16ps where it has AVX512-BF16)" if a.precision == "bf16" else
         "- fp16: the convolutions' and dense layers' operands rounded to IEEE half, their products summed in float "
         "(halves widened with vcvtph2ps on AVX-512), with dynamic loss scaling") +
        "; the values between layers stored in 16 bits where that makes "
        "the plan smaller (the `values` column; docs/design.md, \"16-bit values\"). Weights, gradients and optimizer "
        "state stay fp32. The planned bytes are the trainer's whole plan (persistent blocks and step arena).",
    ]
    if lower:
        lines.append(f"- {lower}: the same runs with `CNN_CPU_ISA={a.lower_isa}`.")
    lower_head = f" {lower} img/s | {lower} / fp32 |" if lower else ""
    lines += [
        "",
        f"| model | input | batch | fp32 img/s | {a.precision} img/s | {a.precision} / fp32 |{lower_head} values | "
        f"fp32 planned | {a.precision} planned | fp32 runs | {a.precision} runs |",
        "| --- | --- | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if lower else "") +
        " --- | ---: | ---: | --- | --- |",
    ]
    for model, image, batch in cases:
        got = {prec: matching(runs, model=model, batch=batch, input=image, precision=prec, cpu_isa="best")
               for prec in ("fp32", a.precision)}
        fp32, other = median_rate(got["fp32"]), median_rate(got[a.precision])
        mib = {prec: f"{got[prec][-1]['planned_bytes'] / 2**20:.1f} MiB" for prec in got}
        lower_cells = ""
        if lower:
            low = median_rate(matching(runs, model=model, batch=batch, input=image, precision=a.precision,
                                       cpu_isa=a.lower_isa))
            lower_cells = f" {low:.1f} | {low / fp32:.2f} |"
        lines.append(f"| {model} | {image} | {batch} | {fp32:.1f} | {other:.1f} | {other / fp32:.2f} |{lower_cells} "
                     f"{got[a.precision][-1].get('values', 'fp32')} | {mib['fp32']} | {mib[a.precision]} | "
                     f"{rates_text(got['fp32'])} | {rates_text(got[a.precision])} |")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
