"""Checks that two ONNX models compute the same: an original and ours, the importer's re-export of it.

    compare_onnx_models.py --original A.onnx --ours B.onnx [--tolerance 1e-4] [--batch 3] [--seed 0]

Runs both with onnxruntime (CPUExecutionProvider) on one random float32 input, normal(0, 1), of the
original's input shape, its symbolic dimensions --batch (the first) and --size (the others: a
height and width exported symbolic; --batch where not given); a fixed one, such as a batch of 1,
stays as it is. Ours may name its one input otherwise and have several outputs: the first output of each
is compared, flattened per sample ([batch, -1]; their element counts must agree). They agree when
the largest absolute difference is at most --tolerance times the largest absolute value of the
original's (1e-6 at least). Prints "OK NAME maxdiff=... scale=...", else "FAILED: ..." and exits 1.
"""
import argparse
import os
import sys

import numpy as np
import onnxruntime as ort


def fail(message):
    print(f"FAILED: {message}")
    sys.exit(1)


def load(path):
    try:
        return ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises several kinds
        fail(f"onnxruntime cannot load {path}: {error}")


def one_input(session, path):
    inputs = session.get_inputs()
    if len(inputs) != 1:
        fail(f"{path} has {len(inputs)} inputs ({', '.join(i.name for i in inputs)}): expected one")
    return inputs[0]


def first_output(session, path, feed):
    try:
        return session.run([session.get_outputs()[0].name], feed)[0]
    except Exception as error:
        fail(f"onnxruntime cannot run {path}: {error}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--original", required=True, help="the model imported")
    parser.add_argument("--ours", required=True, help="our export of the imported model")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="the largest difference allowed, relative to the original's largest |output|")
    parser.add_argument("--batch", type=int, default=3, help="the size of each symbolic input dimension")
    parser.add_argument("--size", type=int, help="the size of each symbolic dimension after the first")
    parser.add_argument("--seed", type=int, default=0, help="the seed of the random input")
    args = parser.parse_args()

    original, ours = load(args.original), load(args.ours)
    original_input = one_input(original, args.original)
    ours_input = one_input(ours, args.ours)
    size = args.batch if args.size is None else args.size
    shape = [d if isinstance(d, int) else args.batch if i == 0 else size for i, d in enumerate(original_input.shape)]
    x = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)

    a = first_output(original, args.original, {original_input.name: x})
    b = first_output(ours, args.ours, {ours_input.name: x})
    batch = shape[0]
    if a.size != b.size or a.size % batch != 0:
        fail(f"the outputs do not match per sample: original {list(a.shape)}, ours {list(b.shape)}, "
             f"batch {batch}")
    a = a.reshape(batch, -1).astype(np.float64)
    b = b.reshape(batch, -1).astype(np.float64)
    for which, values in (("original", a), ("ours", b)):
        if not np.all(np.isfinite(values)):
            fail(f"{np.count_nonzero(~np.isfinite(values))} of the {which}'s outputs are not finite")

    name = os.path.splitext(os.path.basename(args.original))[0]
    difference = float(np.max(np.abs(a - b))) if a.size else 0.0
    scale = max(float(np.max(np.abs(a))) if a.size else 0.0, 1e-6)
    if not difference <= args.tolerance * scale:
        fail(f"{name}: maxdiff={difference:.3g} over {args.tolerance:g} * scale={scale:.3g}")
    print(f"OK {name} maxdiff={difference:.3g} scale={scale:.3g}")


if __name__ == "__main__":
    main()
