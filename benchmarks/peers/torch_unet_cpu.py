#!/usr/bin/python3
"""PyTorch (eager, CPU) peer of cnnengine's `unet` preset on a segmentation folder.

The network of `train_images --model unet[:depth=D,width=W]` (models/presets.cpp, `unet`): D
stages down, each twice [3x3 conv pad 1 without bias, BatchNorm, ReLU] then a 2x2 max pooling,
the channels doubling from W; that double convolution at the bottom; D stages up, each a 2x2
stride-2 transposed convolution with bias to half the channels, concatenated after the skip of
its level ([skip, up]), then the double convolution; a 1x1 convolution with bias to the classes.
The same initialisation (PyTorch's nn defaults: every conv and transposed conv weight and bias from
U(-1/sqrt(fan_in), 1/sqrt(fan_in)), BatchNorm 1 and 0), and train_images' defaults: AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8,
weight decay 0.01), cosine decay to 0 over the run's steps, batch 64, a shuffle each epoch, inputs
scaled to [0, 1]. The loss is the engine's: a sample's loss is the cross entropy averaged over its
pixels that are not ignored (mask 255), the batch's the mean of its samples' losses.

Data: DIR/{train,test}/images/NAME.png with DIR/{train,test}/masks/NAME.png (8-bit grey PNGs;
a mask byte is the class, 255 ignored) and DIR/classes.txt (the class names, one a line), as
scripts/make_task_datasets.py writes them. Everything is decoded up front; the epoch times cover
the training steps only. Prints progress, then one JSON line starting with {"peer": "pytorch".
Run with /usr/bin/python3 (Debian's python3-torch); see README.md here.
"""
import argparse
import json
import math
import os
import resource
import struct
import sys
import time
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_small_cpu import cnnengine_init, environment, loaded_blas, parameter_count  # noqa: E402

IGNORE = 255            # a mask byte that no loss or score counts
DEFAULT_MAX_DEPTH = 4   # unet's default depth: the halvings both sides divide by, at most this


# ---- Reading 8-bit grey PNGs (no PIL here).

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def unfilter(raw, width, height, path):
    """The pixels of `height` filtered rows of `width` one-byte pixels (PNG filters 0-4)."""
    stride = width + 1
    if len(raw) != stride * height:
        raise ValueError(f"{path}: {len(raw)} bytes of image data, expected {stride * height}")
    out = np.empty((height, width), dtype=np.uint8)
    prior = np.zeros(width, dtype=np.uint8)
    for y in range(height):
        kind = raw[y * stride]
        line = np.frombuffer(raw, dtype=np.uint8, count=width, offset=y * stride + 1)
        if kind == 0:    # None
            row = line.copy()
        elif kind == 1:  # Sub: x + the pixel to its left (one byte a pixel), a running sum mod 256
            row = np.cumsum(line, dtype=np.uint8)
        elif kind == 2:  # Up
            row = line + prior
        elif kind == 3:  # Average: x + floor((left + up) / 2)
            up = prior.tolist()
            vals = line.tolist()
            left = 0
            for i in range(width):
                left = (vals[i] + ((left + up[i]) >> 1)) & 0xFF
                vals[i] = left
            row = np.array(vals, dtype=np.uint8)
        elif kind == 4:  # Paeth
            up = prior.tolist()
            vals = line.tolist()
            left = upleft = 0
            for i in range(width):
                b = up[i]
                p = left + b - upleft
                pa, pb, pc = abs(p - left), abs(p - b), abs(p - upleft)
                if pa <= pb and pa <= pc:
                    pred = left
                elif pb <= pc:
                    pred = b
                else:
                    pred = upleft
                left = (vals[i] + pred) & 0xFF
                vals[i] = left
                upleft = b
            row = np.array(vals, dtype=np.uint8)
        else:
            raise ValueError(f"{path}: row {y} has the unknown filter type {kind}")
        out[y] = row
        prior = row
    return out


def read_grey_png(path):
    """An 8-bit grey PNG (colour type 0, not interlaced) as an HxW uint8 array."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != PNG_SIGNATURE:
        raise ValueError(f"{path}: not a PNG file")
    pos, header, idat = 8, None, []
    while True:
        if pos + 8 > len(data):
            raise ValueError(f"{path}: truncated (no IEND chunk)")
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc = data[pos + 8 + length:pos + 12 + length]
        if len(body) != length or len(crc) != 4:
            raise ValueError(f"{path}: truncated {kind!r} chunk")
        if struct.unpack(">I", crc)[0] != zlib.crc32(kind + body) & 0xFFFFFFFF:
            raise ValueError(f"{path}: the {kind!r} chunk fails its CRC")
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        elif kind == b"PLTE" or not (kind[0] & 0x20):  # a critical chunk this reader does not know
            raise ValueError(f"{path}: unsupported critical chunk {kind!r}")
    if header is None:
        raise ValueError(f"{path}: no IHDR chunk")
    width, height, depth, colour, compression, filtering, interlace = header
    if depth != 8 or colour != 0 or compression != 0 or filtering != 0 or interlace != 0:
        raise ValueError(f"{path}: bit depth {depth}, colour type {colour}, interlace {interlace}: "
                         "only 8-bit grey (colour type 0) non-interlaced PNGs are read")
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as e:
        raise ValueError(f"{path}: bad image data: {e}")
    return unfilter(raw, width, height, path)


# ---- The data set.

def read_classes(data_dir):
    with open(os.path.join(data_dir, "classes.txt")) as f:
        names = [line.strip() for line in f if line.strip()]
    if not names:
        raise ValueError(f"{data_dir}/classes.txt names no class")
    return names


def load(data_dir, split, classes, limit=None):
    """Images as one N x 1 x H x W float32 tensor in [0,1], masks as N x H x W int64."""
    image_dir = os.path.join(data_dir, split, "images")
    mask_dir = os.path.join(data_dir, split, "masks")
    names = sorted(n for n in os.listdir(image_dir) if n.lower().endswith(".png"))
    if limit:
        names = names[:limit]
    if not names:
        raise ValueError(f"{image_dir}: no PNG images")
    images = np.empty((len(names),) + read_grey_png(os.path.join(image_dir, names[0])).shape, dtype=np.uint8)
    masks = np.empty_like(images)
    for i, name in enumerate(names):
        image = read_grey_png(os.path.join(image_dir, name))
        mask = read_grey_png(os.path.join(mask_dir, name))
        if image.shape != images.shape[1:] or mask.shape != images.shape[1:]:
            raise ValueError(f"{split}/{name}: image {image.shape}, mask {mask.shape}, "
                             f"expected {images.shape[1:]} for both")
        bad = (mask >= classes) & (mask != IGNORE)
        if bad.any():
            raise ValueError(f"{mask_dir}/{name}: mask value {int(mask[bad][0])} is neither a class "
                             f"0..{classes - 1} nor {IGNORE} (ignored)")
        images[i], masks[i] = image, mask
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1).contiguous()
    y = torch.from_numpy(masks.astype(np.int64))
    return x, y


# ---- The network (models/presets.cpp, `unet`, `double_conv`, `conv_bn_relu`).

def default_depth(height, width):
    depth = 0
    while depth < DEFAULT_MAX_DEPTH and height % (2 << depth) == 0 and width % (2 << depth) == 0:
        depth += 1
    return max(depth, 1)


def double_conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class UNet(nn.Module):
    def __init__(self, channels, classes, depth, width):
        super().__init__()
        self.down = nn.ModuleList()
        cin = channels
        for level in range(depth):
            self.down.append(double_conv(cin, width << level))
            cin = width << level
        self.bottom = double_conv(cin, width << depth)
        self.up = nn.ModuleList()
        self.up_conv = nn.ModuleList()
        for level in reversed(range(depth)):
            self.up.append(nn.ConvTranspose2d(width << (level + 1), width << level, 2, stride=2, bias=True))
            self.up_conv.append(double_conv(2 * (width << level), width << level))
        self.head = nn.Conv2d(width, classes, 1, bias=True)

    def forward(self, x):
        skips = []
        for stage in self.down:
            x = stage(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, conv in zip(self.up, self.up_conv):
            x = conv(torch.cat([skips.pop(), up(x)], 1))
        return self.head(x)


def make_model(channels, classes, depth, width):
    return cnnengine_init(UNet(channels, classes, depth, width))


# ---- Loss and scores.

def sample_losses(logits, y):
    """Each sample's cross entropy averaged over its pixels not ignored (0 where all are)."""
    pixel = F.cross_entropy(logits, y, ignore_index=IGNORE, reduction="none")  # 0 where ignored
    counted = (y != IGNORE).flatten(1).sum(1)
    return pixel.flatten(1).sum(1) / counted.clamp(min=1)


@torch.no_grad()
def evaluate(model, x, y, classes, batch):
    """(mean loss over samples, pixel accuracy, mean IoU, IoU per class) in eval mode."""
    model.eval()
    loss_sum = 0.0
    confusion = torch.zeros(classes * classes, dtype=torch.int64)  # true x classes + predicted
    for i in range(0, len(x), batch):
        logits = model(x[i:i + batch])
        yb = y[i:i + batch]
        loss_sum += sample_losses(logits, yb).sum().item()
        keep = yb != IGNORE
        confusion += torch.bincount(yb[keep] * classes + logits.argmax(1)[keep], minlength=classes * classes)
    model.train()
    confusion = confusion.view(classes, classes).double()
    tp = confusion.diag()
    union = confusion.sum(0) + confusion.sum(1) - tp  # TP + FP + FN
    counted = confusion.sum().item()
    accuracy = tp.sum().item() / counted if counted else float("nan")
    iou = [(tp[k] / union[k]).item() if union[k] > 0 else float("nan") for k in range(classes)]
    scored = [v for v in iou if not math.isnan(v)]
    mean_iou = sum(scored) / len(scored) if scored else float("nan")
    return loss_sum / len(x), accuracy, mean_iou, iou


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="segmentation folder (DIR/{train,test}/{images,masks})")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--depth", type=int, default=None,
                   help="halvings (default: as many as both sides divide by, at most 4, at least 1)")
    p.add_argument("--width", type=int, default=32, help="channels of the first stage (default 32)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--limit", type=int, default=None, help="use only the first N training images")
    p.add_argument("--limit-eval", type=int, default=None, help="evaluate on the first N test images only")
    a = p.parse_args()
    if a.epochs < 1 or a.batch < 1 or a.width < 1 or a.threads < 1 or (a.depth is not None and a.depth < 1):
        p.error("--epochs, --batch, --width, --threads and --depth must be at least 1")

    torch.set_num_interop_threads(1)  # must come before any parallel work
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    class_names = read_classes(a.data)
    classes = len(class_names)
    decode_start = time.perf_counter()
    x_train, y_train = load(a.data, "train", classes, a.limit)
    x_test, y_test = load(a.data, "test", classes, a.limit_eval)
    decode_seconds = time.perf_counter() - decode_start
    n = len(x_train)
    _, channels, height, width = x_train.shape
    if tuple(x_test.shape[1:]) != (channels, height, width):
        raise SystemExit(f"test images are {tuple(x_test.shape[1:])}, training images {(channels, height, width)}")
    depth = a.depth if a.depth is not None else default_depth(height, width)
    scale = 1 << depth
    if height % scale or width % scale:
        raise SystemExit(f"unet halves the map {depth} times: the images' height and width must be multiples "
                         f"of {scale}, got {height}x{width}" + (" (choose another --depth)" if a.depth else ""))

    print(f"unet depth {depth} width {a.width}, {classes} classes: train {tuple(x_train.shape)}  "
          f"test {tuple(x_test.shape)}  (decoded in {decode_seconds:.1f} s)  "
          f"torch {torch.__version__}  threads {torch.get_num_threads()}", flush=True)
    print("blas:", " ".join(loaded_blas()), flush=True)

    model = make_model(channels, classes, depth, a.width)
    parameters = parameter_count(model)
    print(f"total trainable parameters: {parameters}", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=a.weight_decay)
    gen = torch.Generator().manual_seed(a.seed)
    steps_per_epoch = math.ceil(n / a.batch)
    total_steps = steps_per_epoch * a.epochs

    seconds = 0.0
    epoch_loss = epoch_accuracy = float("nan")
    step = 0
    for epoch in range(1, a.epochs + 1):
        start = time.perf_counter()
        order = torch.randperm(n, generator=gen)
        loss_sum = torch.zeros((), dtype=torch.float64)
        correct = torch.zeros((), dtype=torch.int64)
        counted = torch.zeros((), dtype=torch.int64)
        for i in range(0, n, a.batch):  # the last batch may be smaller
            # engine/train/optimizer.cpp scheduled_rate: lr x (1 + cos(pi x min(1, step / steps))) / 2
            rate = a.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, step / total_steps)))
            for group in opt.param_groups:
                group["lr"] = rate
            idx = order[i:i + a.batch]
            xb, yb = x_train.index_select(0, idx), y_train.index_select(0, idx)
            logits = model(xb)
            losses = sample_losses(logits, yb)
            loss = losses.mean()  # the mean over the batch's samples
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            with torch.no_grad():
                loss_sum += losses.detach().sum()
                keep = yb != IGNORE
                correct += (logits.argmax(1) == yb)[keep].sum()
                counted += keep.sum()
            step += 1
        elapsed = time.perf_counter() - start
        seconds += elapsed
        epoch_loss = loss_sum.item() / n
        epoch_accuracy = correct.item() / counted.item() if counted.item() else float("nan")
        print(f"epoch {epoch}/{a.epochs}: loss {epoch_loss:.4f}  pixel accuracy {epoch_accuracy:.4f}  "
              f"{n / elapsed:.1f} images/s  ({elapsed:.1f} s)", flush=True)

    test_loss, test_accuracy, test_mean_iou, test_iou = evaluate(model, x_test, y_test, classes, a.batch)
    rss = peak_rss_bytes()
    print(f"test loss {test_loss:.4f}  pixel accuracy {test_accuracy:.4f}  mean IoU {test_mean_iou:.4f} "
          f"on {len(x_test)} images", flush=True)
    print("IoU: " + "  ".join(f"{name} {'-' if math.isnan(v) else f'{v:.3f}'}"
                              for name, v in zip(class_names, test_iou)), flush=True)
    print(f"peak RSS {rss / 2 ** 20:.1f} MiB", flush=True)
    print(json.dumps({
        "peer": "pytorch",
        "model": "unet",
        "depth": depth,
        "width": a.width,
        "classes": classes,
        "parameters": parameters,
        "images_per_second": n * a.epochs / seconds,
        "seconds": seconds,
        "decode_seconds": decode_seconds,
        "epochs": a.epochs,
        "batch": a.batch,
        "threads": a.threads,
        "seed": a.seed,
        "optimizer": "adamw",
        "lr": a.lr,
        "schedule": "cosine",
        "weight_decay": a.weight_decay,
        "train_images": n,
        "test_images": len(x_test),
        "final_train_loss": epoch_loss,
        "final_train_pixel_accuracy": epoch_accuracy,
        "test_loss": test_loss,
        "test_pixel_accuracy": test_accuracy,
        "test_mean_iou": test_mean_iou,
        "test_iou": [None if math.isnan(v) else v for v in test_iou],
        "peak_rss_bytes": rss,
        **environment(),
    }), flush=True)


if __name__ == "__main__":
    main()
