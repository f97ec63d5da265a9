"""The onnxruntime half of onnx_export_matches_onnxruntime (onnx_runtime_check.sh).

Runs an exported model with onnxruntime on the first COUNT Fashion-MNIST test images, fed as the
file's metadata says (pixel_scale, normalization_mean, normalization_std), and compares its logits
with ours (onnx_reference.cpp wrote them): the largest absolute difference, relative to the
largest absolute logit, must be at most 1e-4. Exits 1 otherwise.
"""
import argparse
import gzip
import json
import struct
import sys

import numpy as np
import onnxruntime as ort

TOLERANCE = 1e-4


def read_idx_images(path, count):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        magic, images, rows, cols = struct.unpack(">IIII", f.read(16))
        if magic != 2051 or images < count:
            sys.exit(f"{path}: not an IDX image file of at least {count} images")
        pixels = np.frombuffer(f.read(count * rows * cols), dtype=np.uint8)
    return pixels.reshape(count, 1, rows, cols)


def fail(message):
    print(f"FAILED: {message}")
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--logits", required=True)
    parser.add_argument("--images", required=True)
    parser.add_argument("--count", type=int, required=True)
    args = parser.parse_args()

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if [i.name for i in inputs] != ["images"] or [o.name for o in outputs] != ["logits", "probabilities"]:
        fail(f"inputs {[i.name for i in inputs]}, outputs {[o.name for o in outputs]}")
    if not isinstance(inputs[0].shape[0], str):
        fail(f"the batch dimension is not symbolic: {inputs[0].shape}")
    if meta.get("pixel_scale") != "1/255":
        fail(f"pixel_scale {meta.get('pixel_scale')!r}")

    mean = np.array(json.loads(meta["normalization_mean"]), dtype=np.float32).reshape(1, -1, 1, 1)
    std = np.array(json.loads(meta["normalization_std"]), dtype=np.float32).reshape(1, -1, 1, 1)
    images = read_idx_images(args.images, args.count).astype(np.float32) / np.float32(255)
    logits, probabilities = session.run(["logits", "probabilities"], {"images": (images - mean) / std})

    ours = np.fromfile(args.logits, dtype=np.float32)
    if ours.size != logits.size:
        fail(f"{ours.size} logits of ours, onnxruntime gave {logits.shape}")
    ours = ours.reshape(logits.shape)
    difference = float(np.max(np.abs(logits - ours)))
    scale = float(np.max(np.abs(ours)))
    relative = difference / scale
    classes = len(json.loads(meta["class_names"]))
    print(f"{args.model}: {args.count} images x {classes} classes, max |onnxruntime - ours| {difference:.3g}, "
          f"largest |logit| {scale:.3g}, relative {relative:.3g} (tolerance {TOLERANCE:g})")
    if classes != logits.shape[1]:
        fail(f"{classes} class names for {logits.shape[1]} logits")
    if not relative <= TOLERANCE:
        fail(f"relative difference {relative:.3g} over {TOLERANCE:g}")
    shifted = np.exp(ours - ours.max(axis=1, keepdims=True))
    if not np.allclose(probabilities, shifted / shifted.sum(axis=1, keepdims=True), atol=1e-5):
        fail("the probabilities are not the softmax of the logits")


if __name__ == "__main__":
    main()
