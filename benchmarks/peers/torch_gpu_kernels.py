#!/usr/bin/env python3
"""PyTorch GPU peer, kernel by kernel: where a training step's device time goes.

Runs torch_gpu.py's network (eager, cudnn.benchmark, fused AdamW, the batch on the device) for
--warmup steps, then profiles --steps steps with torch.profiler and prints each kernel's total
CUDA time per step, the largest first, and the step's summed kernel time: the peer's side of
a per-kernel comparison with `ncu --metrics gpu__time_duration.sum` of benchmarks/train_throughput.
"""
import argparse

import torch
from torch.profiler import ProfilerActivity, profile

import torch_gpu


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="resnet18", choices=sorted(torch_gpu.SHAPES))
    p.add_argument("--precision", default="tf32", choices=["fp32", "tf32", "bf16", "fp16"])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--memory-format", default="contiguous", choices=sorted(torch_gpu.MEMORY_FORMATS))
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    torch_gpu.set_precision(args.precision)
    trainer = torch_gpu.Trainer(args.model, args.batch, "eager", data_on_gpu=True, precision=args.precision,
                                memory_format=args.memory_format)
    for _ in range(args.warmup):
        trainer.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            trainer.step()
        torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages() if e.device_time_total > 0]
    kernels.sort(key=lambda e: e.device_time_total, reverse=True)
    total = sum(e.device_time_total for e in kernels) / args.steps
    print(f"pytorch {torch.__version__} {args.model} {args.precision} {args.memory_format} batch {args.batch}: "
          f"{total / 1e3:.3f} ms of kernels a step")
    for e in kernels[:args.top]:
        print(f"{e.device_time_total / args.steps / 1e3:9.3f} ms {e.count // args.steps:4d} x  {e.key[:110]}")


if __name__ == "__main__":
    main()
