#!/usr/bin/python3
"""PyTorch (eager, CPU) peer of cnnengine's larger presets on Fashion-MNIST.

The networks of `train_images --model small|small-bn|resnet|resnet18|resnet34|resnet50|mobilenetv2|
mobilenetv2-0.5|mobilenetv2-se|densenet` (models/presets.cpp): the same layers in the same order, the same
sizing from the input, the same initialisation (PyTorch's nn defaults: every conv and dense weight
and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), BatchNorm 1 and 0), and the same data, loss, optimizer, learning-rate
schedule and batch as train_images' defaults (AdamW, lr 1e-3, weight decay 0.01, cosine decay
over the run's steps, batch 64). Prints progress, then one JSON line starting with
{"peer": "pytorch". Run with /usr/bin/python3 (Debian's python3-torch); see README.md here.

--count-parameters prints the trainable parameter count of every preset at 3x224x224 and 1000
classes (the figures tests/models/presets_test.cpp checks) and exits.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_small_cpu import (  # noqa: E402
    DATA, accuracy, cnnengine_init, environment, load, loaded_blas, parameter_count)

# Inputs larger than this a side take the ImageNet layout (models/presets.cpp).
LARGEST_SMALL_IMAGE = 64


def imagenet_layout(side):
    return side > LARGEST_SMALL_IMAGE


def require_side(name, side, halvings):
    if side < 2 ** halvings:
        raise ValueError(f"{name} needs an input of at least {2 ** halvings}x{2 ** halvings} pixels")


def conv_bn(cin, cout, kernel, stride=1, groups=1):
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]


class Head(nn.Sequential):
    """Global average pooling, flatten, [dropout], dense."""

    def __init__(self, features, classes, dropout=0.0):
        layers = [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        super().__init__(*layers, nn.Linear(features, classes))


# ---- The first presets: small and small-bn.

def small(name, channels, side, classes, batchnorm):
    """Two 3x3 conv-relu-maxpool stages (32 and 64 channels; small-bn: bias-free convs with
    BatchNorm), dense 128, relu, [dropout 0.3], dense."""
    require_side(name, side, 2)
    layers, cin = [], channels
    for cout in (32, 64):
        layers.append(nn.Conv2d(cin, cout, 3, padding=1, bias=not batchnorm))
        if batchnorm:
            layers.append(nn.BatchNorm2d(cout))
        layers += [nn.ReLU(), nn.MaxPool2d(2)]
        cin = cout
    layers += [nn.Flatten(), nn.Linear(64 * (side // 4) ** 2, 128), nn.ReLU()]
    if batchnorm:
        layers.append(nn.Dropout(0.3))
    return nn.Sequential(*layers, nn.Linear(128, classes))


# ---- ResNets (torchvision's BasicBlock and Bottleneck, v1.5).

class Residual(nn.Module):
    def __init__(self, branch, shortcut):
        super().__init__()
        self.branch, self.shortcut = branch, shortcut

    def forward(self, x):
        return F.relu(self.branch(x) + (self.shortcut(x) if self.shortcut is not None else x))


def basic_block(cin, width, stride):
    branch = nn.Sequential(*conv_bn(cin, width, 3, stride), nn.ReLU(), *conv_bn(width, width, 3))
    shortcut = nn.Sequential(*conv_bn(cin, width, 1, stride)) if stride != 1 or cin != width else None
    return Residual(branch, shortcut), width


def bottleneck_block(cin, width, stride):
    out = 4 * width
    branch = nn.Sequential(*conv_bn(cin, width, 1), nn.ReLU(), *conv_bn(width, width, 3, stride), nn.ReLU(),
                           *conv_bn(width, out, 1))
    shortcut = nn.Sequential(*conv_bn(cin, out, 1, stride)) if stride != 1 or cin != out else None
    return Residual(branch, shortcut), out


def resnet(name, channels, side, classes, blocks_per_stage, bottleneck):
    if imagenet_layout(side):
        layers = [nn.Conv2d(channels, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                  nn.MaxPool2d(3, 2, 1)]
    else:
        require_side(name, side, 3)
        layers = [*conv_bn(channels, 64, 3), nn.ReLU()]
    cin = 64
    for stage, blocks in enumerate(blocks_per_stage):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            module, cin = (bottleneck_block if bottleneck else basic_block)(cin, 64 << stage, stride)
            layers.append(module)
    return nn.Sequential(*layers, Head(cin, classes))


def small_resnet(name, channels, side, classes, widths=(16, 32, 64), blocks_per_stage=2):
    """A 3x3 conv-bn-relu stem, stages of basic blocks (the first of each later stage striding 2),
    global average pooling, dense: resnet, for 28x28 to 32x32 images."""
    require_side(name, side, len(widths) - 1)
    layers, cin = [*conv_bn(channels, widths[0], 3), nn.ReLU()], widths[0]
    for stage, width in enumerate(widths):
        for block in range(blocks_per_stage):
            module, cin = basic_block(cin, width, 2 if stage > 0 and block == 0 else 1)
            layers.append(module)
    return nn.Sequential(*layers, Head(cin, classes))


# ---- MobileNetV2 (torchvision's), optionally with MobileNetV3's squeeze-and-excitation.

def make_divisible(v, divisor=8):
    rounded = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * v else rounded


class SqueezeExcitation(nn.Module):
    def __init__(self, channels):
        super().__init__()
        squeeze = make_divisible(channels // 4)
        self.fc1, self.fc2 = nn.Conv2d(channels, squeeze, 1), nn.Conv2d(squeeze, channels, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expansion, se):
        super().__init__()
        hidden = cin * expansion
        layers = [*conv_bn(cin, hidden, 1), nn.ReLU6()] if expansion != 1 else []
        layers += [*conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6()]
        if se:
            layers.append(SqueezeExcitation(hidden))
        layers += conv_bn(hidden, cout, 1)
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return self.body(x) + x if self.residual else self.body(x)


def mobilenet_v2(name, channels, side, classes, width=1.0, se=False):
    table = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
             (6, 320, 1, 1)]
    large = imagenet_layout(side)
    if not large:
        require_side(name, side, 3)
    cin = make_divisible(32 * width)
    layers = [*conv_bn(channels, cin, 3, 2 if large else 1), nn.ReLU6()]
    for t, c, n, s in table:
        stride = 1 if not large and c == 24 else s
        cout = make_divisible(c * width)
        for i in range(n):
            layers.append(InvertedResidual(cin, cout, stride if i == 0 else 1, t, se))
            cin = cout
    last = make_divisible(1280 * max(1.0, width))
    layers += [*conv_bn(cin, last, 1), nn.ReLU6()]
    return nn.Sequential(*layers, Head(last, classes, 0.2))


# ---- DenseNet-BC, growth 12, blocks of 6, 12, 24, 16 (torchvision's layer order).

GROWTH = 12
DENSE_BLOCKS = [6, 12, 24, 16]


class DenseLayer(nn.Module):
    def __init__(self, cin):
        super().__init__()
        self.body = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, 4 * GROWTH, 1, bias=False),
                                  nn.BatchNorm2d(4 * GROWTH), nn.ReLU(),
                                  nn.Conv2d(4 * GROWTH, GROWTH, 3, padding=1, bias=False))

    def forward(self, x):
        return torch.cat([x, self.body(x)], 1)


def densenet(name, channels, side, classes):
    if imagenet_layout(side):
        layers = [*conv_bn(channels, 2 * GROWTH, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    else:
        require_side(name, side, 3)
        layers = [nn.Conv2d(channels, 2 * GROWTH, 3, padding=1, bias=False)]
    cin = 2 * GROWTH
    for b, n in enumerate(DENSE_BLOCKS):
        for _ in range(n):
            layers.append(DenseLayer(cin))
            cin += GROWTH
        if b < len(DENSE_BLOCKS) - 1:
            layers += [nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, cin // 2, 1, bias=False), nn.AvgPool2d(2)]
            cin //= 2
    return nn.Sequential(*layers, nn.BatchNorm2d(cin), nn.ReLU(), Head(cin, classes))


MODELS = {
    "small": lambda c, s, k: small("small", c, s, k, batchnorm=False),
    "small-bn": lambda c, s, k: small("small-bn", c, s, k, batchnorm=True),
    "resnet": lambda c, s, k: small_resnet("resnet", c, s, k),
    "resnet18": lambda c, s, k: resnet("resnet18", c, s, k, [2, 2, 2, 2], bottleneck=False),
    "resnet34": lambda c, s, k: resnet("resnet34", c, s, k, [3, 4, 6, 3], bottleneck=False),
    "resnet50": lambda c, s, k: resnet("resnet50", c, s, k, [3, 4, 6, 3], bottleneck=True),
    "mobilenetv2": lambda c, s, k: mobilenet_v2("mobilenetv2", c, s, k),
    "mobilenetv2-0.5": lambda c, s, k: mobilenet_v2("mobilenetv2-0.5", c, s, k, width=0.5),
    "mobilenetv2-se": lambda c, s, k: mobilenet_v2("mobilenetv2-se", c, s, k, se=True),
    "densenet": lambda c, s, k: densenet("densenet", c, s, k),
}


def make_model(name, channels, side, classes):
    return cnnengine_init(MODELS[name](channels, side, classes))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), default="mobilenetv2")
    p.add_argument("--data", default=DATA)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--schedule", choices=["cosine", "constant"], default="cosine",
                   help="cosine: train_images' default, lr x (1 + cos(pi x step / steps)) / 2")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--limit", type=int, default=None, help="use only the first N training images")
    p.add_argument("--limit-eval", type=int, default=None, help="evaluate on the first N test images only")
    p.add_argument("--count-parameters", action="store_true",
                   help="print every preset's parameter count at 3x224x224, 1000 classes, and exit")
    a = p.parse_args()

    if a.count_parameters:
        for name in MODELS:
            print(json.dumps({"model": name, "input": [3, 224, 224], "classes": 1000,
                              "parameters": parameter_count(make_model(name, 3, 224, 1000))}))
        return

    torch.set_num_interop_threads(1)  # must come before any parallel work
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    x_train, y_train = load(a.data, "train", a.limit)
    x_test, y_test = load(a.data, "t10k", a.limit_eval)
    n = len(x_train)
    print(f"{a.model}: train {tuple(x_train.shape)}  test {tuple(x_test.shape)}  "
          f"torch {torch.__version__}  threads {torch.get_num_threads()}", flush=True)
    print("blas:", " ".join(loaded_blas()), flush=True)

    model = make_model(a.model, x_train.shape[1], min(x_train.shape[2], x_train.shape[3]), 10)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    gen = torch.Generator().manual_seed(a.seed)
    steps_per_epoch = math.ceil(n / a.batch)
    total_steps = steps_per_epoch * a.epochs

    seconds = 0.0
    epoch_loss = float("nan")
    step = 0
    for epoch in range(1, a.epochs + 1):
        start = time.perf_counter()
        order = torch.randperm(n, generator=gen)
        loss_sum = torch.zeros(())
        for i in range(0, n, a.batch):  # the last batch may be smaller
            if a.schedule == "cosine":
                for group in opt.param_groups:
                    group["lr"] = a.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, step / total_steps)))
            idx = order[i:i + a.batch]
            xb, yb = x_train.index_select(0, idx), y_train.index_select(0, idx)
            loss = F.cross_entropy(model(xb), yb)  # mean over the batch
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.detach() * len(idx)
            step += 1
        elapsed = time.perf_counter() - start
        seconds += elapsed
        epoch_loss = loss_sum.item() / n
        print(f"epoch {epoch}/{a.epochs}: loss {epoch_loss:.4f}  "
              f"{n / elapsed:.1f} images/s  ({elapsed:.1f} s)", flush=True)

    test_acc = accuracy(model, x_test, y_test)
    print(f"test accuracy {test_acc:.4f} on {len(x_test)} images", flush=True)
    print(json.dumps({
        "peer": "pytorch",
        "model": a.model,
        "parameters": parameter_count(model),
        "images_per_second": n * a.epochs / seconds,
        "seconds": seconds,
        "epochs": a.epochs,
        "batch": a.batch,
        "threads": a.threads,
        "optimizer": "adamw",
        "lr": a.lr,
        "schedule": a.schedule,
        "weight_decay": a.weight_decay,
        "train_images": n,
        "test_images": len(x_test),
        "test_accuracy": test_acc,
        "final_train_loss": epoch_loss,
        **environment(),
    }), flush=True)


if __name__ == "__main__":
    main()
