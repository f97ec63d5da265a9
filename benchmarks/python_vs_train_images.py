"""Training from Python against train_images on the main job (the small preset on Fashion-MNIST,
batch 64, one epoch, the CPU): the training images/s of each, in turns, each run a fresh
process, both read from the metrics file's summary (the same writer). Python runs twice: from
the data folder (the loader train_images uses) and from numpy arrays read in place.

    python3 benchmarks/python_vs_train_images.py --binary build/examples/train_images/train_images \\
        --python build/python-venv/bin/python --pythonpath build/python --rounds 3 --out results/python_vs_cli
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import machine

FASHION = "/usr/share/datasets/fashion-mnist"

PYTHON_RUN = r"""
import gzip, sys, numpy as np, cnnengine
source, metrics, epochs, threads, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
model = cnnengine.Model(cnnengine.preset("small", (1, 28, 28), 10), device="cpu", threads=threads, schedule="cosine")
if source == "folder":
    model.fit(cnnengine.open_dataset(sys.argv[6]), batch_size=64, epochs=epochs, verbose=0, metrics=metrics,
              overwrite=True, limit=limit)
else:
    def idx(path):
        with gzip.open(path) as f:
            data = f.read()
        dims = data[3]
        shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
        return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)
    x = idx(sys.argv[6] + "/train-images-idx3-ubyte.gz")
    y = idx(sys.argv[6] + "/train-labels-idx1-ubyte.gz").astype(np.int64)
    if limit:
        x, y = x[:limit], y[:limit]
    model.fit(x, y, batch_size=64, epochs=epochs, verbose=0, metrics=metrics, overwrite=True)
"""


def summary(path):
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if record.get("type") == "summary":
                return record
    raise RuntimeError(f"{path}: no summary line")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True, help="train_images")
    parser.add_argument("--python", default=sys.executable, help="a Python with numpy")
    parser.add_argument("--pythonpath", required=True, help="the folder holding the cnnengine package")
    parser.add_argument("--data", default=FASHION)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="the first this many training images (0: all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", help="PREFIX: PREFIX.jsonl and PREFIX.md")
    args = parser.parse_args()

    environment = dict(os.environ, PYTHONPATH=args.pythonpath)
    runs = {"train_images": [], "python, data folder": [], "python, numpy arrays": []}
    with tempfile.TemporaryDirectory() as scratch:
        metrics = os.path.join(scratch, "metrics.jsonl")
        for round_ in range(args.rounds):
            for name in runs:
                if os.path.exists(metrics):
                    os.remove(metrics)
                if name == "train_images":
                    command = [args.binary, "--data", args.data, "--model", "small", "--epochs", str(args.epochs),
                               "--batch", "64", "--device", "cpu", "--threads", str(args.threads),
                               "--metrics-out", metrics, "--quiet"]
                    if args.limit:
                        command += ["--limit", str(args.limit)]
                else:
                    source = "folder" if "folder" in name else "arrays"
                    command = [args.python, "-c", PYTHON_RUN, source, metrics, str(args.epochs), str(args.threads),
                               str(args.limit), args.data]
                subprocess.run(command, check=True, env=environment, stdout=subprocess.DEVNULL)
                rate = summary(metrics)["images_per_second"]
                runs[name].append(rate)
                print(f"round {round_ + 1}: {name}: {rate:.0f} images/s", flush=True)

    cli = statistics.median(runs["train_images"])
    lines = [f"# Training from Python against train_images\n",
             f"CPU: {machine.cpu_model()} ({', '.join(machine.cpu_flags())}), {args.threads} threads; "
             f"commit {machine.git('rev-parse', '--short', 'HEAD')}; small on {args.data}, batch 64, "
             f"{args.epochs} epoch(s){f', the first {args.limit} images' if args.limit else ''}; medians of "
             f"{args.rounds} rounds taken in turns, each run a fresh process.\n",
             "| run | training images/s (median) | runs | against train_images |",
             "| --- | ---: | --- | ---: |"]
    records = []
    for name, rates in runs.items():
        median = statistics.median(rates)
        lines.append(f"| {name} | {median:.0f} | {', '.join(f'{r:.0f}' for r in rates)} | {median / cli:.3f} |")
        records.append({"run": name, "images_per_second": median, "runs": rates, "ratio_to_train_images": median / cli,
                        "cpu": machine.cpu_model(), "threads": args.threads, "epochs": args.epochs, "limit": args.limit,
                        "commit": machine.git("rev-parse", "HEAD")})
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(text)
        with open(args.out + ".jsonl", "w") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
