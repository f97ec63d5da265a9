#!/usr/bin/python3
"""PyTorch (eager, CPU) peer of cnnengine's `small` preset on Fashion-MNIST.

Same network, data, loss, optimizer and batch as
`train_images --model small --device cpu`; see README.md in this folder.
Prints progress, then one JSON line starting with {"peer": "pytorch".
Run with /usr/bin/python3 (Debian's python3-torch).
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """Read a gzipped IDX file (ubyte only) into a numpy array."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: expected {dims}, found {data.size} bytes")
    return data.reshape(dims)


def load(data_dir, split, limit=None):
    """Images as one NCHW float32 tensor in [0,1], labels as int64."""
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    if limit:
        images, labels = images[:limit], labels[:limit]
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1).contiguous()
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


def loaded_blas():
    """Which BLAS library this process loaded: PyTorch's dense layers run on it."""
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
    return sorted(os.path.realpath(lib) for lib in libs)


def environment():
    """The fields every CPU peer's JSON line ends with: what PyTorch ran on."""
    return {
        "torch_version": torch.__version__,
        "num_threads": torch.get_num_threads(),
        "mkldnn_enabled": torch.backends.mkldnn.is_available(),
        "blas": loaded_blas(),
    }


def cnnengine_init(model):
    """cnnengine's initialisation, which is PyTorch's nn defaults (engine/core/layer.hpp, Init):
    the weight and bias of every convolution, transposed convolution and dense layer from
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), BatchNorm 1 and 0. A module just built holds them already;
    this draws them again, so that a model whose modules were changed starts as ours."""
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear, nn.BatchNorm2d)):
            m.reset_parameters()
    return model


def parameter_count(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def small_net():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
        nn.Linear(128, 10),
    )


@torch.no_grad()
def accuracy(model, x, y, batch=1000):
    model.eval()
    correct = 0
    for i in range(0, len(x), batch):
        correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return correct / len(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=DATA)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--weight-decay", type=float, default=None,
                   help="default: 0.01 for AdamW, 0 for SGD")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--limit", type=int, default=None,
                   help="use only the first N training images")
    a = p.parse_args()

    torch.set_num_interop_threads(1)  # must come before any parallel work
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    x_train, y_train = load(a.data, "train", a.limit)
    x_test, y_test = load(a.data, "t10k")
    n = len(x_train)
    print(f"train {tuple(x_train.shape)}  test {tuple(x_test.shape)}  "
          f"torch {torch.__version__}  threads {torch.get_num_threads()}", flush=True)
    print("blas:", " ".join(loaded_blas()), flush=True)

    model = small_net()
    if a.optimizer == "adamw":
        wd = 0.01 if a.weight_decay is None else a.weight_decay
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=wd)
    else:
        wd = 0.0 if a.weight_decay is None else a.weight_decay
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                              weight_decay=wd)
    gen = torch.Generator().manual_seed(a.seed)

    seconds = 0.0
    epoch_loss = float("nan")
    for epoch in range(1, a.epochs + 1):
        start = time.perf_counter()
        order = torch.randperm(n, generator=gen)
        loss_sum = torch.zeros(())
        for i in range(0, n, a.batch):  # the last batch may be smaller
            idx = order[i:i + a.batch]
            xb, yb = x_train.index_select(0, idx), y_train.index_select(0, idx)
            loss = F.cross_entropy(model(xb), yb)  # mean over the batch
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.detach() * len(idx)
        elapsed = time.perf_counter() - start
        seconds += elapsed
        epoch_loss = loss_sum.item() / n
        print(f"epoch {epoch}/{a.epochs}: loss {epoch_loss:.4f}  "
              f"{n / elapsed:.1f} images/s  ({elapsed:.1f} s)", flush=True)

    test_acc = accuracy(model, x_test, y_test)
    print(f"test accuracy {test_acc:.4f}", flush=True)
    print(json.dumps({
        "peer": "pytorch",
        "images_per_second": n * a.epochs / seconds,
        "seconds": seconds,
        "epochs": a.epochs,
        "batch": a.batch,
        "threads": a.threads,
        "optimizer": a.optimizer,
        "lr": a.lr,
        "weight_decay": wd,
        "train_images": n,
        "test_accuracy": test_acc,
        "final_train_loss": epoch_loss,
        **environment(),
    }), flush=True)


if __name__ == "__main__":
    main()
