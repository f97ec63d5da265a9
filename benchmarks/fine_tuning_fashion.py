#!/usr/bin/env python3
"""Does starting from a trained network pay? Fine-tuning against training from scratch, on
Fashion-MNIST made into image folders. Standard library only.

    python3 benchmarks/fine_tuning_fashion.py --train-images PATH [--work DIR] [--fashion DIR]
        [--out-md FILE] [--out-jsonl FILE] [--model resnet] [--per-class 20,100] [--epochs 12]
        [--batch 32]

1. Image folders of PNGs (scripts/make_task_datasets.py's reader and writer): the source task,
   six of Fashion-MNIST's classes (1,000 training images a class, all 1,000 test), and the target
   task, the other four, with each of --per-class training images a class and all 1,000 test.
2. The network (--model, on 3x32x32: --image-size 32 --channels 3) trained on the source task,
   then exported to ONNX: the "pretrained backbone".
3. On the target task, for --epochs epochs each, the same seed:
   - scratch: the network from random weights, at the default rate 0.001 and at 0.01;
   - fine-tuned: the ONNX model imported (--load), a new head for the four classes, every layer
     trained at 0.001;
   - frozen: the same, the backbone frozen (--freeze backbone), the head at 0.01 (a linear
     probe);
   - frozen, then unfrozen: the backbone unfrozen after half the run at a tenth of the head's 0.01
     (--unfreeze-at, --backbone-lr-scale 0.1).
   Each run's test accuracy on the target's 4,000 test images, its time and its peak memory.

Writes a markdown table (date, CPU, commit, commands) and one JSON line a run.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))
sys.path.insert(0, HERE)
import make_task_datasets as fashion  # noqa: E402
from machine import commit, cpu_model  # noqa: E402

# Six source classes and four target ones, each target class with a kin among the source's (coat
# and shirt: pullover and T-shirt; sandal and ankle boot: sneaker). The head's class count
# differs, so the imported network gets a new head (the same count would keep the source's).
SOURCE_CLASSES = (0, 1, 2, 3, 7, 8)
TARGET_CLASSES = (4, 5, 6, 9)


def write_folder(out, data, classes, per_class):
    """OUT/{train,test}/<class name>/NNNNN.png: per_class[split] images of each class (all: None)."""
    for split in ("train", "test"):
        images, labels, count = data[split]
        written = {c: 0 for c in classes}
        for i in range(count):
            c = labels[i]
            if c not in written or (per_class[split] is not None and written[c] >= per_class[split]):
                continue
            folder = os.path.join(out, split, fashion.CLASS_NAMES[c].replace("/", "-"))
            os.makedirs(folder, exist_ok=True)
            fashion.write_png(os.path.join(folder, "%05d.png" % written[c]), fashion.garment(images, i),
                              fashion.SIDE, fashion.SIDE)
            written[c] += 1


def run(command, log):
    """Runs train_images; (its output, seconds). Fails the benchmark on a non-zero exit."""
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - start
    with open(log, "w") as f:
        f.write(" ".join(command) + "\n" + result.stdout + result.stderr)
    if result.returncode != 0:
        sys.exit("FAILED (%d): %s\n%s" % (result.returncode, " ".join(command), result.stderr[-2000:]))
    return result.stdout, seconds


def test_accuracy(output):
    found = re.search(r"done: test accuracy ([0-9.]+)", output)
    return float(found.group(1)) if found else None


def peak_memory(output):
    found = re.search(r"memory: reserved [^,]+, peak ([0-9.]+ [KMG]iB)", output)
    return found.group(1) if found else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-images", required=True)
    parser.add_argument("--work", default="/tmp/fine-tuning-fashion")
    parser.add_argument("--fashion", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--out-md")
    parser.add_argument("--out-jsonl")
    parser.add_argument("--model", default="resnet")
    parser.add_argument("--per-class", default="20,100", help="training images a target class: a list")
    parser.add_argument("--source-epochs", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()

    data = {split: fashion.load_split(args.fashion, split) for split in ("train", "test")}
    sizes = [int(n) for n in args.per_class.split(",")]
    source = os.path.join(args.work, "source")
    if not os.path.isdir(source):
        write_folder(source, data, SOURCE_CLASSES, {"train": 1000, "test": None})

    shape = ["--image-size", "32", "--channels", "3", "--seed", "1", "--quiet", "--overwrite"]
    pretrained = os.path.join(args.work, "source.onnx")
    source_command = [args.train_images, "--data", source, "--model", args.model, "--epochs", str(args.source_epochs),
                      "--export-onnx", pretrained] + shape
    source_output, source_seconds = run(source_command, os.path.join(args.work, "source.log"))

    half = args.epochs // 2
    runs = [
        ("scratch, lr 0.001", ["--model", args.model]),
        ("scratch, lr 0.01", ["--model", args.model, "--lr", "0.01"]),
        ("fine-tuned, lr 0.001", ["--load", pretrained]),
        ("frozen, lr 0.01", ["--load", pretrained, "--freeze", "backbone", "--lr", "0.01"]),
        ("frozen, then unfrozen, lr 0.01 (backbone 0.001)",
         ["--load", pretrained, "--freeze", "backbone", "--lr", "0.01", "--unfreeze-at", str(half + 1),
          "--backbone-lr-scale", "0.1"]),
    ]
    rows = []
    for size in sizes:
        target = os.path.join(args.work, "target-%d" % size)
        if not os.path.isdir(target):
            write_folder(target, data, TARGET_CLASSES, {"train": size, "test": None})
        common = ["--data", target, "--epochs", str(args.epochs), "--batch", str(args.batch)] + shape
        for name, options in runs:
            command = [args.train_images] + options + common
            log = os.path.join(args.work, "%d_%s.log" % (size, re.sub(r"[^a-z0-9]+", "_", name)))
            output, seconds = run(command, log)
            rows.append({"run": name, "per_class": size, "test_accuracy": test_accuracy(output),
                         "seconds": round(seconds, 1), "peak_memory": peak_memory(output), "command": " ".join(command)})
            print("%3d a class  %-48s test accuracy %.4f  %.1f s  peak %s" % (size, name, rows[-1]["test_accuracy"],
                                                                             seconds, rows[-1]["peak_memory"]))

    stamp = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             "cpu": cpu_model(), "commit": commit(), "model": args.model,
             "epochs": args.epochs, "batch": args.batch, "source_epochs": args.source_epochs,
             "source_test_accuracy": test_accuracy(source_output)}
    if args.out_jsonl:
        with open(args.out_jsonl, "w") as f:
            for row in rows:
                f.write(json.dumps(dict(stamp, engine="cnnengine", **row)) + "\n")
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write("# Fine-tuning an imported network against training from scratch\n\n")
            f.write("- date: %s\n- CPU: %s (2 threads)\n- commit: %s\n" % (stamp["date"], stamp["cpu"], stamp["commit"]))
            f.write("- command: `python3 benchmarks/fine_tuning_fashion.py %s`\n" % " ".join(sys.argv[1:]))
            f.write("- source task: Fashion-MNIST's T-shirt/top, Trouser, Pullover, Dress, Sneaker and Bag, 1,000 "
                    "training images a class, %d epochs of `%s` "
                    "at 3x32x32 (test accuracy %.4f, %.0f s), exported to ONNX: `%s`\n"
                    % (args.source_epochs, args.model, stamp["source_test_accuracy"], source_seconds,
                       " ".join(source_command)))
            f.write("- target task: Coat, Sandal, Shirt and Ankle boot, the training images a class below, tested "
                    "on all 4,000; %d epochs each of batch %d, seed 1\n\n" % (args.epochs, args.batch))
            f.write("| images a class | run | test accuracy | seconds | peak memory |\n"
                    "| ---: | --- | ---: | ---: | ---: |\n")
            for row in rows:
                f.write("| %d | %s | %.4f | %.1f | %s |\n" % (row["per_class"], row["run"], row["test_accuracy"],
                                                             row["seconds"], row["peak_memory"]))
            f.write("\nCommands (the target folder as above):\n\n")
            for row in rows[:len(runs)]:
                f.write("- `%s`\n" % row["command"])


if __name__ == "__main__":
    main()
