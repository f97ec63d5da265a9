#!/usr/bin/env python3
"""PyTorch GPU peer: training throughput and the largest batch that fits a memory budget.

The networks of cnnengine's presets, on synthetic data, batch 256, AdamW, softmax
cross-entropy:
  small     1x28x28: conv3x3/32 pad1, ReLU, maxpool2, conv3x3/64 pad1, ReLU, maxpool2,
            dense 128, ReLU, dense 10
  resnet18  3x32x32: 3x3 stem 64 + BN + ReLU, 4 stages [64,128,256,512] x 2 BasicBlocks with BN
            (strides 1,2,2,2, 1x1 projection shortcuts), global average pool, dense 10
  resnet50  3x224x224: torchvision's, 10 classes (--batch 128 as usually measured)

Runs PyTorch eager (cudnn.benchmark=True) and torch.compile (where it runs), fp32 and tf32, or
bf16 and fp16 as a PyTorch user turns them on, in each of --memory-formats: "contiguous" (NCHW)
and "channels_last" (model and batch in NHWC, what a tensor-core user turns on) (torch.autocast around the forward pass and the
loss; in fp16 a GradScaler with its defaults), each without and with a per-step loss.item()
(--syncs: "none" lets the host run ahead as cnnengine's submitted steps do, "item" waits for every
step's loss as most training loops do).
Each batch is copied from pinned host memory to the GPU inside the timed loop (as
benchmarks/train_throughput --host-batch does), or with --data-on-gpu stays on the device (as
train_throughput's default, --synthetic). The largest batch under --budget is found by running
two training steps at each size tried, down to the exact size (the next one fails), in each of
--largest-precisions. Prints one JSON line per measurement (also appended to --out): "kind" is
"throughput", "largest_batch", "skipped" or "error". Stops starting new measurements when
--time-budget seconds have passed.
"""
import argparse
import gc
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {"small": (1, 28, 28), "resnet18": (3, 32, 32), "resnet50": (3, 224, 224)}
CLASSES = 10


def small_net():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, CLASSES))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


def resnet18_cifar():
    layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for stage, width in enumerate([64, 128, 256, 512]):
        for block in range(2):
            layers.append(BasicBlock(cin, width, 2 if stage > 0 and block == 0 else 1))
            cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, CLASSES)]
    return nn.Sequential(*layers)


def resnet50_imagenet():
    """torchvision's ResNet-50 (ImageNet stem, bottlenecks), as cnnengine's resnet50 preset at 224."""
    import torchvision
    return torchvision.models.resnet50(num_classes=CLASSES)


BUILD = {"small": small_net, "resnet18": resnet18_cifar, "resnet50": resnet50_imagenet}
AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
MEMORY_FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


def set_precision(precision):
    tf32 = precision == "tf32"
    try:  # PyTorch 2.9 and later
        torch.backends.cuda.matmul.fp32_precision = "tf32" if tf32 else "ieee"
        torch.backends.cudnn.conv.fp32_precision = "tf32" if tf32 else "ieee"
    except (AttributeError, AssertionError):  # earlier ones refuse the attribute in either way
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True


def make_optimizer(model):
    try:
        return torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True), "fused"
    except (TypeError, RuntimeError):
        return torch.optim.AdamW(model.parameters(), lr=1e-3), "foreach"


class Trainer:
    """Model, optimizer and a pinned host batch; step() copies the batch and trains once."""

    def __init__(self, model_name, batch, mode, data_on_gpu, precision, memory_format="contiguous"):
        torch.manual_seed(0)
        shape = SHAPES[model_name]
        layout = MEMORY_FORMATS[memory_format]
        self.model = BUILD[model_name]().cuda().train().to(memory_format=layout)
        self.optimizer, self.optimizer_kind = make_optimizer(self.model)
        self.forward = torch.compile(self.model) if mode == "compile" else self.model
        self.host_x = torch.randn(batch, *shape).contiguous(memory_format=layout).pin_memory()
        self.host_y = torch.randint(0, CLASSES, (batch,)).pin_memory()
        self.data_on_gpu = data_on_gpu
        self.x = self.host_x.cuda()
        self.y = self.host_y.cuda()
        self.autocast = AUTOCAST.get(precision)
        self.scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    def step(self):
        if not self.data_on_gpu:
            self.x.copy_(self.host_x, non_blocking=True)
            self.y.copy_(self.host_y, non_blocking=True)
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=self.autocast or torch.float16, enabled=self.autocast is not None):
            loss = F.cross_entropy(self.forward(self.x), self.y)
        if self.scaler:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss


def release():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def base_record(args, model_name, precision):
    return {"peer": "pytorch-gpu", "engine": "pytorch", "model": model_name, "precision": precision,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "device": torch.cuda.get_device_name(0)}


def throughput(args, model_name, precision, mode, sync, memory_format):
    set_precision(precision)
    release()
    torch.cuda.reset_peak_memory_stats()
    t = Trainer(model_name, args.batch, mode, args.data_on_gpu, precision, memory_format)
    start = time.perf_counter()
    t.step()
    torch.cuda.synchronize()
    first_step = time.perf_counter() - start  # includes compilation and cuDNN benchmarking
    for _ in range(args.warmup - 1):
        t.step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = t.step()
        if sync == "item":
            loss.item()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    record = base_record(args, model_name, precision)
    record.update({"kind": "throughput", "mode": mode, "sync": sync, "memory_format": memory_format,
                   "batch": args.batch, "steps": args.steps,
                   "images_per_second": args.steps * args.batch / seconds,
                   "step_ms": 1000.0 * seconds / args.steps, "first_step_seconds": first_step,
                   "final_loss": float(loss.item()), "optimizer": "AdamW " + t.optimizer_kind,
                   "data": "on GPU" if args.data_on_gpu else "pinned host -> GPU each step",
                   "max_memory_reserved": torch.cuda.max_memory_reserved(),
                   "max_memory_allocated": torch.cuda.max_memory_allocated()})
    del t
    release()
    return record


def fits(model_name, batch, precision):
    """Two training steps at this batch inside the memory fraction set by the caller."""
    trainer = None
    try:
        trainer = Trainer(model_name, batch, "eager", True, precision)
        for _ in range(2):
            trainer.step()
        torch.cuda.synchronize()
        return True
    except torch.cuda.OutOfMemoryError:
        return False
    except RuntimeError as e:  # cuDNN and cuBLAS report their allocation failures in their own words
        if "ALLOC_FAILED" in str(e) or "out of memory" in str(e).lower():
            return False
        raise
    finally:
        del trainer
        release()


def largest_batch(args, model_name, precision):
    set_precision(precision)
    release()
    total = torch.cuda.get_device_properties(0).total_memory
    fraction = min(1.0, args.budget / total)
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    trials = []
    try:
        lo, hi = 0, None
        batch = 16
        while hi is None and time.perf_counter() < args.deadline:  # doubling
            ok = fits(model_name, batch, precision)
            trials.append([batch, ok])
            if ok:
                lo, batch = batch, batch * 2
            else:
                hi = batch
        while hi is not None and hi - lo > 1 and time.perf_counter() < args.deadline:
            mid = (lo + hi) // 2
            ok = fits(model_name, mid, precision)
            trials.append([mid, ok])
            if ok:
                lo = mid
            else:
                hi = mid
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, 0)
        release()
    record = base_record(args, model_name, precision)
    record.update({"kind": "largest_batch", "budget_bytes": args.budget, "memory_fraction": fraction,
                   "largest_batch": lo, "first_failing_batch": hi, "exact": hi is not None and hi - lo == 1,
                   "trials": trials,
                   "note": "the fraction caps PyTorch's caching allocator; the CUDA context is outside it"})
    return record


def parse_bytes(text):
    units = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}
    t = text.strip().lower()
    number = t.rstrip("kmgib")
    return int(float(number) * units[t[len(number):]])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="small,resnet18")
    p.add_argument("--precisions", default="fp32,tf32", help="of fp32, tf32, bf16 and fp16")
    p.add_argument("--largest-precisions", default="fp32", help="the precisions of the largest-batch search")
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--memory-formats", default="contiguous", help="of contiguous (NCHW) and channels_last")
    p.add_argument("--syncs", default="none,item",
                   help="none: no per-step read of the loss; item: loss.item() every step (eager only)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=50, help="timed steps")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first (compilation, cuDNN benchmark)")
    p.add_argument("--budget", type=parse_bytes, default=parse_bytes("2GiB"),
                   help="memory budget for the largest-batch search (0: skip it)")
    p.add_argument("--data-on-gpu", action="store_true")
    p.add_argument("--time-budget", type=float, default=600.0, help="seconds; later measurements are skipped")
    p.add_argument("--compile-reserve", type=float, default=120.0,
                   help="start no torch.compile measurement with fewer seconds than this left")
    p.add_argument("--out", help="append the JSON lines to this file too")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"peer": "pytorch-gpu", "kind": "error", "error": "no CUDA device"}), flush=True)
        return 1
    args.deadline = time.perf_counter() + args.time_budget
    models = args.models.split(",")
    precisions = args.precisions.split(",")
    unknown = set(precisions + args.largest_precisions.split(",")) - {"fp32", "tf32", "bf16", "fp16"}
    if unknown:
        p.error(f"unknown precisions {sorted(unknown)}: use fp32, tf32, bf16 or fp16")
    modes = args.modes.split(",")
    formats = args.memory_formats.split(",")
    if set(formats) - set(MEMORY_FORMATS):
        p.error(f"unknown memory formats {sorted(set(formats) - set(MEMORY_FORMATS))}: use contiguous or channels_last")

    syncs = args.syncs.split(",")
    # Eager first, then the memory search, then compile (the slowest to start).
    jobs = [("throughput", m, p_, "eager", y, f) for m in models for p_ in precisions if "eager" in modes
            for f in formats for y in syncs]
    if args.budget:
        jobs += [("largest_batch", m, p_, None, None, "contiguous") for m in models
                 for p_ in args.largest_precisions.split(",")]
    jobs += [("throughput", m, p_, "compile", "none", f) for m in models for p_ in precisions
             if "compile" in modes for f in formats]

    out = open(args.out, "a") if args.out else None
    for kind, model_name, precision, mode, sync, memory_format in jobs:
        needed = args.compile_reserve if mode == "compile" else 0.0
        if time.perf_counter() + needed > args.deadline:
            record = {"peer": "pytorch-gpu", "kind": "skipped", "what": kind, "model": model_name,
                      "precision": precision, "mode": mode, "sync": sync, "memory_format": memory_format,
                      "reason": "time budget spent"}
        else:
            try:
                record = (throughput(args, model_name, precision, mode, sync, memory_format) if kind == "throughput"
                          else largest_batch(args, model_name, precision))
            except Exception as e:  # torch.compile may not run here; say so and go on
                record = {"peer": "pytorch-gpu", "kind": "error", "what": kind, "model": model_name,
                          "precision": precision, "mode": mode, "memory_format": memory_format, "error": f"{type(e).__name__}: {e}"[:2000]}
                release()
        line = json.dumps(record)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
