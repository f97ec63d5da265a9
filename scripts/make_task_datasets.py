#!/usr/bin/env python3
"""Makes small segmentation, multi-label and regression data sets from Fashion-MNIST.

Python 3 standard library only (it runs with Debian's /usr/bin/python3; no numpy, no PIL).

    python3 scripts/make_task_datasets.py [--fashion DIR] [--out OUT] [--train N] [--test M]
                                          [--seed S] [--kinds segment,multilabel,regress]
                                          [--overwrite]

--fashion is the folder of the four Fashion-MNIST IDX files (.gz or raw; default Debian's
/usr/share/datasets/fashion-mnist). --train and --test (defaults 6000 and 1000) are the samples
written per split; train samples come from the 60000 training images, test samples from the
10000 test images. The output depends only on the seed (default 0) and the counts: each kind and
split draws from its own random stream, so leaving a kind out changes nothing in the others.
A kind's folder that already holds files is refused unless --overwrite, which deletes it first.

File names are NNNNN.png, zero-padded to five digits (wider past 99999 samples). The labels.csv
files name each image relative to DIR/{split}/images/, so "00042.png" is
DIR/{split}/images/00042.png.

OUT/fashion-segment/   semantic segmentation, 11 classes
    classes.txt                 background, then the 10 garment classes, one a line
    {train,test}/images/NNNNN.png   the 28x28 grey garment
    {train,test}/masks/NNNNN.png    28x28 8-bit grey: 0 (background) where the garment's pixel is
                                    below 32 of 255, else 1 + its class (1..10); no ignore (255)
                                    pixels. 32 keeps the faint anti-aliased fringe out of the
                                    garment without eating into dark fabric.
    train_images --data OUT/fashion-segment --model unet --task segment

OUT/fashion-multilabel/   multi-label classification, 10 classes
    {train,test}/images/NNNNN.png   a 56x56 grey 2x2 mosaic of four garments drawn at random (with
                                    replacement) from the split's source images
    {train,test}/labels.csv         header "file,T-shirt/top,Trouser,...,Ankle boot", then one row
                                    a mosaic: its file name and 0/1 per class, 1 where the mosaic
                                    shows that class (one to four ones a row)
    train_images --data OUT/fashion-multilabel --task multilabel

OUT/fashion-regress/   regression, 3 targets
    {train,test}/images/NNNNN.png   the 28x28 grey garment
    {train,test}/labels.csv         header "file,ink,center_y,center_x", 6 decimals: ink is the
                                    fraction of pixels >= 128 (0..1); center_y, center_x are the
                                    intensity-weighted centroid's row and column divided by 27
                                    (0..1; 0.5 for an all-black image)
    train_images --data OUT/fashion-regress --task regress
"""

import argparse
import csv
import gzip
import os
import random
import shutil
import struct
import sys
import zlib

CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
SIDE = 28
PIXELS = SIDE * SIDE
MASK_THRESHOLD = 32     # a pixel below it is background in the segmentation masks
INK_THRESHOLD = 128     # a pixel at or above it counts as ink in the regression targets
KINDS = ("segment", "multilabel", "regress")
SOURCE_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


class InputError(Exception):
    pass


# --- reading Fashion-MNIST ------------------------------------------------------------------

def read_idx(folder, stem):
    """The bytes of an IDX file, from stem.gz or stem."""
    for name in (stem + ".gz", stem):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            opener = gzip.open if name.endswith(".gz") else open
            try:
                with opener(path, "rb") as f:
                    return path, f.read()
            except (OSError, EOFError, zlib.error) as e:
                raise InputError("%s: cannot read: %s" % (path, e))
    raise InputError("%s: neither %s.gz nor %s is there" % (folder, stem, stem))


def load_split(folder, split):
    """(images as a bytes object of count*784 pixels, labels as bytes, count)."""
    images_stem, labels_stem = SOURCE_FILES[split]
    images_path, images = read_idx(folder, images_stem)
    labels_path, labels = read_idx(folder, labels_stem)
    if len(images) < 16 or struct.unpack(">I", images[:4])[0] != 0x803:
        raise InputError("%s: not an IDX file of 8-bit images (magic 0x00000803)" % images_path)
    count, rows, cols = struct.unpack(">III", images[4:16])
    if (rows, cols) != (SIDE, SIDE):
        raise InputError("%s: images are %dx%d, expected %dx%d" % (images_path, rows, cols, SIDE, SIDE))
    if len(images) != 16 + count * PIXELS:
        raise InputError("%s: %d bytes, expected %d for %d images"
                         % (images_path, len(images), 16 + count * PIXELS, count))
    if len(labels) < 8 or struct.unpack(">I", labels[:4])[0] != 0x801:
        raise InputError("%s: not an IDX file of 8-bit labels (magic 0x00000801)" % labels_path)
    label_count = struct.unpack(">I", labels[4:8])[0]
    if label_count != count or len(labels) != 8 + count:
        raise InputError("%s: %d labels in %d bytes, expected %d labels for %s"
                         % (labels_path, label_count, len(labels), count, images_path))
    labels = labels[8:]
    bad = next((i for i, c in enumerate(labels) if c >= len(CLASS_NAMES)), None)
    if bad is not None:
        raise InputError("%s: label %d of sample %d is not a class 0..9" % (labels_path, labels[bad], bad))
    return images[16:], labels, count


# --- writing PNGs -----------------------------------------------------------------------------

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def png_bytes(pixels, width, height):
    """An 8-bit grey PNG (colour type 0) of width*height row-major pixels, filter 0 on each row."""
    raw = b"".join(b"\x00" + pixels[y * width:(y + 1) * width] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (PNG_SIGNATURE + png_chunk(b"IHDR", header)
            + png_chunk(b"IDAT", zlib.compress(raw, 6)) + png_chunk(b"IEND", b""))


def write_png(path, pixels, width, height):
    with open(path, "wb") as f:
        f.write(png_bytes(bytes(pixels), width, height))


# --- the data sets ----------------------------------------------------------------------------

def file_name(index, count):
    return "%0*d.png" % (max(5, len(str(count - 1))), index)


def rng_for(seed, kind, split):
    return random.Random("%d/%s/%s" % (seed, kind, split))


def pick(rng, available, wanted, split):
    if wanted > available:
        raise InputError("--%s %d: the %s split has only %d images" % (split, wanted, split, available))
    return rng.sample(range(available), wanted)


def garment(images, i):
    return images[i * PIXELS:(i + 1) * PIXELS]


def make_segment(out, split, data, wanted, seed):
    images, labels, count = data
    image_dir = os.path.join(out, split, "images")
    mask_dir = os.path.join(out, split, "masks")
    os.makedirs(image_dir)
    os.makedirs(mask_dir)
    for n, i in enumerate(pick(rng_for(seed, "segment", split), count, wanted, split)):
        pixels = garment(images, i)
        value = 1 + labels[i]
        mask = bytes(0 if p < MASK_THRESHOLD else value for p in pixels)
        name = file_name(n, wanted)
        write_png(os.path.join(image_dir, name), pixels, SIDE, SIDE)
        write_png(os.path.join(mask_dir, name), mask, SIDE, SIDE)


def make_multilabel(out, split, data, wanted, seed):
    images, labels, count = data
    image_dir = os.path.join(out, split, "images")
    os.makedirs(image_dir)
    rng = rng_for(seed, "multilabel", split)
    with open(os.path.join(out, split, "labels.csv"), "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["file"] + CLASS_NAMES)
        for n in range(wanted):
            tiles = [rng.randrange(count) for _ in range(4)]
            mosaic = bytearray(4 * PIXELS)
            for t, i in enumerate(tiles):
                pixels = garment(images, i)
                top, left = (t // 2) * SIDE, (t % 2) * SIDE
                for y in range(SIDE):
                    start = (top + y) * 2 * SIDE + left
                    mosaic[start:start + SIDE] = pixels[y * SIDE:(y + 1) * SIDE]
            shown = {labels[i] for i in tiles}
            name = file_name(n, wanted)
            write_png(os.path.join(image_dir, name), mosaic, 2 * SIDE, 2 * SIDE)
            writer.writerow([name] + [1 if c in shown else 0 for c in range(len(CLASS_NAMES))])


def regression_targets(pixels):
    ink = sum(1 for p in pixels if p >= INK_THRESHOLD) / PIXELS
    total = sum(pixels)
    if total == 0:
        return ink, 0.5, 0.5
    row_sums = [sum(pixels[y * SIDE:(y + 1) * SIDE]) for y in range(SIDE)]
    col_sums = [sum(pixels[x::SIDE]) for x in range(SIDE)]
    center_y = sum(y * s for y, s in enumerate(row_sums)) / total
    center_x = sum(x * s for x, s in enumerate(col_sums)) / total
    return ink, center_y / (SIDE - 1), center_x / (SIDE - 1)


def make_regress(out, split, data, wanted, seed):
    images, _, count = data
    image_dir = os.path.join(out, split, "images")
    os.makedirs(image_dir)
    with open(os.path.join(out, split, "labels.csv"), "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["file", "ink", "center_y", "center_x"])
        for n, i in enumerate(pick(rng_for(seed, "regress", split), count, wanted, split)):
            pixels = garment(images, i)
            name = file_name(n, wanted)
            write_png(os.path.join(image_dir, name), pixels, SIDE, SIDE)
            writer.writerow([name] + ["%.6f" % v for v in regression_targets(pixels)])


MAKERS = {"segment": make_segment, "multilabel": make_multilabel, "regress": make_regress}


def prepare_folder(path, overwrite):
    if os.path.lexists(path):
        if not os.path.isdir(path) or os.path.islink(path):
            raise InputError("%s: exists and is not a folder" % path)
        if os.listdir(path):
            if not overwrite:
                raise InputError("%s: already holds files (--overwrite deletes it first)" % path)
            shutil.rmtree(path)
    os.makedirs(path, exist_ok=True)


# --- command line -----------------------------------------------------------------------------

def parse_kinds(text):
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError("'%s': kinds are a comma-separated list of %s"
                                         % (text, ", ".join(KINDS)))
    return list(dict.fromkeys(kinds))


def non_negative(text):
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError("'%s' is not a count (an integer >= 0)" % text)
    return value


def main(argv):
    parser = argparse.ArgumentParser(
        description="Makes segmentation, multi-label and regression data sets from Fashion-MNIST.")
    parser.add_argument("--fashion", default="/usr/share/datasets/fashion-mnist",
                        help="folder of the Fashion-MNIST IDX files (default: %(default)s)")
    parser.add_argument("--out", required=True, help="output folder (gets fashion-<kind>/ folders)")
    parser.add_argument("--train", type=non_negative, default=6000, help="training samples (default: %(default)s)")
    parser.add_argument("--test", type=non_negative, default=1000, help="test samples (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    parser.add_argument("--kinds", type=parse_kinds, default=list(KINDS),
                        help="comma-separated subset of segment,multilabel,regress (default: all)")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete a kind's output folder first when it already holds files")
    args = parser.parse_args(argv)
    wanted = {"train": args.train, "test": args.test}

    try:
        data = {split: load_split(args.fashion, split) for split in ("train", "test")}
        # Checked before anything is written; mosaics draw with replacement and take any count.
        for split in ("train", "test"):
            if wanted[split] > data[split][2] and any(k != "multilabel" for k in args.kinds):
                raise InputError("--%s %d: the %s split has only %d images"
                                 % (split, wanted[split], split, data[split][2]))
        for kind in args.kinds:
            folder = os.path.join(args.out, "fashion-" + kind)
            prepare_folder(folder, args.overwrite)
            if kind == "segment":
                with open(os.path.join(folder, "classes.txt"), "w") as f:
                    f.write("\n".join(["background"] + CLASS_NAMES) + "\n")
            for split in ("train", "test"):
                MAKERS[kind](folder, split, data[split], wanted[split], args.seed)
            print("wrote %s (train %d, test %d)" % (folder, wanted["train"], wanted["test"]))
    except (InputError, OSError) as e:
        print("make_task_datasets: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
