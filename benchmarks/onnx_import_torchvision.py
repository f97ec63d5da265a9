#!/usr/bin/env python3
"""Is train_images' ONNX import faithful on torchvision's networks?

    onnx_import_torchvision.py --train-images PATH --work DIR --out-md FILE --out-jsonl FILE
        [--models resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,densenet121,efficientnet_b0]
        [--opsets 13,17] [--image-size 224] [--batch 2]

Run it through benchmarks/onnx_import_torchvision.sh, which makes once a virtual environment of
torch, torchvision, onnx, onnxruntime, numpy and onnxscript and passes its arguments here. No
network is needed once that exists: the networks are torchvision's with random weights.

For each model and opset:
1. The network, torchvision.models.<name>(weights=None) in eval mode after torch.manual_seed(0),
   with seeded random BatchNorm weights and biases and convolution and linear biases (torchvision's
   are zero), and non-trivial BatchNorm running statistics: each BatchNorm's those of its input on
   a seeded random batch, the variance then times uniform(0.5, 1.5) and the mean moved by 0.1
   standard deviation (drawn with no regard to the activations, they let the MobileNets' and
   EfficientNet's die out: build_model, set_statistics).
2. Exported by the TorchScript exporter (torch.onnx.export(..., dynamo=False)), input "input" and
   output "output" with a dynamic batch; and, where onnxscript is importable, by the dynamo
   exporter (dynamo=True) too. Weights are kept inside the file (external_data=False). An export
   that fails is a row with its error. The dynamo exporter writes opset 18 and converts it down,
   keeping 18 where it cannot: the row's file_opset is the file's own.
3. Imported and written back: `TRAIN_IMAGES --load FILE --export-onnx OURS --overwrite`. A failure
   (non-zero exit, no file written) is a row with the first line of its message.
4. Compared with onnxruntime (CPUExecutionProvider): one seeded normal(0, 1) input of shape
   [batch, 3, S, S] into the original's input and ours' first input; the first output of each,
   flattened per sample. The relative difference is max|ours - original| / max|original|; a row
   passes where it is at most 1e-4. The row's output spread, max|first sample - second| /
   max|original| of the original alone, shows that the output depends on the input at all.

Writes one JSON object a row to --out-jsonl (the distinct ONNX op types of the original file
included) and a markdown table with the date, CPU, commit, command and versions to --out-md.
"""
import argparse
import datetime
import inspect
import json
import logging
import os
import shlex
import subprocess
import sys
import time
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import commit, cpu_model  # noqa: E402

DEFAULT_MODELS = "resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,densenet121,efficientnet_b0"
TOLERANCE = 1e-4
SEED = 0
IMPORT_TIMEOUT_S = 600


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train-images", required=True, help="the train_images binary that imports")
    p.add_argument("--work", required=True, help="folder for the exported and imported files")
    p.add_argument("--out-md", required=True, help="markdown table to write")
    p.add_argument("--out-jsonl", required=True, help="JSON lines to write, one a (model, exporter, opset)")
    p.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated torchvision.models names")
    p.add_argument("--opsets", default="13,17", help="comma-separated ONNX opsets")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch", type=int, default=2)
    return p.parse_args()


# ---- the networks ----------------------------------------------------------------------------

def build_model(name, image_size):
    """torchvision's network with seeded random weights, non-zero biases and non-trivial BatchNorm
    statistics. torchvision starts biases at zero, which would hide a bias read wrongly (and the
    dynamo exporter drops a zero bias: a Gemm of two inputs). Running statistics drawn with no
    regard to the activations let those of the MobileNets and EfficientNet die out layer by layer
    (their output the classifier's bias, the same for every input to 1e-7, so an import's error
    anywhere before it would not show): set_statistics measures them on a random batch."""
    torch.manual_seed(SEED)
    model = getattr(torchvision.models, name)(weights=None)
    model.eval()
    generator = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.affine:
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=generator))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=generator))
            elif isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and m.bias is not None:
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=generator))
        set_statistics(model, image_size, generator)
    return model


def set_statistics(model, image_size, generator):
    """Sets every BatchNorm's running statistics, in eval mode, during one forward pass of a seeded
    normal(0, 1) batch: just before it runs, from its own input (the output of the layers before
    it, their statistics already set): the mean moved by 0.1 standard deviation, the variance times
    uniform(0.5, 1.5). Measured in train mode all at once instead, each layer's statistics would
    be those of inputs normalised exactly, and the perturbations would compound through the depth
    (EfficientNet-B0's activations grew 1000-fold and its float32 output differed from float64's by
    12%)."""
    def before(m, inputs):
        x = inputs[0].transpose(0, 1).flatten(1).double()
        mean, var = x.mean(1), x.var(1)
        m.running_var.copy_(var * (0.5 + torch.rand(var.shape, generator=generator, dtype=torch.float64)))
        m.running_mean.copy_(mean + 0.1 * torch.randn(mean.shape, generator=generator, dtype=torch.float64) * var.sqrt())
    hooks = [m.register_forward_pre_hook(before) for m in model.modules()
             if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    try:
        model(torch.randn(4, 3, image_size, image_size, generator=generator))
    finally:
        for h in hooks:
            h.remove()


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())


def exporters():
    """The exporters this torch has: TorchScript always, dynamo where onnxscript is importable."""
    names = ["torchscript"]
    try:
        import onnxscript  # noqa: F401
        names.append("dynamo")
    except ImportError:
        pass
    return names


def export(model, exporter, opset, image_size, path):
    """Writes the model to path with the exporter ("torchscript" or "dynamo")."""
    x = torch.zeros(2, 3, image_size, image_size)
    known = inspect.signature(torch.onnx.export).parameters
    options = dict(opset_version=opset, input_names=["input"], output_names=["output"], verbose=False,
                   dynamic_axes={"input": {0: "N"}, "output": {0: "N"}})
    if "dynamo" in known:
        options["dynamo"] = exporter == "dynamo"
    elif exporter == "dynamo":
        raise RuntimeError("this torch.onnx.export has no dynamo keyword")
    if "external_data" in known:
        options["external_data"] = False  # one self-contained file
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation, dynamo's dynamic_axes advice
        torch.onnx.export(model, (x,), path, **options)


def describe(path):
    """(node count, default-domain opset, sorted distinct op types) of an ONNX file."""
    m = onnx.load(path, load_external_data=False)
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
    return len(m.graph.node), opset, sorted({n.op_type for n in m.graph.node})


# ---- the import --------------------------------------------------------------------------------

def first_line(text):
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def run_import(train_images, source, target):
    """Runs train_images --load source --export-onnx target (deleted first, so that no earlier
    run's file is compared); returns None or the error's first line. A train_images that refuses
    --overwrite runs again without it."""
    if os.path.exists(target):
        os.remove(target)
    command = [train_images, "--load", source, "--export-onnx", target, "--overwrite"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S)
        if done.returncode != 0 and "--overwrite" in done.stdout + done.stderr:
            done = subprocess.run(command[:-1], capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return first_line(f"{type(e).__name__}: {e}")
    if done.returncode != 0:
        message = first_line(done.stderr) or first_line(done.stdout) or "no message"
        return f"train_images exited {done.returncode}: {message}"
    if not os.path.exists(target):
        return "train_images wrote no file"
    return None


# ---- the comparison ----------------------------------------------------------------------------

def session(path):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def first_output(path, x):
    """The first output of the file's network on x, [batch, -1]. A first input of fixed batch
    other than x's runs sample by sample."""
    s = session(path)
    first = s.get_inputs()[0]
    fixed = first.shape[0] if first.shape and isinstance(first.shape[0], int) else None
    name = s.get_outputs()[0].name
    if fixed is not None and fixed != x.shape[0]:
        if fixed != 1:
            raise RuntimeError(f"first input {first.name} {first.shape}: fixed batch {fixed}")
        y = np.concatenate([s.run([name], {first.name: x[i:i + 1]})[0] for i in range(x.shape[0])])
    else:
        y = s.run([name], {first.name: x})[0]
    return np.asarray(y, dtype=np.float64).reshape(x.shape[0], -1)


def compare(original, ours, batch, image_size):
    """(relative difference of ours from the original, the original's spread): the spread,
    max|first sample - second| / max|output|, says how much the output depends on the input at all
    (a network whose activations died out gives the same output for every input, and so would an
    import that lost everything before its last layer)."""
    x = np.random.default_rng(SEED).standard_normal((batch, 3, image_size, image_size)).astype(np.float32)
    a = first_output(original, x)
    b = first_output(ours, x)
    if a.shape != b.shape:
        raise RuntimeError(f"first outputs differ in shape: original {a.shape}, ours {b.shape}")
    scale = np.max(np.abs(a))
    difference = np.max(np.abs(a - b))
    spread = float(np.max(np.abs(a[0] - a[1])) / scale) if batch > 1 and scale > 0 else None
    return (float(difference / scale) if scale > 0 else float(difference)), spread


# ---- one row -----------------------------------------------------------------------------------

def measure(args, context, name, model, parameters, exporter, opset):
    """One row: export, import, compare. Every failure is the row's error, never an exception."""
    row = dict(context, model=name, exporter=exporter, opset=opset, image_size=args.image_size,
               batch=args.batch, imported=False, error=None, relative_difference=None, passed=False,
               output_spread=None, nodes=None, file_opset=None, parameters=parameters, op_types=None)
    stem = os.path.join(args.work, f"{name}_{exporter}_opset{opset}")
    original, ours = stem + ".onnx", stem + ".ours.onnx"
    try:
        export(model, exporter, opset, args.image_size, original)
        row["nodes"], row["file_opset"], row["op_types"] = describe(original)
    except Exception as e:  # noqa: BLE001 - any exporter failure is the row's result
        row["error"] = f"export: {first_line(f'{type(e).__name__}: {e}')}"
        return row
    error = run_import(args.train_images, original, ours)
    if error:
        row["error"] = f"import: {error}"
        return row
    row["imported"] = True
    try:
        row["relative_difference"], row["output_spread"] = compare(original, ours, args.batch, args.image_size)
        row["passed"] = row["relative_difference"] <= TOLERANCE
    except Exception as e:  # noqa: BLE001 - onnxruntime's refusal of either file is the row's result
        row["error"] = f"compare: {first_line(f'{type(e).__name__}: {e}')}"
    return row


# ---- the reports -------------------------------------------------------------------------------

def run_context():
    return dict(engine="cnnengine", peer=f"torchvision {torchvision.__version__} / torch {torch.__version__}",
                onnxruntime=ort.__version__, date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                host_cpu=cpu_model(), commit=commit())


def write_markdown(path, rows, context, command):
    def cell(value, fmt="{}"):
        return "" if value is None else fmt.format(value).replace("|", "\\|")
    lines = [
        "# ONNX import of torchvision's networks",
        "",
        f"- date: {context['date']}",
        f"- host CPU: {context['host_cpu']}",
        f"- commit: {context['commit']}",
        f"- command: `{command}`",
        f"- torch {torch.__version__}, torchvision {torchvision.__version__}, onnx {onnx.__version__}, "
        f"onnxruntime {ort.__version__}",
        f"- rule: train_images --load FILE --export-onnx OURS; onnxruntime runs both on one seeded normal(0, 1) "
        f"input; pass where max|ours - original| / max|original| <= {TOLERANCE:g} (relative)",
        "- output spread: max|first sample's output - second's| / max|output| of the original, how much its output "
        "depends on the input (near 0, the comparison would not see an error before the last layer)",
        "",
        "| model | exporter | opset | nodes | parameters | imported | relative difference | passed | output spread | error |",
        "| --- | --- | --- | ---: | ---: | --- | ---: | --- | ---: | --- |",
    ]
    for r in rows:
        opset = r["opset"] if r["file_opset"] in (None, r["opset"]) else f"{r['opset']} (file: {r['file_opset']})"
        lines.append(f"| {r['model']} | {r['exporter']} | {opset} | {cell(r['nodes'])} | {r['parameters']:,} | "
                     f"{'yes' if r['imported'] else 'no'} | {cell(r['relative_difference'], '{:.3g}')} | "
                     f"{'yes' if r['passed'] else 'no'} | {cell(r['output_spread'], '{:.3g}')} | {cell(r['error'])} |")
    passed = sum(r["passed"] for r in rows)
    lines += ["", f"{passed} of {len(rows)} passed.", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def quiet_exporters():
    """The dynamo exporter logs a traceback where it cannot convert its opset 18 down to the one
    asked for and keeps 18: the row's file_opset says so instead."""
    for name in ("onnxscript", "torch.onnx"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def main():
    args = parse_args()
    quiet_exporters()
    os.makedirs(args.work, exist_ok=True)
    command = shlex.join([sys.executable, *sys.argv])
    context = run_context()
    rows = []
    with open(args.out_jsonl, "w") as jsonl:
        for name in args.models.split(","):
            model = build_model(name, args.image_size)
            parameters = parameter_count(model)
            for exporter in exporters():
                for opset in (int(o) for o in args.opsets.split(",")):
                    start = time.perf_counter()
                    row = measure(args, context, name, model, parameters, exporter, opset)
                    rows.append(row)
                    jsonl.write(json.dumps(row) + "\n")
                    jsonl.flush()
                    difference = "-" if row["relative_difference"] is None else f"{row['relative_difference']:.3g}"
                    print(f"{name} {exporter} opset {opset}: {'pass' if row['passed'] else 'FAIL'} "
                          f"relative {difference} ({time.perf_counter() - start:.1f} s)"
                          + (f" {row['error']}" if row["error"] else ""), flush=True)
    write_markdown(args.out_md, rows, context, command)
    print(f"{sum(r['passed'] for r in rows)} passed, {sum(not r['passed'] for r in rows)} failed")


if __name__ == "__main__":
    main()
