#!/usr/bin/python3
"""PyTorch's training images/s on the CPU for a preset, on one synthetic batch held in memory: the
peer of benchmarks/train_throughput (`--device cpu`), for benchmarks/compare_cpu_presets.py.

The network is torch_presets_cpu.py's definition of the preset (the same layers and sizing; at
224x224 resnet50 and mobilenetv2 are torchvision's), or torch_unet_cpu.py's for `unet` (its
default depth and width), the optimizer AdamW (lr 1e-3, weight decay 0.01), the loss cross
entropy (for unet over every pixel: the engine's segmentation loss where no pixel is ignored),
the batch uniform pixels and labels (unet: a class a pixel) made once. `--memory-format
channels_last` converts the model and the batch (oneDNN's blocked kernels); `--autocast bf16`
runs the forward pass and the loss under torch.autocast (PyTorch's mixed precision on the CPU:
oneDNN's bf16 kernels, on AMX where the CPU has it). Warm-up steps, then timed steps; prints one
JSON line {"peer": "pytorch", "images_per_second": ...}. Run it with a python that has torch
(pip's, in a virtual environment).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_presets_cpu import MODELS, make_model  # noqa: E402
from torch_unet_cpu import default_depth, make_model as make_unet  # noqa: E402

UNET_WIDTH = 32  # the preset's default (models/presets.cpp)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS) + ["unet"], required=True)
    p.add_argument("--input", default="3x224x224", help="CxHxW of one sample")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="steps before the clock starts")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--memory-format", choices=["contiguous", "channels_last"], default="contiguous")
    p.add_argument("--autocast", choices=["none", "bf16"], default="none")
    a = p.parse_args()
    channels, height, width = (int(v) for v in a.input.split("x"))
    if height != width:
        sys.exit("torch_throughput_cpu: square inputs only (the presets are sized from one side)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    if a.model == "unet":
        model = make_unet(channels, a.classes, default_depth(height, width), UNET_WIDTH)
        y = torch.randint(0, a.classes, (a.batch, height, width))
    else:
        model = make_model(a.model, channels, height, a.classes)
        y = torch.randint(0, a.classes, (a.batch,))
    x = torch.rand(a.batch, channels, height, width)
    memory_format = torch.channels_last if a.memory_format == "channels_last" else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    x = x.contiguous(memory_format=memory_format)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    for _ in range(a.warmup):
        step()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    seconds = time.perf_counter() - start
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "model": a.model, "input": a.input,
                      "batch": a.batch, "threads": a.threads, "memory_format": a.memory_format,
                      "autocast": a.autocast, "steps": a.steps, "final_loss": loss.item(),
                      "images_per_second": a.batch * a.steps / seconds}), flush=True)


if __name__ == "__main__":
    main()
