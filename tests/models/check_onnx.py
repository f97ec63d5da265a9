"""The onnxruntime half of onnx_export_matches_onnxruntime (onnx_runtime_check.sh).

Runs an exported model with onnxruntime on the first COUNT Fashion-MNIST test images, fed as the
file's metadata says (pixel_scale, normalization_mean, normalization_std), and compares its first
output (logits; a regression's values) with ours (onnx_reference.cpp wrote them): the largest
absolute difference, relative to the largest absolute output, must be at most 1e-4 (a model in
float16, its metadata's precision "fp16": FP16_TOLERANCE, below). The outputs
must be the TASK's (models/onnx_export.hpp): their names and shapes, the probabilities the softmax
over axis 1 (classify, segment) or the sigmoid (multilabel) of ours, none for a regression, and
the metadata's task and class names must say the same. Exits 1 otherwise.
"""
import argparse
import gzip
import json
import struct
import sys

import numpy as np
import onnxruntime as ort

TOLERANCE = 1e-4
# float16 keeps 11 significant bits: each layer's rounding is up to 2^-11 of its values, and a few
# layers add up (measured: at most 4.5e-3, the U-Net's, over the models of onnx_runtime_check.sh).
FP16_TOLERANCE = 1e-2


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


def softmax_over_classes(x):
    shifted = np.exp(x - x.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--logits", required=True)
    parser.add_argument("--images", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--task", default="classify", choices=["classify", "segment", "multilabel", "regress"])
    args = parser.parse_args()

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    inputs, outputs = session.get_inputs(), session.get_outputs()
    expected = ["values"] if args.task == "regress" else ["logits", "probabilities"]
    if [i.name for i in inputs] != ["images"] or [o.name for o in outputs] != expected:
        fail(f"inputs {[i.name for i in inputs]}, outputs {[o.name for o in outputs]}: expected {expected}")
    if not isinstance(inputs[0].shape[0], str):
        fail(f"the batch dimension is not symbolic: {inputs[0].shape}")
    rank = 4 if args.task == "segment" else 2
    for o in outputs:
        if len(o.shape) != rank or not isinstance(o.shape[0], str):
            fail(f"output {o.name} has the shape {o.shape}: expected {rank} dimensions, the first symbolic")
    if meta.get("pixel_scale") != "1/255":
        fail(f"pixel_scale {meta.get('pixel_scale')!r}")
    if meta.get("task") != args.task:
        fail(f"the metadata's task is {meta.get('task')!r}, not {args.task}")
    if meta.get("precision") not in ("fp32", "fp16"):
        fail(f"the metadata's precision is {meta.get('precision')!r}")
    tolerance = FP16_TOLERANCE if meta["precision"] == "fp16" else TOLERANCE

    mean = np.array(json.loads(meta["normalization_mean"]), dtype=np.float32).reshape(1, -1, 1, 1)
    std = np.array(json.loads(meta["normalization_std"]), dtype=np.float32).reshape(1, -1, 1, 1)
    images = read_idx_images(args.images, args.count).astype(np.float32) / np.float32(255)
    results = session.run(expected, {"images": (images - mean) / std})
    logits = results[0]
    if args.task == "segment" and logits.shape[2:] != images.shape[2:]:
        fail(f"the logits {logits.shape} are not at the images' size {images.shape}")

    ours = np.fromfile(args.logits, dtype=np.float32)
    if ours.size != logits.size:
        fail(f"{ours.size} outputs of ours, onnxruntime gave {logits.shape}")
    ours = ours.reshape(logits.shape)
    difference = float(np.max(np.abs(logits - ours)))
    scale = float(np.max(np.abs(ours)))
    relative = difference / scale
    classes = len(json.loads(meta["class_names"]))
    print(f"{args.model} ({args.task}): {args.count} images, {expected[0]} {list(logits.shape[1:])}, "
          f"max |onnxruntime - ours| {difference:.3g}, largest |output| {scale:.3g}, relative {relative:.3g} "
          f"(tolerance {tolerance:g})")
    if classes != logits.shape[1]:
        fail(f"{classes} class names for {logits.shape[1]} {'targets' if args.task == 'regress' else 'classes'}")
    if not relative <= tolerance:
        fail(f"relative difference {relative:.3g} over {tolerance:g}")
    if args.task == "regress":
        return
    probabilities = results[1]
    wanted = sigmoid(ours) if args.task == "multilabel" else softmax_over_classes(ours)
    if not np.allclose(probabilities, wanted, atol=1e-5 if tolerance == TOLERANCE else tolerance):
        what = "sigmoid" if args.task == "multilabel" else "softmax over the classes"
        fail(f"the probabilities are not the {what} of the logits")

if __name__ == "__main__":
    main()
