"""Loading JPEG photos for training, our loader against PyTorch's DataLoader, on the CPU: the
images/s of one epoch over a class folder of JPEGs (benchmarks/make_jpeg_folder.py makes one),
batch 64, W loader workers, the photo training transforms (a random resized crop to 224 x 224, a
random horizontal flip, floats normalized by ImageNet's mean and standard deviation).

- ours: `BINARY --data DIR --augment photo --image-size 224 --batch 64 --loader-threads W
  --benchmark-loader` (and --ours-extra), its rate the last JSON line of its standard output
  holding "loader_images_per_second" (the binary times itself);
- PyTorch, two ways, each a fresh process running this file with --python: `pil` is the classic
  torchvision.datasets.ImageFolder (PIL decodes) with transforms v1 (RandomResizedCrop(224),
  RandomHorizontalFlip(), ToTensor(), Normalize); `decode_jpeg` is ImageFolder over
  torchvision.io.decode_jpeg(read_file(path)) with transforms.v2 on uint8 tensors
  (RandomResizedCrop(224, antialias=True), RandomHorizontalFlip(), ToDtype(float32, scale=True),
  Normalize). DataLoader(batch_size=64, shuffle=True, num_workers=W), each worker one thread
  (torch.set_num_threads(1), as DataLoader sets); a warm-up of a few batches in the same process,
  then one epoch timed from the iterator's creation (the first batch asked for; the workers kept
  from the warm-up, persistent_workers) to the last batch received: images / seconds.

Every file of the folder is read once before the first run (the page cache warm for both sides).
Rounds take the engines in turn, the first of each round rotating; the table gives medians, per
core (the rate over the cores the workers can use: min(W, cores), at least 1) and ours over the
faster of PyTorch's two.

    /work/venv-torch/bin/python benchmarks/make_jpeg_folder.py --out /work/jpeg256
    python3 benchmarks/loader_vs_torch.py --binary build/examples/train_images/train_images \\
        --data /work/jpeg256 --python /work/venv-torch/bin/python --workers 2 --rounds 3 \\
        --out benchmarks/results/loader_vs_torch

Standard library only; PyTorch's side runs under --python (torch, torchvision and Pillow from pip).
"""
import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import machine  # noqa: E402

PEER_VARIANTS = {
    "pil": "ImageFolder, PIL decoding, transforms v1",
    "decode_jpeg": "ImageFolder over torchvision.io.decode_jpeg, transforms.v2 on uint8",
}
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# ---- PyTorch's side: this file run by --python with --peer-run VARIANT ----------------------------

def one_thread(_worker):
    """DataLoader's worker_init_fn: one intra-op thread a worker (DataLoader sets it already; said
    here so that the run does not depend on it)."""
    import torch
    torch.set_num_threads(1)


def decode_file(path):
    """The decode_jpeg variant's loader: the file's bytes decoded by torchvision (libjpeg-turbo)."""
    from torchvision.io import ImageReadMode, decode_jpeg, read_file
    return decode_jpeg(read_file(path), mode=ImageReadMode.RGB)


def peer_dataset(variant, root, size):
    from torchvision import datasets
    if variant == "pil":
        from torchvision import transforms
        transform = transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
                                        transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
        return datasets.ImageFolder(root, transform=transform)
    import torch
    from torchvision.transforms import v2
    transform = v2.Compose([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip(),
                            v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    return datasets.ImageFolder(root, transform=transform, loader=decode_file)


def peer_run(a):
    """One PyTorch run: prints one JSON line."""
    import multiprocessing

    import PIL
    import torch
    import torchvision
    from torch.utils.data import DataLoader

    workers = int(a.workers)
    dataset = peer_dataset(a.peer_run, os.path.join(a.data, "train"), a.image_size)

    # The workers kept from epoch to epoch (persistent_workers): the timed epoch measures loading,
    # not the workers' start, as a training run's later epochs do.
    loader = DataLoader(dataset, batch_size=a.batch, shuffle=True, num_workers=workers,
                        worker_init_fn=one_thread if workers else None, persistent_workers=workers > 0,
                        generator=torch.Generator().manual_seed(a.seed))
    batches = iter(loader)
    for _ in range(min(a.warmup_batches, -(-len(dataset) // a.batch))):
        next(batches)
    del batches

    images, first = 0, None
    start = time.perf_counter()
    for x, _labels in loader:
        if first is None:
            first = {"shape": list(x.shape), "dtype": str(x.dtype), "mean": round(float(x.mean()), 3),
                     "std": round(float(x.std()), 3)}
        images += x.shape[0]
    seconds = time.perf_counter() - start
    print(json.dumps({"engine": "pytorch", "variant": a.peer_run, "workers": workers, "images": images,
                      "seconds": seconds, "images_per_second": images / seconds, "batch": a.batch,
                      "image_size": a.image_size, "warmup_batches": a.warmup_batches, "first_batch": first,
                      "torch": torch.__version__, "torchvision": torchvision.__version__, "pillow": PIL.__version__,
                      "start_method": multiprocessing.get_start_method(), "classes": len(dataset.classes)}))


# ---- The comparison -------------------------------------------------------------------------------

def failed(what, command, out):
    sys.exit(f"{what} failed (exit status {out.returncode}): {shlex.join(command)}\n"
             f"--- standard error ---\n{out.stderr[-6000:]}\n--- standard output (the end) ---\n{out.stdout[-2000:]}")


def json_lines(text, key):
    """The last line of text that parses as a JSON object holding key, or None."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and key in record:
            return record
    return None


def ours_command(a, workers):
    return [a.binary, "--data", a.data, "--augment", "photo", "--image-size", str(a.image_size), "--batch",
            str(a.batch), "--loader-threads", str(workers), "--benchmark-loader", *shlex.split(a.ours_extra)]


def peer_command(a, variant, workers, seed):
    return [a.python, os.path.abspath(__file__), "--peer-run", variant, "--data", a.data, "--workers", str(workers),
            "--batch", str(a.batch), "--image-size", str(a.image_size), "--warmup-batches", str(a.warmup_batches),
            "--seed", str(seed)]


def run_ours(a, workers):
    command = ours_command(a, workers)
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"ours ran past --timeout {a.timeout} s: {shlex.join(command)}")
    except OSError as error:
        sys.exit(f"ours could not start: {shlex.join(command)}: {error}")
    if out.returncode != 0:
        failed("ours", command, out)
    report = json_lines(out.stdout, "loader_images_per_second")
    if report is None:
        out.returncode = f"{out.returncode}, but no JSON line with loader_images_per_second on standard output"
        failed("ours", command, out)
    rate = float(report["loader_images_per_second"])
    images = report.get("images")
    seconds = report.get("seconds", images / rate if images and rate else None)
    return {"engine": "cnnengine", "variant": "photo" + (f" {a.ours_extra}" if a.ours_extra else ""),
            "workers": workers, "images": images, "seconds": seconds, "images_per_second": rate, "report": report}


def run_peer(a, variant, workers, seed):
    command = peer_command(a, variant, workers, seed)
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"PyTorch ran past --timeout {a.timeout} s: {shlex.join(command)}")
    if out.returncode != 0:
        failed(f"PyTorch ({variant})", command, out)
    record = json_lines(out.stdout, "images_per_second")
    if record is None:
        out.returncode = f"{out.returncode}, but no JSON line on standard output"
        failed(f"PyTorch ({variant})", command, out)
    return record


def warm_page_cache(root):
    files, size = 0, 0
    for folder, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                while chunk := f.read(1 << 20):
                    size += len(chunk)
            files += 1
    return files, size


def folder_description(data):
    try:
        with open(os.path.join(data, "manifest.json")) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return "no manifest.json (not made by benchmarks/make_jpeg_folder.py)"
    sizes = ", ".join(f"{k} ({v})" for k, v in sorted(m.get("train_sizes", {}).items(), key=lambda kv: -kv[1]))
    return (f"{m.get('train')} train images in {len(m.get('classes', []))} classes, made by "
            f"benchmarks/make_jpeg_folder.py (seed {m.get('seed')}): {m.get('short_side')} px on the shorter side, "
            f"JPEG quality {m.get('quality')} {m.get('subsampling', '')}, {m.get('train_mean_kib')} KiB a file on "
            f"average; sizes: {sizes}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", help="train_images (built with --benchmark-loader)")
    p.add_argument("--data", required=True, help="the folder: DATA/train/<class>/*.jpg (and DATA/test)")
    p.add_argument("--python", default=sys.executable, help="a Python with torch, torchvision and Pillow")
    p.add_argument("--workers", default="2", help="W: loader threads (ours) and num_workers (PyTorch's); "
                   "comma-separated for several")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--warmup-batches", type=int, default=5, help="PyTorch's warm-up batches before the timed epoch")
    p.add_argument("--variants", default=",".join(PEER_VARIANTS), help="PyTorch's variants: pil, decode_jpeg")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ours-extra", default="", help="more arguments for ours, e.g. \"--cache memory\"")
    p.add_argument("--skip-ours", action="store_true", help="PyTorch's side only")
    p.add_argument("--timeout", type=int, default=900, help="seconds a run may take")
    p.add_argument("--out", help="PREFIX: writes PREFIX.md and PREFIX.jsonl")
    p.add_argument("--peer-run", choices=sorted(PEER_VARIANTS), help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    a.data = os.path.abspath(a.data)
    if a.peer_run:
        return peer_run(a)

    if not os.path.isdir(os.path.join(a.data, "train")):
        sys.exit(f"{a.data} has no train/ folder (benchmarks/make_jpeg_folder.py makes one)")
    if not a.skip_ours and not a.binary:
        sys.exit("--binary is needed (or --skip-ours)")
    if a.binary:
        a.binary = os.path.abspath(a.binary)
    variants = [v for v in a.variants.split(",") if v]
    unknown = [v for v in variants if v not in PEER_VARIANTS]
    if unknown:
        sys.exit(f"unknown PyTorch variant(s) {', '.join(unknown)}: {', '.join(PEER_VARIANTS)}")
    worker_counts = [int(w) for w in a.workers.split(",")]
    engines = ([] if a.skip_ours else ["ours"]) + variants

    files, size = warm_page_cache(a.data)
    print(f"{a.data}: {files} files, {size / 2**20:.1f} MiB read once (page cache warm)", flush=True)
    runs = []
    jsonl = open(a.out + ".jsonl", "w") if a.out else None  # written as the runs end
    for r in range(a.rounds):
        for workers in worker_counts:
            order = engines[r % len(engines):] + engines[:r % len(engines)]
            for who in order:
                load = os.getloadavg()[0]  # the one-minute load average before the run: others' work shows
                line = run_ours(a, workers) if who == "ours" else run_peer(a, who, workers, seed=r)
                line.update(who=who, round=r, load_at_start=load)
                runs.append(line)
                if jsonl:
                    jsonl.write(json.dumps(line) + "\n")
                    jsonl.flush()
                print(f"round {r + 1}: {line['engine']} {line['variant']}, {workers} workers: "
                      f"{line['images_per_second']:.0f} images/s", flush=True)
    if jsonl:
        jsonl.close()

    cores = os.cpu_count() or 1
    peer = next((run for run in runs if run["engine"] == "pytorch"), {})
    lines = [
        "# Loading JPEG photos for training: cnnengine's loader against PyTorch's DataLoader",
        "",
        f"Written by `benchmarks/loader_vs_torch.py`" + (f"; the runs are in `{os.path.basename(a.out)}.jsonl`."
                                                          if a.out else "."),
        "",
        f"- **Command:** `python3 benchmarks/loader_vs_torch.py {shlex.join(sys.argv[1:])}`",
        f"- **Date:** {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; **commit:** "
        f"`{machine.commit()}`",
        f"- **CPU:** {machine.cpu_model()} ({', '.join(machine.cpu_flags())}), {cores} cores",
        f"- **PyTorch:** torch {peer.get('torch', '-')}, torchvision {peer.get('torchvision', '-')}, "
        f"Pillow {peer.get('pillow', '-')}; workers started by {peer.get('start_method', '-')}",
        f"- **Folder:** `{a.data}`: {folder_description(a.data)}",
        f"- Each run one epoch of the train folder, batch {a.batch}, {a.image_size} x {a.image_size} crops, "
        f"a fresh process; {a.rounds} round(s), the engines in turn. **per core**: images/s over min(workers, "
        f"{cores} cores). **ours / best**: ours over the faster of PyTorch's variants at the same workers. The "
        "one-minute load average before each run is in the JSON lines (load_at_start): others' work shows there.",
        "",
        "Commands (W: the workers):",
        "",
    ]
    w = worker_counts[0]
    ours_variant = "photo" + (f" {a.ours_extra}" if a.ours_extra else "")
    if not a.skip_ours:
        command = shlex.join(ours_command(a, w)).replace(f"--loader-threads {w}", "--loader-threads W")
        lines.append(f"- ours: `{command}`")
    for v in variants:
        command = shlex.join(peer_command(a, v, w, 0)).replace(f"--workers {w}", "--workers W")
        lines.append(f"- PyTorch `{v}` ({PEER_VARIANTS[v]}): `{command.replace('--seed 0', '--seed ROUND')}`")
    lines += ["", "| engine | variant | workers | images/s (median) | per core | ours / best | runs |",
              "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for workers in worker_counts:
        rates = {who: [run["images_per_second"] for run in runs if run["workers"] == workers and run["who"] == who]
                 for who in engines}
        medians = {who: statistics.median(rates[who]) for who in engines}
        best = max((medians[v] for v in variants), default=0)
        for who in engines:
            median = medians[who]
            ratio = f"{median / best:.2f}" if who == "ours" and best else ""
            if who == "ours":
                engine, variant = "cnnengine", ours_variant
            else:
                engine, variant = "PyTorch", who + (" (best)" if median == best and len(variants) > 1 else "")
            per_core = median / min(max(workers, 1), cores)
            lines.append(f"| {engine} | {variant} | {workers} | {median:.0f} | {per_core:.0f} | {ratio} | "
                         f"{', '.join(f'{x:.0f}' for x in rates[who])} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out + ".md", "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
