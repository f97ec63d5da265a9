#!/usr/bin/env python3
"""Training parity of train_images with PyTorch on the multi-label and regression tasks.

    parity_torch.py --ours BUILD_OR_BINARY [--data DIR] [--work DIR] [--tasks multilabel,regress]
                    [--steps 20] [--epochs 3] [--seeds 1,2,3] [--threads 2] [--out PREFIX]

Run it with a Python that has torch, numpy and pillow (a virtual environment of PyPI's torch 2.x;
never a test's dependency). The data are scripts/make_task_datasets.py's fashion-multilabel and
fashion-regress folders, made under --work unless --data holds them. The recipe is the one that
learned worse than PyTorch: the small-bn preset, AdamW (lr 1e-3, weight decay 0.01), cosine decay
over the run's steps, batch 32, no augmentation, no normalisation.

Two checks for each task:

1. Parity of the first --steps steps. The same initial weights: PyTorch's default initialisation
   of the network, written into a checkpoint of ours (the format of models/checkpoint.cpp) that
   train_images starts from with --load. The same batches: the loader's order replayed (its
   SplitMix64 Fisher-Yates over (seed, epoch), data/detail/random.hpp). The same dropout masks
   (dropout_keep of engine/core/backend.hpp, keyed by the step and the sample's place). The same
   loss, optimizer and schedule in PyTorch's definitions (BCEWithLogitsLoss and MSELoss, mean
   reduction; torch.optim.AdamW; the cosine in LambdaLR form). Both step losses are printed with
   their relative difference; the check passes when every one is within --tolerance. PyTorch runs
   the steps in float64 too: how far float32's rounding alone moves them. After the last step the
   parameters and running statistics of both sides are compared.
2. Scores after --epochs epochs, each side on its own initialisation and order, over --seeds:
   train_images as a user runs it, and PyTorch with nn's default initialisation and a shuffled
   DataLoader-like order. The test set's macro F1 (threshold 0.5) or MAE, ours against PyTorch's.

Prints the figures and one JSON object with the machine, the date, the commit and the command;
--out PREFIX also writes them to PREFIX.json and, as tables, PREFIX.md. Without a work folder
every run makes the data anew (about 30 s; 60,000 regression samples: --data of a folder made by
make_task_datasets.py --train 60000 --test 10000 --kinds regress).
"""
import argparse
import datetime
import json
import math
import os
import shlex
import struct
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from machine import commit, cpu_flags, cpu_model  # noqa: E402

BATCH = 32
LR = 1e-3
WEIGHT_DECAY = 0.01
DROPOUT = 0.3
MASK64 = (1 << 64) - 1


# ---- the data: a task folder of images/ and labels.csv, as train_images reads it ---------------

def load_table(side):
    """(images [N, C, H, W] float32 in [0, 1], targets [N, K] float32, names), in labels.csv's order."""
    with open(os.path.join(side, "labels.csv")) as f:
        rows = [line.rstrip("\n").split(",") for line in f if line.strip()]
    names = rows[0][1:]
    files = [r[0] for r in rows[1:]]
    targets = np.array([[float(v) for v in r[1:]] for r in rows[1:]], dtype=np.float32)
    images = np.stack([np.asarray(Image.open(os.path.join(side, "images", name)).convert("L"), dtype=np.uint8)
                       for name in files])
    x = torch.from_numpy(images.astype(np.float32) * np.float32(1.0 / 255.0)).unsqueeze(1).contiguous()
    return x, torch.from_numpy(targets), names


# ---- cnnengine's random numbers, replayed ----------------------------------------------------

def mix64(x):
    """splitmix64's finaliser on Python ints (data/detail/random.hpp, engine/core/backend.hpp)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def mix64_array(x):
    """mix64 on a numpy uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def hash_values(a, b, c=0, d=0):
    return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d)


def loader_order(n, seed, epoch):
    """The training loader's order of an epoch (data/loader.cpp: permutation(n, hash_values(seed, epoch)))."""
    state = hash_values(seed, epoch)
    order = list(range(n))
    for i in range(n, 1, -1):
        threshold = ((1 << 64) - i) % i
        while True:
            state = (state + 0x9E3779B97F4A7C15) & MASK64
            z = state
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
            r = z ^ (z >> 31)
            if r >= threshold:
                break
        j = r % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def dropout_mask(seed, step, node, first_sample, shape, p, dtype=torch.float32):
    """Our dropout's mask for optimizer step `step` (0 for the first): 0 or 1 / (1 - p) a value
    (Trainer: splitmix64(seed ^ splitmix64(step)); Backend::dropout_forward: dropout_keep)."""
    step_seed = mix64(seed ^ mix64(step))
    layer_seed = np.uint64(mix64(step_seed ^ node))
    per_sample = int(np.prod(shape[1:]))
    index = np.arange(first_sample * per_sample, (first_sample + shape[0]) * per_sample, dtype=np.uint64)
    bits = mix64_array(layer_seed ^ mix64_array(index)) >> np.uint64(40)
    uniform = bits.astype(np.float32) * np.float32(1.0 / 16777216.0)
    scale = np.float32(1.0) / (np.float32(1.0) - np.float32(p))
    return torch.from_numpy(np.where(uniform >= np.float32(p), scale, np.float32(0.0)).reshape(shape)).to(dtype)


# ---- the network: models/presets.cpp's small-bn ----------------------------------------------

class MaskedDropout(nn.Module):
    """nn.Dropout, or, where a mask is set, that mask (our masks replayed)."""

    def __init__(self, p):
        super().__init__()
        self.p, self.mask = p, None

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        return x * self.mask if self.mask is not None else F.dropout(x, self.p, True)


def small_bn(channels, height, width, outputs, dropout=DROPOUT):
    return nn.Sequential(
        nn.Conv2d(channels, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * (height // 4) * (width // 4), 128), nn.ReLU(),
        MaskedDropout(dropout),
        nn.Linear(128, outputs),
    )


# Node ids of small-bn's layers in our network (the input is node 0), as `train_images` prints them.
DROPOUT_NODE = 12


def our_parameter_order(model):
    """The network's tensors in our parameter block's order: every layer's trainable tensors
    in node order, then every layer's state (engine/core/parameter_store.cpp)."""
    trainable, state = [], []
    for m in model:
        if isinstance(m, nn.Conv2d):
            trainable += [m.weight] + ([m.bias] if m.bias is not None else [])
        elif isinstance(m, nn.BatchNorm2d):
            trainable += [m.weight, m.bias]
            state += [m.running_mean, m.running_var]
        elif isinstance(m, nn.Linear):
            trainable += [m.weight, m.bias]
    return trainable + state


def padded(n):
    return (n + 15) // 16 * 16


# ---- our checkpoints (models/checkpoint.cpp, Note [Checkpoint layout]) -----------------------

def read_checkpoint(path):
    data = open(path, "rb").read()
    magic, version, flags, meta_bytes = struct.unpack("<8sIIQ", data[:24])
    if magic != b"CNNCKPT\n" or version != 2:
        raise ValueError(f"{path}: not a version 2 cnnengine checkpoint")
    meta = json.loads(data[24:24 + meta_bytes])
    start = 24 + meta_bytes
    floats = meta["blocks"]["parameters"]
    params = np.frombuffer(data, dtype="<f4", count=floats, offset=start).copy()
    return data, meta, start, params


def write_weights(template, model, path):
    """`template` (a checkpoint of the same network) with the model's parameters and BatchNorm
    statistics in place of its own."""
    data, meta, start, params = read_checkpoint(template)
    values = np.zeros_like(params)
    offset = 0
    for t in our_parameter_order(model):
        flat = t.detach().float().numpy().ravel()
        values[offset:offset + flat.size] = flat
        offset += padded(flat.size)
    if offset != params.size:
        raise ValueError(f"{template}: {params.size} parameter floats, the model has {offset}")
    body = data[:start] + values.astype("<f4").tobytes() + data[start + 4 * params.size:-4]
    with open(path, "wb") as f:
        f.write(body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF))


def load_weights(model, path):
    """The checkpoint's parameters into the model (our block's order)."""
    _, _, _, params = read_checkpoint(path)
    offset = 0
    with torch.no_grad():
        for t in our_parameter_order(model):
            t.copy_(torch.from_numpy(params[offset:offset + t.numel()].reshape(t.shape)))
            offset += padded(t.numel())


def largest_differences(model, path):
    """The largest difference between the checkpoint's tensors (or another model's) and the
    model's, relative to the tensor's largest value: over the trainable tensors, and over the
    running statistics."""
    if isinstance(path, nn.Module):
        params = np.concatenate([np.pad(t.detach().double().numpy().ravel(), (0, padded(t.numel()) - t.numel()))
                                 for t in our_parameter_order(path)])
    else:
        params = read_checkpoint(path)[3]
    running = {id(m.running_mean) for m in model if isinstance(m, nn.BatchNorm2d)} | \
              {id(m.running_var) for m in model if isinstance(m, nn.BatchNorm2d)}
    worst = {"parameters": 0.0, "running_statistics": 0.0}
    offset = 0
    for t in our_parameter_order(model):
        theirs = t.detach().double().numpy().ravel()
        ours = params[offset:offset + t.numel()].astype(np.float64)
        offset += padded(t.numel())
        kind = "running_statistics" if id(t) in running else "parameters"
        worst[kind] = max(worst[kind], float(np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-30)))
    return worst


# ---- running train_images --------------------------------------------------------------------

def ours_binary(path):
    if os.path.isdir(path):
        path = os.path.join(path, "examples", "train_images", "train_images")
    if not os.access(path, os.X_OK):
        raise SystemExit(f"--ours: no train_images at {path}")
    return path


def run_ours(binary, side_folder, task, work, name, threads, extra):
    metrics = os.path.join(work, name + ".jsonl")
    for stale in (metrics,):
        if os.path.exists(stale):
            os.remove(stale)
    command = [binary, "--data", side_folder, "--task", task, "--model", "small-bn", "--batch", str(BATCH),
               "--optimizer", "adamw", "--lr", str(LR), "--weight-decay", str(WEIGHT_DECAY), "--schedule", "cosine",
               "--device", "cpu", "--threads", str(threads), "--quiet", "--overwrite", "--metrics-out", metrics] + extra
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    with open(metrics) as f:
        lines = [json.loads(line) for line in f]
    return {"command": shlex.join(command), "seconds": time.perf_counter() - start,
            "steps": [r["loss"] for r in lines if r["type"] == "step"],
            "summary": next(r for r in lines if r["type"] == "summary")}


# ---- PyTorch's side --------------------------------------------------------------------------

def loss_of(task, outputs, targets):
    if task == "multilabel":
        return F.binary_cross_entropy_with_logits(outputs, targets)  # mean over every element
    return F.mse_loss(outputs, targets)


def cosine(total):
    """Our cosine schedule (engine/train/optimizer.cpp) as LambdaLR's factor of the base rate."""
    return lambda step: 0.5 * (1.0 + math.cos(math.pi * min(1.0, step / max(total, 1))))


def train_torch(model, task, x, y, orders, total_steps, masks_seed=None, dropout=None):
    """AdamW on the batches each order makes; our dropout masks where masks_seed is given.
    Returns every step's loss."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine(total_steps))
    model.train()
    losses, step = [], 0
    for order in orders:
        for start in range(0, len(order), BATCH):
            if step == total_steps:
                return losses
            index = torch.tensor(order[start:start + BATCH])
            if masks_seed is not None:
                dropout.mask = dropout_mask(masks_seed, step, DROPOUT_NODE, 0, (len(index), 128), dropout.p, x.dtype)
            loss = loss_of(task, model(x[index]), y[index])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            step += 1
    return losses


@torch.no_grad()
def scores(task, model, x, y):
    model.eval()
    out = torch.cat([model(x[i:i + 500]) for i in range(0, len(x), 500)])
    if task == "regress":
        return {"mae": (out - y).abs().mean().item()}
    predicted, truth = out > 0, y > 0.5  # probability above 0.5
    tp = (predicted & truth).sum(0).double()
    fp = (predicted & ~truth).sum(0).double()
    fn = (~predicted & truth).sum(0).double()
    precision = torch.where(tp + fp > 0, tp / (tp + fp), torch.zeros_like(tp))
    recall = torch.where(tp + fn > 0, tp / (tp + fn), torch.zeros_like(tp))
    f1 = torch.where(precision + recall > 0, 2 * precision * recall / (precision + recall), torch.zeros_like(tp))
    return {"macro_f1": f1.mean().item()}


HEADLINE = {"multilabel": ("macro_f1", "test_mean_f1"), "regress": ("mae", "test_mae")}


# ---- the two checks --------------------------------------------------------------------------

def parity(binary, task, folder, work, steps, threads, tolerance):
    train = os.path.join(folder, "train")
    x, y, _ = load_table(train)
    channels, height, width = x.shape[1:]
    samples = steps * BATCH
    template = os.path.join(work, f"{task}_template.ckpt")
    run_ours(binary, folder, task, work, f"{task}_template", threads,
             ["--limit", str(2 * BATCH), "--epochs", "1", "--save", template])
    torch.manual_seed(0)
    model = small_bn(channels, height, width, y.shape[1])
    initial = os.path.join(work, f"{task}_initial.ckpt")
    write_weights(template, model, initial)
    final = os.path.join(work, f"{task}_parity.ckpt")
    ours = run_ours(binary, folder, task, work, f"{task}_parity", threads,
                    ["--load", initial, "--limit", str(samples), "--epochs", "1", "--micro-batch", str(BATCH),
                     "--save", final])
    order = loader_order(samples, 1, 1)
    # PyTorch in float32, and in float64: how far float32's rounding alone takes a run.
    check, exact = small_bn(channels, height, width, y.shape[1]), small_bn(channels, height, width, y.shape[1])
    load_weights(check, initial)
    load_weights(exact, initial)
    theirs = train_torch(check, task, x, y, [order], steps, masks_seed=1, dropout=check[11])
    exact.double()
    in_double = train_torch(exact, task, x.double(), y.double(), [order], steps, masks_seed=1, dropout=exact[11])
    rows = []
    for i, (a, b, c) in enumerate(zip(ours["steps"], theirs, in_double)):
        rows.append({"step": i + 1, "ours": a, "pytorch": b, "relative": abs(a - b) / max(abs(b), 1e-30),
                     "pytorch_float64": c, "pytorch_relative_to_float64": abs(b - c) / max(abs(c), 1e-30)})
    worst = max(r["relative"] for r in rows)
    print(f"\n{task}: the first {steps} step losses from the same weights, batches and dropout masks")
    print(f"{'step':>5} {'ours':>14} {'PyTorch':>14} {'relative':>10} {'PyTorch fp64':>14} {'fp32/fp64':>10}")
    for r in rows:
        print(f"{r['step']:>5} {r['ours']:>14.8g} {r['pytorch']:>14.8g} {r['relative']:>10.2e} "
              f"{r['pytorch_float64']:>14.8g} {r['pytorch_relative_to_float64']:>10.2e}")
    passed = len(rows) == steps and worst <= tolerance
    print(f"worst relative difference {worst:.2e}: {'within' if passed else 'NOT within'} {tolerance:g}")
    after = largest_differences(check, final)
    rounding = largest_differences(check, exact)
    print(f"after step {steps}, the largest difference of a tensor's values relative to its largest: parameters "
          f"{after['parameters']:.2e}, BatchNorm's running statistics {after['running_statistics']:.2e} "
          f"(PyTorch's float32 from its float64: {rounding['parameters']:.2e} and "
          f"{rounding['running_statistics']:.2e})")
    return {"steps": rows, "worst_relative": worst, "tolerance": tolerance, "passed": passed,
            "after_last_step": after, "pytorch_float32_from_float64_after_last_step": rounding,
            "ours_command": ours["command"]}


def scores_after_epochs(binary, task, folder, work, epochs, seeds, threads):
    x, y, _ = load_table(os.path.join(folder, "train"))
    tx, ty, _ = load_table(os.path.join(folder, "test"))
    channels, height, width = x.shape[1:]
    key, ours_key = HEADLINE[task]
    steps = math.ceil(len(x) / BATCH) * epochs
    runs = []
    for seed in seeds:
        ours = run_ours(binary, folder, task, work, f"{task}_epochs_seed{seed}", threads,
                        ["--epochs", str(epochs), "--seed", str(seed)])
        torch.manual_seed(seed)
        model = small_bn(channels, height, width, y.shape[1])
        generator = torch.Generator().manual_seed(seed)
        orders = [torch.randperm(len(x), generator=generator).tolist() for _ in range(epochs)]
        start = time.perf_counter()
        losses = train_torch(model, task, x, y, orders, steps)
        seconds = time.perf_counter() - start
        theirs = scores(task, model, tx, ty)[key]
        mine = ours["summary"][ours_key]
        runs.append({"seed": seed, "ours": mine, "pytorch": theirs, "ours_first_epoch_loss": None,
                     "pytorch_first_epoch_loss": float(np.mean(losses[:math.ceil(len(x) / BATCH)])),
                     "ours_seconds": ours["seconds"], "pytorch_seconds": seconds, "ours_command": ours["command"]})
        with open(os.path.join(work, f"{task}_epochs_seed{seed}.jsonl")) as f:
            epoch_lines = [json.loads(line) for line in f if '"type":"epoch"' in line]
        runs[-1]["ours_first_epoch_loss"] = epoch_lines[0]["train_loss"]
        print(f"{task} seed {seed}: {key} ours {mine:.4f}, PyTorch {theirs:.4f}; first epoch's loss ours "
              f"{runs[-1]['ours_first_epoch_loss']:.4f}, PyTorch {runs[-1]['pytorch_first_epoch_loss']:.4f}",
              flush=True)
    ours_mean = float(np.mean([r["ours"] for r in runs]))
    theirs_mean = float(np.mean([r["pytorch"] for r in runs]))
    ratio = ours_mean / theirs_mean
    # Within 10%: F1 at least 0.9 of PyTorch's, MAE at most 1.1 times PyTorch's.
    passed = ratio >= 0.9 if key == "macro_f1" else ratio <= 1.1
    print(f"{task}: {key} after {epochs} epochs, mean over seeds {','.join(map(str, seeds))}: ours {ours_mean:.4f}, "
          f"PyTorch {theirs_mean:.4f} (ours / PyTorch {ratio:.3f}: {'within' if passed else 'NOT within'} 10%)")
    return {"metric": key, "epochs": epochs, "runs": runs, "ours_mean": ours_mean, "pytorch_mean": theirs_mean,
            "ratio": ratio, "passed": passed}


def markdown(result):
    """The result as a page of tables."""
    recipe = result["recipe"]
    lines = ["# train_images against PyTorch: parity and scores on the multi-label and regression tasks", "",
             "Written by `benchmarks/parity_torch.py`; every figure is in the `.json` beside this page.", "",
             f"- **Command:** `{result['command']}`",
             f"- **Date:** {result['date']}; **commit:** `{result['commit']}`; **train_images built from:** "
             f"`{result['ours_commit']}`; **PyTorch** {result['torch']}",
             f"- **CPU:** {result['cpu']} ({', '.join(result['cpu_flags'])}), {result['threads']} threads",
             f"- **Recipe:** `{recipe['model']}`, {recipe['optimizer']} (lr {recipe['lr']:g}, weight decay "
             f"{recipe['weight_decay']:g}), {recipe['schedule']} decay per step, batch {recipe['batch']}, "
             "no augmentation, no normalisation", ""]
    for task, entry in result["tasks"].items():
        parity = entry["parity"]
        lines += [f"## {task}", "",
                  f"The first {len(parity['steps'])} step losses from the same initial weights (PyTorch's "
                  "initialisation, loaded by both), batches and dropout masks: the worst relative difference "
                  f"is {parity['worst_relative']:.2e} ({'within' if parity['passed'] else 'NOT within'} "
                  f"{parity['tolerance']:g}).", "",
                  "| step | ours | PyTorch | relative | PyTorch in float64 | PyTorch's float32 from float64 |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in parity["steps"]:
            lines.append(f"| {r['step']} | {r['ours']:.8g} | {r['pytorch']:.8g} | {r['relative']:.2e} | "
                         f"{r['pytorch_float64']:.8g} | {r['pytorch_relative_to_float64']:.2e} |")
        after, rounding = parity["after_last_step"], parity["pytorch_float32_from_float64_after_last_step"]
        lines += ["", "After the last step, the largest difference of a tensor's values, relative to its largest "
                  f"value: parameters {after['parameters']:.2e}, BatchNorm's running statistics "
                  f"{after['running_statistics']:.2e} (PyTorch's float32 run from its float64 run: "
                  f"{rounding['parameters']:.2e} and {rounding['running_statistics']:.2e}).", ""]
        if "scores" in entry:
            sc = entry["scores"]
            lines += [f"Test {sc['metric']} after {sc['epochs']} epochs, each side from its own initialisation "
                      "and order:", "",
                      "| seed | ours | PyTorch | ours' first epoch's loss | PyTorch's first epoch's loss |",
                      "| ---: | ---: | ---: | ---: | ---: |"]
            for r in sc["runs"]:
                lines.append(f"| {r['seed']} | {r['ours']:.4f} | {r['pytorch']:.4f} | "
                             f"{r['ours_first_epoch_loss']:.4f} | {r['pytorch_first_epoch_loss']:.4f} |")
            lines += [f"| mean | {sc['ours_mean']:.4f} | {sc['pytorch_mean']:.4f} | | |", "",
                      f"Ours / PyTorch: {sc['ratio']:.3f} ({'within' if sc['passed'] else 'NOT within'} 10%).", "",
                      f"Our command (seed {sc['runs'][0]['seed']}): `{sc['runs'][0]['ours_command']}`", ""]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ours", required=True, help="a build folder or the train_images binary")
    p.add_argument("--ours-commit", help="the commit --ours was built from (default: this tree's)")
    p.add_argument("--data", help="a folder holding fashion-multilabel/ and fashion-regress/ (default: made under --work)")
    p.add_argument("--work", help="a folder for data, checkpoints and metrics (default: a new temporary folder)")
    p.add_argument("--tasks", default="multilabel,regress")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip-scores", action="store_true", help="the parity check alone")
    p.add_argument("--out", help="write PREFIX.json and PREFIX.md")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    binary = ours_binary(a.ours)
    work = a.work or tempfile.mkdtemp(prefix="parity_torch_")
    os.makedirs(work, exist_ok=True)
    data = a.data or os.path.join(work, "data")
    tasks = [t for t in a.tasks.split(",") if t]
    missing = [t for t in tasks if not os.path.isdir(os.path.join(data, "fashion-" + t))]
    if missing:
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_task_datasets.py"), "--out", data,
                        "--kinds", ",".join(missing)], check=True)
    result = {"cpu": cpu_model(), "cpu_flags": cpu_flags(), "date": datetime.date.today().isoformat(), "commit": commit(),
              "ours_commit": a.ours_commit or commit(),
              "command": shlex.join(sys.argv), "torch": torch.__version__, "threads": a.threads,
              "recipe": {"model": "small-bn", "optimizer": "adamw", "lr": LR, "weight_decay": WEIGHT_DECAY,
                         "schedule": "cosine", "batch": BATCH}, "tasks": {}}
    for task in tasks:
        folder = os.path.join(data, "fashion-" + task)
        entry = {"parity": parity(binary, task, folder, work, a.steps, a.threads, a.tolerance)}
        if not a.skip_scores:
            seeds = [int(s) for s in a.seeds.split(",") if s]
            entry["scores"] = scores_after_epochs(binary, task, folder, work, a.epochs, seeds, a.threads)
        result["tasks"][task] = entry
    text = json.dumps(result)
    print(text)
    if a.out:
        with open(a.out + ".json", "w") as f:
            f.write(text + "\n")
        with open(a.out + ".md", "w") as f:
            f.write(markdown(result))


if __name__ == "__main__":
    main()
