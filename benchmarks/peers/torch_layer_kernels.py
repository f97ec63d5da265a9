#!/usr/bin/python3
"""The cases of benchmarks/layer_kernels.cpp in PyTorch on the CPU: same names, shapes and inputs.

What is timed, each pass on its own, median of --repeat runs after one checked run and --warmup
more, forward and backward alternately (as ours):
- forward: the torch.nn.functional call (conv2d with groups and dilation, conv_transpose2d,
  the activations, interpolate, cat, group_norm, layer_norm; a * b for the channel gate) under
  torch.no_grad(), on tensors that do not require gradients: the kernel, no autograd graph.
- backward: the ATen backward kernels that autograd would call for that forward, called
  directly with a fixed output gradient: convolution_backward (input, weight and bias gradients;
  transposed for conv_transpose2d), silu_backward, gelu_backward, sigmoid_backward(y), ...,
  upsample_*2d_backward, native_group_norm_backward, native_layer_norm_backward. For cat, autograd
  hands out narrowed views of the gradient; what is timed is making them contiguous (the copies
  ours makes). For the gate, what autograd computes: dy * b and (dy * a) summed over H and W.
Inputs are the pattern of layer_kernels.cpp; each pass reports the sum of squares of what it
wrote ("check"), to compare with ours. Prints JSON lines, one per case and pass.

Run with Debian's torch: /usr/bin/python3 benchmarks/peers/torch_layer_kernels.py --threads 2
"""
import argparse
import json
import re
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

aten = torch.ops.aten


def pattern(shape, seed, scale=1.0, offset=0.0):
    """value i = (((i * 2654435761 + seed * 97531) mod 2^32) / 2^32 - 0.5) * scale + offset."""
    n = int(np.prod(shape))
    v = (np.arange(n, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(seed * 97531)) % np.uint64(2 ** 32)
    f = ((v.astype(np.float64) / 4294967296.0 - 0.5) * scale + offset).astype(np.float32)
    return torch.from_numpy(f.reshape(shape))


def dims(shape):
    return "[" + "x".join(str(d) for d in shape) + "]"


def arrow(i, o):
    return dims(i) + " -> " + dims(o)


def squares(t):
    return float(t.double().pow(2).sum())


class Case:
    """shape: the text ours prints; forward() and backward() return {name: tensor written}."""

    def __init__(self, shape, forward, backward, conv_backend=None):
        self.shape, self.forward, self.backward, self.conv_backend = shape, forward, backward, conv_backend


def conv_case(n, cin, hw, cout, k, stride, pad, dilation, groups):
    ho = (hw + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    xs, ys, ws = (n, cin, hw, hw), (n, cout, ho, ho), (cout, cin // groups, k, k)
    x, w, b, dy = pattern(xs, 1), pattern(ws, 2), pattern((cout,), 4), pattern(ys, 3)
    s, p, d = [stride] * 2, [pad] * 2, [dilation] * 2
    backend = str(torch._C._select_conv_backend(x, w, b, s, p, d, False, [0, 0], groups)).split(".")[-1]

    def fwd():
        return {"y": F.conv2d(x, w, b, stride, pad, dilation, groups)}

    def bwd():
        dx, dw, db = aten.convolution_backward(dy, x, w, [cout], s, p, d, False, [0, 0], groups, [True, True, True])
        return {"dx": dx, "dw": dw, "db": db}

    return Case(arrow(xs, ys), fwd, bwd, backend)


def conv_transpose_case(n, cin, hw, cout, k, stride):
    ho = (hw - 1) * stride + k
    xs, ys, ws = (n, cin, hw, hw), (n, cout, ho, ho), (cin, cout, k, k)
    x, w, b, dy = pattern(xs, 1), pattern(ws, 2), pattern((cout,), 4), pattern(ys, 3)
    s, p, d = [stride] * 2, [0, 0], [1, 1]
    backend = str(torch._C._select_conv_backend(x, w, b, s, p, d, True, [0, 0], 1)).split(".")[-1]

    def fwd():
        return {"y": F.conv_transpose2d(x, w, b, stride)}

    def bwd():
        dx, dw, db = aten.convolution_backward(dy, x, w, [cout], s, p, d, True, [0, 0], 1, [True, True, True])
        return {"dx": dx, "dw": dw, "db": db}

    return Case(arrow(xs, ys), fwd, bwd, backend)


ELEMENTS = (16, 64, 32, 32)  # 1,048,576

# name: (forward, backward from (dy, x, y)) -- backward reads y where ours does (sigmoid, tanh).
ACTIVATIONS = {
    "relu": (F.relu, lambda dy, x, y: aten.threshold_backward(dy, y, 0)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.01), lambda dy, x, y: aten.leaky_relu_backward(dy, x, 0.01, False)),
    "relu6": (F.relu6, lambda dy, x, y: aten.hardtanh_backward(dy, x, 0.0, 6.0)),
    "sigmoid": (torch.sigmoid, lambda dy, x, y: aten.sigmoid_backward(dy, y)),
    "tanh": (torch.tanh, lambda dy, x, y: aten.tanh_backward(dy, y)),
    "silu": (F.silu, lambda dy, x, y: aten.silu_backward(dy, x)),
    "gelu": (F.gelu, lambda dy, x, y: aten.gelu_backward(dy, x, approximate="none")),
    "hardswish": (F.hardswish, lambda dy, x, y: aten.hardswish_backward(dy, x)),
    "hardsigmoid": (F.hardsigmoid, lambda dy, x, y: aten.hardsigmoid_backward(dy, x)),
}


def activation_case(kind):
    forward, backward = ACTIVATIONS[kind]
    x, dy = pattern(ELEMENTS, 1, 8.0), pattern(ELEMENTS, 3)
    y = forward(x)

    def fwd():
        return {"y": forward(x)}

    def bwd():
        return {"dx": backward(dy, x, y)}

    return Case(arrow(ELEMENTS, ELEMENTS), fwd, bwd)


def upsample_case(n, c, hw, mode):
    xs, ys = (n, c, hw, hw), (n, c, 2 * hw, 2 * hw)
    x, dy = pattern(xs, 1), pattern(ys, 3)

    def fwd():
        if mode == "nearest":
            return {"y": F.interpolate(x, scale_factor=2, mode="nearest")}
        return {"y": F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)}

    def bwd():
        if mode == "nearest":
            return {"dx": aten.upsample_nearest2d_backward(dy, ys[2:], xs, 2.0, 2.0)}
        return {"dx": aten.upsample_bilinear2d_backward(dy, ys[2:], xs, False, 2.0, 2.0)}

    return Case(arrow(xs, ys), fwd, bwd)


def concat_case(n, c, hw):
    xs, ys = (n, c, hw, hw), (n, 2 * c, hw, hw)
    a, b, dy = pattern(xs, 1), pattern(xs, 5), pattern(ys, 3)

    def fwd():
        return {"y": torch.cat([a, b], 1)}

    def bwd():
        return {"da": dy.narrow(1, 0, c).contiguous(), "db": dy.narrow(1, c, c).contiguous()}

    return Case(arrow(xs, ys) + " (2 inputs)", fwd, bwd)


def multiply_case(n, c, hw):
    as_, bs = (n, c, hw, hw), (n, c, 1, 1)
    a, b, dy = pattern(as_, 1), pattern(bs, 5), pattern(as_, 3)

    def fwd():
        return {"y": a * b}

    def bwd():
        return {"da": dy * b, "db": (dy * a).sum((2, 3), keepdim=True)}

    return Case(arrow(as_, as_) + " (times " + dims(bs) + ")", fwd, bwd)


def batchnorm_relu_case(n, c, hw):
    xs = (n, c, hw, hw)
    x, dy = pattern(xs, 1), pattern(xs, 3)
    gamma, beta = pattern((c,), 6, 0.5, 1.0), pattern((c,), 7)
    running_mean, running_var = torch.zeros(c), torch.ones(c)
    y, mean, invstd = aten.native_batch_norm(x, gamma, beta, running_mean, running_var, True, 0.1, 1e-5)
    y = torch.relu(y)

    def fwd():
        return {"y": torch.relu(F.batch_norm(x, running_mean, running_var, gamma, beta, True, 0.1, 1e-5))}

    def bwd():
        masked = aten.threshold_backward(dy, y, 0)
        dx, dg, db = aten.native_batch_norm_backward(masked, x, gamma, running_mean, running_var, mean, invstd, True,
                                                     1e-5, [True, True, True])
        return {"dx": dx, "dgamma": dg, "dbeta": db}

    return Case(arrow(xs, xs), fwd, bwd)


def group_norm_case(n, c, hw, groups):
    xs = (n, c, hw, hw)
    x, dy = pattern(xs, 1), pattern(xs, 3)
    gamma, beta = pattern((c,), 6, 0.5, 1.0), pattern((c,), 7)
    _, mean, rstd = aten.native_group_norm(x, gamma, beta, n, c, hw * hw, groups, 1e-5)

    def fwd():
        return {"y": F.group_norm(x, groups, gamma, beta, 1e-5)}

    def bwd():
        dx, dg, db = aten.native_group_norm_backward(dy, x, mean, rstd, gamma, n, c, hw * hw, groups, [True, True, True])
        return {"dx": dx, "dgamma": dg, "dbeta": db}

    return Case(arrow(xs, xs), fwd, bwd)


def layer_norm_case(n, c, hw):
    xs, affine = (n, c, hw, hw), [c, hw, hw]
    x, dy = pattern(xs, 1), pattern(xs, 3)
    gamma, beta = pattern(affine, 6, 0.5, 1.0), pattern(affine, 7)
    _, mean, rstd = aten.native_layer_norm(x, affine, gamma, beta, 1e-5)

    def fwd():
        return {"y": F.layer_norm(x, affine, gamma, beta, 1e-5)}

    def bwd():
        dx, dg, db = aten.native_layer_norm_backward(dy, x, affine, mean, rstd, gamma, beta, [True, True, True])
        return {"dx": dx, "dgamma": dg, "dbeta": db}

    return Case(arrow(xs, xs), fwd, bwd)


# name -> a function making the case (its inputs are made only when it runs).
CASES = {
    "conv3x3_64x56x56": lambda: conv_case(8, 64, 56, 64, 3, 1, 1, 1, 1),
    "conv3x3_dilation2_64x28x28": lambda: conv_case(32, 64, 28, 64, 3, 1, 2, 2, 1),
    "depthwise3x3_32x112x112": lambda: conv_case(32, 32, 112, 32, 3, 1, 1, 1, 32),
    "depthwise3x3_576x14x14": lambda: conv_case(64, 576, 14, 576, 3, 1, 1, 1, 576),
    "depthwise3x3_960x7x7": lambda: conv_case(32, 960, 7, 960, 3, 1, 1, 1, 960),
    "depthwise3x3_stride2_144x56x56": lambda: conv_case(32, 144, 56, 144, 3, 2, 1, 1, 144),
    "grouped3x3_g4_128x28x28": lambda: conv_case(32, 128, 28, 128, 3, 1, 1, 1, 4),
    "grouped3x3_g32_128x28x28": lambda: conv_case(32, 128, 28, 128, 3, 1, 1, 1, 32),
    "conv_transpose2x2_stride2_64x28x28": lambda: conv_transpose_case(32, 64, 28, 32, 2, 2),
    **{kind + "_1M": (lambda kind=kind: activation_case(kind)) for kind in ACTIVATIONS},
    "upsample_nearest_x2_64x56x56": lambda: upsample_case(8, 64, 56, "nearest"),
    "upsample_bilinear_x2_64x56x56": lambda: upsample_case(8, 64, 56, "bilinear"),
    "concat_2x64x56x56": lambda: concat_case(8, 64, 56),
    "multiply_gate_64x56x56": lambda: multiply_case(8, 64, 56),
    "batchnorm_relu_16x28x28": lambda: batchnorm_relu_case(64, 16, 28),
    "batchnorm_relu_64x56x56": lambda: batchnorm_relu_case(16, 64, 56),
    "group_norm_g32_256x28x28": lambda: group_norm_case(32, 256, 28, 32),
    "layer_norm_256x28x28": lambda: layer_norm_case(32, 256, 28),
}


def run_case(name, make, warmup, repeat, threads):
    case = make()
    passes = [("forward", case.forward), ("backward", case.backward)]
    records = []
    with torch.no_grad():
        checks = {p: {k: squares(t) for k, t in fn().items()} for p, fn in passes}
        for _ in range(warmup):
            for _, fn in passes:
                fn()
        times = {p: [] for p, _ in passes}
        for _ in range(repeat):
            for p, fn in passes:
                start = time.perf_counter()
                fn()
                times[p].append((time.perf_counter() - start) * 1e3)
    for p, _ in passes:
        r = {"peer": "pytorch", "case": name, "shape": case.shape, "pass": p, "ms": statistics.median(times[p]),
             "min_ms": min(times[p]), "reps": repeat, "threads": threads, "check": checks[p]}
        if case.conv_backend:
            r["conv_backend"] = case.conv_backend
        records.append(r)
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--case", default=".*", help="run the cases whose name matches (re.search)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the JSON lines to this file")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    chosen = [n for n in CASES if re.search(a.case, n)]
    if a.list:
        print("\n".join(chosen))
        return 0
    if not chosen:
        print("no case matches " + a.case, file=sys.stderr)
        return 2
    out = open(a.json, "w") if a.json else None
    header = {"peer": "pytorch", "program": "torch_layer_kernels", "torch": torch.__version__,
              "threads": torch.get_num_threads(), "repeat": a.repeat, "warmup": a.warmup,
              "cpu_capability": torch.backends.cpu.get_cpu_capability()
              if hasattr(torch.backends, "cpu") and hasattr(torch.backends.cpu, "get_cpu_capability") else None}
    def emit(line):
        text = json.dumps(line)
        print(text, flush=True)
        if out:
            out.write(text + "\n")
            out.flush()

    emit(header)
    for n in chosen:
        for r in run_case(n, CASES[n], a.warmup, a.repeat, a.threads):
            emit(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
