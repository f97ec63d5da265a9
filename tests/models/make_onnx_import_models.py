"""Writes the small ONNX models that the ONNX importer's test reads (onnx.helper, no PyTorch).

    make_onnx_import_models.py --out DIR

DIR/<name>.onnx: a model the importer must accept; DIR/models.txt lists their file names, one a
line. Each has one float input "x" of shape [N, C, H, W] (N symbolic, except in batch1), one float
output, its weights as initializers with seeded random values (batch norms' running statistics
too), every node named, and passes onnx.checker.check_model(full_check=True) (but for the one
DEPRECATED below calls deprecated). Most are written the way PyTorch's exporters write the layers.

DIR/refuse_<name>.onnx: a model the importer must refuse; DIR/refusals.tsv has one line for each,
"refuse_<name>.onnx<TAB>NAME<TAB>KIND", and the importer's error must name both: NAME is the
offending node's name and KIND its op type, or, where a graph input is the trouble, NAME is that
input's name and KIND is "input".

Needs the onnx and numpy packages only.
"""
import argparse
import os
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SIZE = 16  # the inputs' height and width, unless a model says otherwise


class Graph:
    """One model under construction: its nodes, initializers and seeded random numbers."""

    def __init__(self, name, opset, channels=3, size=SIZE, batch="N", height=None, input_name="x"):
        self.name = name
        self.opset = opset
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))
        self.nodes = []
        self.initializers = []
        self.counts = {}
        height = size if height is None else height
        self.inputs = [helper.make_tensor_value_info(input_name, TensorProto.FLOAT,
                                                     [batch, channels, height, size])]
        self.x = input_name

    def fresh(self, prefix):
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        return f"{prefix}_{self.counts[prefix]}"

    def const(self, prefix, array):
        """An initializer holding ARRAY (float64 arrays become float32); returns its name."""
        array = np.asarray(array)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        name = self.fresh(prefix)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def normal(self, prefix, shape, std):
        return self.const(prefix, self.rng.normal(0.0, std, shape))

    def uniform(self, prefix, shape, low, high):
        return self.const(prefix, self.rng.uniform(low, high, shape))

    def node(self, op, inputs, name=None, outputs=1, **attributes):
        """Adds a node named NAME (else <op>_<count>); returns its output name (a list if several)."""
        name = name or self.fresh(op.lower())
        names = [f"{name}_out"] if outputs == 1 else [f"{name}_out{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=name, **attributes))
        return names[0] if outputs == 1 else names

    def finish(self, output, shape=None):
        """Returns (name, model) with OUTPUT as the graph's one output, of SHAPE, else of the shape
        onnx infers; either way its first dimension is the input's batch dimension."""
        graph = helper.make_graph(self.nodes, self.name, self.inputs,
                                  [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)],
                                  initializer=self.initializers)
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="make_onnx_import_models",
                                  ir_version=max(7, helper.find_min_ir_version_for(opsets)))
        if shape is None:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
            model.graph.output[0].CopyFrom(inferred.graph.output[0])
        dims = model.graph.output[0].type.tensor_type.shape.dim
        if not dims:
            sys.exit(f"make_onnx_import_models: onnx cannot infer the shape of {self.name}'s output: give it")
        dims[0].CopyFrom(self.inputs[0].type.tensor_type.shape.dim[0])
        return self.name, model


# Layers, each adding its weights with random values that keep the activations about unit size.

def conv(g, x, cin, cout, kernel=3, bias=True, gain=1.0, name=None, **attributes):
    """A Conv with a KERNEL (an int or [kh, kw]) kernel; ATTRIBUTES go to the node as they are."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    group = attributes.get("group", 1)
    fan_in = cin // group * kh * kw
    inputs = [x, g.normal("conv_weight", [cout, cin // group, kh, kw], gain * np.sqrt(2.0 / fan_in))]
    if bias:
        inputs.append(g.normal("conv_bias", [cout], 0.2))
    return g.node("Conv", inputs, name=name, kernel_shape=[kh, kw], **attributes)


def conv_transpose(g, x, cin, cout, kernel, bias=True, **attributes):
    inputs = [x, g.normal("convt_weight", [cin, cout, kernel, kernel], np.sqrt(2.0 / cin))]
    if bias:
        inputs.append(g.normal("convt_bias", [cout], 0.2))
    return g.node("ConvTranspose", inputs, kernel_shape=[kernel, kernel], **attributes)


def batch_norm(g, x, channels, epsilon=1e-3):
    return g.node("BatchNormalization", [
        x,
        g.uniform("bn_scale", [channels], 0.5, 1.5),
        g.normal("bn_bias", [channels], 0.2),
        g.normal("bn_mean", [channels], 0.2),
        g.uniform("bn_var", [channels], 0.5, 1.5),
    ], epsilon=epsilon)


def gemm(g, x, fin, fout, **attributes):
    """Gemm(x, W [fout, fin], b [fout]) with transB=1, as PyTorch writes nn.Linear."""
    weight = g.normal("fc_weight", [fout, fin], np.sqrt(1.0 / fin))
    return g.node("Gemm", [x, weight, g.normal("fc_bias", [fout], 0.2)], transB=1, **attributes)


def scalar(g, prefix, value):
    return g.const(prefix, np.array(value, dtype=np.float32))


def ints(g, prefix, values):
    return g.const(prefix, np.array(values, dtype=np.int64))


def pooled_features(g, channels=8):
    """conv 3 -> CHANNELS, GlobalAveragePool, Flatten: [N, CHANNELS], a classifier head's input."""
    y = g.node("GlobalAveragePool", [conv(g, g.x, 3, channels, pads=[1, 1, 1, 1])])
    return g.node("Flatten", [y], axis=1)


# The accepted models, a function per family, each yielding (name, model).

def conv_models():
    # 3x3 pad 1 with a bias, as nn.Conv2d(3, 8, 3, padding=1) is written.
    g = Graph("conv3x3_bias", 13)
    yield g.finish(conv(g, g.x, 3, 8, pads=[1, 1, 1, 1], strides=[1, 1]))
    # No bias input: bias=False.
    g = Graph("conv3x3_nobias", 11)
    yield g.finish(conv(g, g.x, 3, 8, bias=False, pads=[1, 1, 1, 1]))
    # Stride 2 pad 1: 16x16 -> 8x8.
    g = Graph("conv_stride2", 12)
    yield g.finish(conv(g, g.x, 3, 8, pads=[1, 1, 1, 1], strides=[2, 2]))
    # Two groups of 4 input channels each.
    g = Graph("conv_groups2", 14, channels=8)
    yield g.finish(conv(g, g.x, 8, 8, pads=[1, 1, 1, 1], group=2))
    # Depthwise: as many groups as channels.
    g = Graph("conv_depthwise", 15, channels=8)
    yield g.finish(conv(g, g.x, 8, 8, pads=[1, 1, 1, 1], group=8))
    # Dilation 2 with pad 2 keeps the size.
    g = Graph("conv_dilation2", 16)
    yield g.finish(conv(g, g.x, 3, 8, pads=[2, 2, 2, 2], dilations=[2, 2]))
    # A 1x1 kernel without pads.
    g = Graph("conv1x1", 17, channels=8)
    yield g.finish(conv(g, g.x, 8, 4, kernel=1))
    # auto_pad SAME_UPPER in place of pads: stride 1, kernel 3, as pad 1.
    g = Graph("conv_same_upper", 18)
    yield g.finish(conv(g, g.x, 3, 8, auto_pad="SAME_UPPER"))
    # auto_pad VALID: no padding, 16x16 -> 14x14.
    g = Graph("conv_valid", 19)
    yield g.finish(conv(g, g.x, 3, 8, auto_pad="VALID"))
    # Every attribute written out, strides, dilations and group at 1.
    g = Graph("conv_unit_attributes", 21)
    yield g.finish(conv(g, g.x, 3, 8, pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=1))


def conv_transpose_models():
    # Kernel 2 stride 2: 16x16 -> 32x32, the U-Net's upsampling.
    g = Graph("convtranspose_k2s2", 11, channels=8)
    yield g.finish(conv_transpose(g, g.x, 8, 4, 2, strides=[2, 2]))
    # Kernel 4 stride 2 pads 1: doubles the size too.
    g = Graph("convtranspose_k4s2p1", 13, channels=8)
    yield g.finish(conv_transpose(g, g.x, 8, 4, 4, strides=[2, 2], pads=[1, 1, 1, 1]))
    # Kernel 3 stride 2 pads 1 output_padding 1: doubles the size, the extra row and column on the end.
    g = Graph("convtranspose_k3s2p1_outpad1", 17, channels=8)
    yield g.finish(conv_transpose(g, g.x, 8, 4, 3, strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]))
    # No bias input.
    g = Graph("convtranspose_nobias", 14, channels=8)
    yield g.finish(conv_transpose(g, g.x, 8, 4, 2, bias=False, strides=[2, 2]))


def batch_norm_models():
    # BatchNormalization after a conv in the opset 9 form (at opset 11, the lowest the importer
    # reads), and the 14 and 15 forms; epsilon 1e-3.
    for opset in (11, 14, 15):
        g = Graph(f"batchnorm_opset{opset}", opset)
        yield g.finish(batch_norm(g, conv(g, g.x, 3, 8, pads=[1, 1, 1, 1]), 8))


def activation(name, opset, apply):
    """conv 3 -> 8 (outputs of about +-4, so that clips and saturations are reached), then APPLY."""
    g = Graph(name, opset)
    y = conv(g, g.x, 3, 8, gain=3.0, pads=[1, 1, 1, 1])
    return g.finish(apply(g, y))


def activation_models():
    yield activation("relu", 11, lambda g, y: g.node("Relu", [y]))
    yield activation("leakyrelu", 16, lambda g, y: g.node("LeakyRelu", [y], alpha=0.2))
    # ReLU6: Clip with min 0 and max 6 as initializer inputs (opset 11 on).
    yield activation("clip_relu6", 11, lambda g, y: g.node(
        "Clip", [y, scalar(g, "clip_min", 0.0), scalar(g, "clip_max", 6.0)]))
    # Clip with min 0 and no max (an empty input name): a ReLU.
    yield activation("clip_min_only", 13, lambda g, y: g.node("Clip", [y, scalar(g, "clip_min", 0.0), ""]))
    yield activation("sigmoid", 18, lambda g, y: g.node("Sigmoid", [y]))
    # PyTorch's Hardsigmoid: alpha 1/6, beta 0.5.
    yield activation("hardsigmoid", 12, lambda g, y: g.node("HardSigmoid", [y], alpha=1.0 / 6.0, beta=0.5))
    yield activation("hardswish", 14, lambda g, y: g.node("HardSwish", [y]))
    yield activation("tanh", 19, lambda g, y: g.node("Tanh", [y]))
    # GELU as PyTorch's legacy exporter writes it: x * (erf(x / sqrt 2) + 1) * 0.5.
    yield activation("gelu_erf", 13, gelu_erf)
    # The Gelu op (opset 20), exact (erf) form.
    yield activation("gelu", 20, lambda g, y: g.node("Gelu", [y], approximate="none"))
    # SiLU: Mul(x, Sigmoid(x)), then the operands the other way round.
    yield activation("silu", 17, lambda g, y: g.node("Mul", [y, g.node("Sigmoid", [y])]))
    yield activation("silu_swapped", 21, lambda g, y: g.node("Mul", [g.node("Sigmoid", [y]), y]))


def gelu_erf(g, x):
    y = g.node("Div", [x, scalar(g, "sqrt2", 1.4142135381698608)])
    y = g.node("Add", [g.node("Erf", [y]), scalar(g, "one", 1.0)])
    y = g.node("Mul", [x, y])
    return g.node("Mul", [y, scalar(g, "half", 0.5)])


def join_models():
    # Squeeze-excitation: features * Sigmoid(conv1x1(Relu(conv1x1(GlobalAveragePool(features))))).
    g = Graph("squeeze_excitation", 13)
    features = conv(g, g.x, 3, 8, pads=[1, 1, 1, 1])
    gate = g.node("GlobalAveragePool", [features])
    gate = g.node("Relu", [conv(g, gate, 8, 4, kernel=1)])
    gate = g.node("Sigmoid", [conv(g, gate, 4, 8, kernel=1, gain=2.0)])
    yield g.finish(g.node("Mul", [features, gate]))
    # Residual: the sum of two conv branches.
    g = Graph("residual_add", 14)
    yield g.finish(g.node("Add", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1]), conv(g, g.x, 3, 8, kernel=1)]))
    # Concat along the channels of two branches of 4 and 6 channels.
    g = Graph("concat2", 12)
    branches = [conv(g, g.x, 3, 4, pads=[1, 1, 1, 1]), conv(g, g.x, 3, 6, kernel=1)]
    yield g.finish(g.node("Concat", branches, axis=1))
    # Concat of three branches of 2, 3 and 5 channels.
    g = Graph("concat3", 18)
    branches = [conv(g, g.x, 3, 2, pads=[1, 1, 1, 1]), conv(g, g.x, 3, 3, kernel=1),
                conv(g, g.x, 3, 5, pads=[2, 2, 2, 2], dilations=[2, 2])]
    yield g.finish(g.node("Concat", branches, axis=1))


def pool_models():
    # MaxPool kernel 3 stride 2 pad 1, a ResNet stem's: 16x16 -> 8x8.
    g = Graph("maxpool_k3s2p1", 12)
    yield g.finish(g.node("MaxPool", [g.x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    # MaxPool kernel 2 stride 2 ceil_mode on 15x15: 8x8, the last window one row and column short.
    g = Graph("maxpool_k2s2_ceil", 13, size=15)
    yield g.finish(g.node("MaxPool", [g.x], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1))
    g = Graph("avgpool_k2s2", 11)
    yield g.finish(g.node("AveragePool", [g.x], kernel_shape=[2, 2], strides=[2, 2]))
    # AveragePool kernel 3 stride 2 ceil_mode on 16x16: 8x8 (7x7 without ceil_mode), the last window
    # two wide, averaged over those two. (On 15x15 ceil_mode would change nothing: (15 - 3) / 2 is whole.)
    g = Graph("avgpool_k3s2_ceil", 19)
    yield g.finish(g.node("AveragePool", [g.x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))
    # AveragePool kernel 3 stride 1 pad 1, the padding left out of the averages (count_include_pad=0).
    g = Graph("avgpool_k3s1p1_exclude_pad", 17)
    yield g.finish(g.node("AveragePool", [g.x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                          count_include_pad=0))
    # A classifier head: GlobalAveragePool, Flatten, Gemm(transB=1) to 10 classes.
    g = Graph("gap_flatten_gemm", 11)
    yield g.finish(gemm(g, pooled_features(g), 8, 10))
    g = Graph("globalmaxpool", 15)
    yield g.finish(g.node("GlobalMaxPool", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1])]))
    # Flatten (axis 1) of an 8x4x4 map, then Gemm: the features in channel, row, column order.
    g = Graph("flatten_gemm", 16)
    y = g.node("MaxPool", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1], strides=[2, 2])], kernel_shape=[2, 2],
               strides=[2, 2])
    yield g.finish(gemm(g, g.node("Flatten", [y], axis=1), 8 * 4 * 4, 10))


def map_4x4(g):
    """conv 3 -> 8 stride 2, MaxPool 2: an [N, 8, 4, 4] map."""
    y = conv(g, g.x, 3, 8, pads=[1, 1, 1, 1], strides=[2, 2])
    return g.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])


def reshape_models():
    # x.view(x.size(0), -1) as PyTorch's legacy exporter writes it: Shape, Gather(0), Unsqueeze,
    # Concat with [-1], Reshape; Unsqueeze's axes an attribute (opset 11), then an input (opset 13).
    for opset in (11, 13):
        g = Graph(f"reshape_shape_chain_opset{opset}", opset)
        y = map_4x4(g)
        size = g.node("Gather", [g.node("Shape", [y]), g.const("index", np.array(0, dtype=np.int64))], axis=0)
        if opset < 13:
            size = g.node("Unsqueeze", [size], axes=[0])
        else:
            size = g.node("Unsqueeze", [size, ints(g, "axes", [0])])
        shape = g.node("Concat", [size, ints(g, "minus_one", [-1])], axis=0)
        yield g.finish(gemm(g, g.node("Reshape", [y, shape]), 8 * 4 * 4, 10), shape=["N", 10])
    # Reshape to a constant shape [-1, 128].
    g = Graph("reshape_minus1_features", 14)
    y = g.node("Reshape", [map_4x4(g), ints(g, "shape", [-1, 8 * 4 * 4])])
    yield g.finish(gemm(g, y, 8 * 4 * 4, 10))
    # Reshape to [0, -1]: 0 copies the batch dimension.
    g = Graph("reshape_zero_minus1", 15)
    y = g.node("Reshape", [map_4x4(g), ints(g, "shape", [0, -1])])
    yield g.finish(gemm(g, y, 8 * 4 * 4, 10))
    # The shape [-1, 128] from a Constant node rather than an initializer.
    g = Graph("reshape_constant_node", 18)
    shape = g.node("Constant", [], value=numpy_helper.from_array(np.array([-1, 8 * 4 * 4], dtype=np.int64)))
    yield g.finish(gemm(g, g.node("Reshape", [map_4x4(g), shape]), 8 * 4 * 4, 10))


def matrix_models():
    # Gemm transB=0: the weight stored [in, out].
    g = Graph("gemm_transb0", 12)
    weight = g.normal("fc_weight", [8, 10], np.sqrt(1.0 / 8))
    yield g.finish(g.node("Gemm", [pooled_features(g), weight, g.normal("fc_bias", [10], 0.2)], transB=0))
    # Gemm alpha 0.5 beta 2: 0.5 x W^T + 2 b.
    g = Graph("gemm_alpha_beta", 19)
    yield g.finish(gemm(g, pooled_features(g), 8, 10, alpha=0.5, beta=2.0))
    # MatMul by a weight [in, out], then Add a bias [out].
    g = Graph("matmul_add", 13)
    y = g.node("MatMul", [pooled_features(g), g.normal("fc_weight", [8, 10], np.sqrt(1.0 / 8))])
    yield g.finish(g.node("Add", [y, g.normal("fc_bias", [10], 0.2)]))
    # MatMul alone: no bias.
    g = Graph("matmul", 17)
    yield g.finish(g.node("MatMul", [pooled_features(g), g.normal("fc_weight", [8, 10], np.sqrt(1.0 / 8))]))


def pass_through_models():
    # Dropout between two convs: its ratio an input (opset 12 on), no training_mode; inference
    # passes the values through.
    g = Graph("dropout_opset12", 12)
    y = g.node("Dropout", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1]), scalar(g, "ratio", 0.5)])
    yield g.finish(conv(g, y, 8, 4, pads=[1, 1, 1, 1]))
    # Dropout with its ratio an attribute (Dropout-10, opset 11).
    g = Graph("dropout_opset11", 11)
    y = g.node("Dropout", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1])], ratio=0.5)
    yield g.finish(conv(g, y, 8, 4, pads=[1, 1, 1, 1]))
    # Identity between two convs.
    g = Graph("identity", 20)
    y = g.node("Identity", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1])])
    yield g.finish(conv(g, y, 8, 4, pads=[1, 1, 1, 1]))


def resize_models():
    nearest = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    # Nearest scale 2 as PyTorch writes nn.Upsample(scale_factor=2) at opset 11: roi an empty
    # tensor (an input Resize-11 requires), scales [1, 1, 2, 2].
    g = Graph("resize_nearest_opset11", 11, channels=8)
    roi = g.const("roi", np.zeros([0], dtype=np.float32))
    yield g.finish(g.node("Resize", [g.x, roi, g.const("scales", [1.0, 1.0, 2.0, 2.0])], **nearest))
    # Opset 13: roi left out (an empty input name).
    g = Graph("resize_nearest_opset13", 13, channels=8)
    yield g.finish(g.node("Resize", [g.x, "", g.const("scales", [1.0, 1.0, 2.0, 2.0])], **nearest))
    # sizes in place of scales, as PyTorch writes F.interpolate(x, size=(32, 32)): the batch and
    # channels from Shape(x)[0:2], Concat with [32, 32].
    g = Graph("resize_nearest_sizes", 13, channels=8)
    batch_channels = g.node("Slice", [g.node("Shape", [g.x]), ints(g, "starts", [0]), ints(g, "ends", [2]),
                                      ints(g, "axes", [0])])
    sizes = g.node("Concat", [batch_channels, ints(g, "hw", [2 * SIZE, 2 * SIZE])], axis=0)
    yield g.finish(g.node("Resize", [g.x, "", "", sizes], **nearest))
    # sizes of the height and width only, constant, with axes [2, 3] (opset 18 on).
    g = Graph("resize_nearest_sizes_axes", 18, channels=8)
    yield g.finish(g.node("Resize", [g.x, "", "", ints(g, "sizes", [2 * SIZE, 2 * SIZE])], axes=[2, 3],
                          **nearest))
    # Bilinear scale 2 with half_pixel, and with pytorch_half_pixel (PyTorch's for
    # align_corners=False); the same on these sizes.
    for opset, mode in ((19, "half_pixel"), (11, "pytorch_half_pixel")):
        g = Graph(f"resize_linear_{mode}", opset, channels=8)
        roi = g.const("roi", np.zeros([0], dtype=np.float32)) if opset == 11 else ""
        yield g.finish(g.node("Resize", [g.x, roi, g.const("scales", [1.0, 1.0, 2.0, 2.0])], mode="linear",
                              coordinate_transformation_mode=mode))


def normalization_models():
    # GroupNormalization-18: 4 groups of 2 channels, its scale and bias one per group. (onnx's
    # checker refuses it as deprecated, see DEPRECATED; onnxruntime runs it.)
    g = Graph("groupnorm_opset18", 18, channels=8)
    y = conv(g, g.x, 8, 8, pads=[1, 1, 1, 1])
    yield g.finish(g.node("GroupNormalization", [y, g.uniform("gn_scale", [4], 0.5, 1.5),
                                                 g.normal("gn_bias", [4], 0.2)], num_groups=4, epsilon=1e-5),
                   shape=["N", 8, SIZE, SIZE])
    # GroupNormalization-21: its scale and bias one per channel.
    g = Graph("groupnorm_opset21", 21, channels=8)
    y = conv(g, g.x, 8, 8, pads=[1, 1, 1, 1])
    yield g.finish(g.node("GroupNormalization", [y, g.uniform("gn_scale", [8], 0.5, 1.5),
                                                 g.normal("gn_bias", [8], 0.2)], num_groups=4, epsilon=1e-5),
                   shape=["N", 8, SIZE, SIZE])
    # InstanceNormalization, a scale and bias per channel.
    g = Graph("instancenorm", 11, channels=8)
    y = conv(g, g.x, 8, 8, pads=[1, 1, 1, 1])
    yield g.finish(g.node("InstanceNormalization", [y, g.uniform("in_scale", [8], 0.5, 1.5),
                                                    g.normal("in_bias", [8], 0.2)], epsilon=1e-5))
    # ReduceMean over axes [2, 3] keeping them: a global average pool. The axes an attribute
    # (opset 13), then an input (opset 18).
    g = Graph("reducemean_opset13", 13)
    yield g.finish(g.node("ReduceMean", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1])], axes=[2, 3], keepdims=1))
    g = Graph("reducemean_opset18", 18)
    y = conv(g, g.x, 3, 8, pads=[1, 1, 1, 1])
    yield g.finish(g.node("ReduceMean", [y, ints(g, "axes", [2, 3])], keepdims=1))


def conv_bn(g, x, cin, cout, kernel, stride, relu=True):
    y = conv(g, x, cin, cout, kernel=kernel, bias=False, strides=[stride, stride],
             pads=[kernel // 2] * 4)
    y = batch_norm(g, y, cout, epsilon=1e-5)
    return g.node("Relu", [y]) if relu else y


def residual_block(g, x, cin, cout, stride):
    """Two 3x3 conv-bn, the shortcut the input or, when the shape changes, conv1x1-bn."""
    y = conv_bn(g, conv_bn(g, x, cin, cout, 3, stride), cout, cout, 3, 1, relu=False)
    shortcut = x if stride == 1 and cin == cout else conv_bn(g, x, cin, cout, 1, stride, relu=False)
    return g.node("Relu", [g.node("Add", [y, shortcut])])


def network_models():
    # A tiny ResNet: conv-bn-relu, MaxPool, a residual block, a downsampling one (1x1 stride-2
    # shortcut), GlobalAveragePool, Flatten, Gemm to 10 classes.
    g = Graph("tiny_resnet", 17)
    y = conv_bn(g, g.x, 3, 8, 3, 1)
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = residual_block(g, y, 8, 8, 1)
    y = residual_block(g, y, 8, 16, 2)
    y = g.node("Flatten", [g.node("GlobalAveragePool", [y])], axis=1)
    yield g.finish(gemm(g, y, 16, 10))
    # The batch dimension fixed at 1 rather than symbolic.
    g = Graph("batch1", 13, batch=1)
    yield g.finish(g.node("Relu", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1])]))


def padding_models():
    # TensorFlow's SAME at stride 2: nothing at the top and left, 1 at the bottom and right.
    g = Graph("conv_same_stride2_pads", 13)
    yield g.finish(conv(g, g.x, 3, 8, pads=[0, 0, 1, 1], strides=[2, 2]))
    g = Graph("conv_auto_pad_same_upper_stride2", 13)
    yield g.finish(conv(g, g.x, 3, 8, auto_pad="SAME_UPPER", strides=[2, 2]))
    # Pads that differ between height (1) and width (2).
    g = Graph("conv_pads_differ_hw", 13)
    yield g.finish(conv(g, g.x, 3, 8, pads=[1, 2, 1, 2]))
    # MaxPool padded more at the start than the end: -infinity in front.
    g = Graph("maxpool_pads_uneven", 13)
    yield g.finish(g.node("MaxPool", [g.x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 0, 1]))
    # AveragePool counting its padding (count_include_pad=1), even and uneven: zeros in front.
    g = Graph("avgpool_count_include_pad", 13)
    yield g.finish(g.node("AveragePool", [g.x], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1))
    g = Graph("avgpool_uneven_count_include_pad", 13)
    yield g.finish(g.node("AveragePool", [g.x], kernel_shape=[2, 2], pads=[0, 0, 1, 1], count_include_pad=1))
    # Pad with a value (opset 13: pads and value inputs), then a convolution.
    g = Graph("pad_value_opset13", 13)
    y = g.node("Pad", [g.x, ints(g, "pads", [0, 0, 1, 2, 0, 0, 3, 0]), scalar(g, "value", 0.5)])
    yield g.finish(conv(g, y, 3, 8))
    # Pad without a value (zeros; opset 11), and over axes [2, 3] (opset 18).
    g = Graph("pad_zeros_opset11", 11)
    yield g.finish(g.node("Pad", [g.x, ints(g, "pads", [0, 0, 2, 2, 0, 0, 2, 2])]))
    g = Graph("pad_axes_opset18", 18)
    yield g.finish(g.node("Pad", [g.x, ints(g, "pads", [1, 0, 0, 2]), "", ints(g, "axes", [2, 3])]))


def scale_and_shift_models():
    # The input normalised in the graph, as Keras's Normalization layer exports: (x - mean) / std,
    # one value a channel ([3, 1, 1] and [1, 3, 1, 1]).
    g = Graph("normalised_input", 13)
    y = g.node("Sub", [g.x, g.const("mean", np.array([0.5, 0.4, 0.3]).reshape(3, 1, 1))])
    y = g.node("Div", [y, g.const("std", np.array([0.2, 0.25, 0.3]).reshape(1, 3, 1, 1))])
    yield g.finish(conv(g, y, 3, 8, pads=[1, 1, 1, 1]))
    # Inference BatchNorm as tf2onnx writes it: Mul then Add, one value a channel.
    g = Graph("batchnorm_as_mul_add", 13)
    y = g.node("Mul", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1]), g.uniform("scale", [8, 1, 1], 0.5, 1.5)])
    yield g.finish(g.node("Relu", [g.node("Add", [g.uniform("shift", [8, 1, 1], -0.5, 0.5), y])]))
    # Scalars on either side: 2 - x, x * 0.5, x + 1, x / 4.
    g = Graph("scalars_either_side", 11)
    y = g.node("Sub", [scalar(g, "two", 2.0), g.x])
    y = g.node("Mul", [y, scalar(g, "half", 0.5)])
    y = g.node("Add", [scalar(g, "one", 1.0), y])
    yield g.finish(g.node("Div", [y, scalar(g, "four", 4.0)]))


ACCEPTED = [conv_models, conv_transpose_models, batch_norm_models, activation_models, join_models,
            pool_models, reshape_models, matrix_models, pass_through_models, resize_models,
            normalization_models, network_models, padding_models, scale_and_shift_models]


def sized_models():
    """Yields (name, model, size): models whose height and width are symbolic, imported at SIZE."""
    g = Graph("symbolic_height_width", 13, size="W", height="H")
    y = g.node("GlobalAveragePool", [g.node("Relu", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1], strides=[2, 2])])])
    yield (*g.finish(gemm(g, g.node("Flatten", [y], axis=1), 8, 10)), 20)


# The refused models, each with the name its error must give and that one's op type or "input".

def refusal(g, output, offender, kind):
    return (*g.finish(output), offender, kind)


def refused_models():
    """Yields (name, model, offending node or input, its op type or "input")."""
    # A non-square kernel, 1x3, without pads.
    g = Graph("refuse_conv_kernel_1x3", 13)
    yield refusal(g, conv(g, g.x, 3, 8, kernel=[1, 3], name="bad_conv"), "bad_conv", "Conv")
    # AveragePool with uneven pads left out of its averages: no pad layer in front can do that.
    g = Graph("refuse_avgpool_uneven_exclude_pad", 13)
    y = g.node("AveragePool", [g.x], name="bad_pool", kernel_shape=[3, 3], pads=[0, 0, 1, 1], count_include_pad=0)
    yield refusal(g, y, "bad_pool", "AveragePool")
    # A constant of one value a column, a constant divided by an activation, and two activations
    # subtracted.
    g = Graph("refuse_mul_per_column", 13)
    yield refusal(g, g.node("Mul", [g.x, g.uniform("columns", [SIZE], 0.5, 1.5)], name="bad_mul"), "bad_mul", "Mul")
    g = Graph("refuse_constant_over_activation", 13)
    yield refusal(g, g.node("Div", [scalar(g, "one", 1.0), g.x], name="bad_div"), "bad_div", "Div")
    g = Graph("refuse_sub_activations", 13)
    y = g.node("Sub", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1]), conv(g, g.x, 3, 8, kernel=1)], name="bad_sub")
    yield refusal(g, y, "bad_sub", "Sub")
    # Pad in reflect mode, and Pad of the channels.
    g = Graph("refuse_pad_reflect", 13)
    y = g.node("Pad", [g.x, ints(g, "pads", [0, 0, 1, 1, 0, 0, 1, 1])], name="bad_pad", mode="reflect")
    yield refusal(g, y, "bad_pad", "Pad")
    g = Graph("refuse_pad_channels", 13)
    y = g.node("Pad", [g.x, ints(g, "pads", [0, 1, 0, 0, 0, 0, 0, 0])], name="bad_pad")
    yield refusal(g, y, "bad_pad", "Pad")
    # An op the importer does not know: LRN.
    g = Graph("refuse_lrn", 13)
    y = g.node("LRN", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1])], name="bad_lrn", size=3)
    yield refusal(g, y, "bad_lrn", "LRN")
    # Resize by a scale that is not a whole number, 1.5.
    g = Graph("refuse_resize_scale_1_5", 13)
    y = g.node("Resize", [g.x, "", g.const("scales", [1.0, 1.0, 1.5, 1.5])], name="bad_resize",
               mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    yield refusal(g, y, "bad_resize", "Resize")
    # Concat along the height.
    g = Graph("refuse_concat_axis2", 13)
    y = g.node("Concat", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1]), conv(g, g.x, 3, 8, kernel=1)],
               name="bad_concat", axis=2)
    yield refusal(g, y, "bad_concat", "Concat")
    # A conv whose weight another node computes, from the input: W * mean(x).
    # (A batch of 8 pooled to 3x3: the weight [8, 3, 3, 3] is computed from the image by layers
    # the importer reads, so the Conv is what it refuses.)
    g = Graph("refuse_conv_computed_weight", 13, batch=8)
    weight = g.node("MaxPool", [g.x], kernel_shape=[5, 5], strides=[5, 5])
    y = g.node("Conv", [g.x, weight], name="bad_conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    yield refusal(g, y, "bad_conv", "Conv")
    # A Gemm whose second operand is the (flattened) graph input, not a weight.
    g = Graph("refuse_gemm_input_operand", 13)
    flat = g.node("Flatten", [g.x], axis=1)
    yield refusal(g, g.node("Gemm", [flat, flat], name="bad_gemm", transB=1), "bad_gemm", "Gemm")
    # An input whose height is symbolic ("H").
    g = Graph("refuse_symbolic_height", 13, height="H", input_name="bad_input")
    yield refusal(g, g.node("Relu", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1])]), "bad_input", "input")
    # Two graph inputs, added.
    g = Graph("refuse_two_inputs", 13)
    g.inputs.append(helper.make_tensor_value_info("bad_input", TensorProto.FLOAT, ["N", 8, SIZE, SIZE]))
    y = g.node("Add", [conv(g, g.x, 3, 8, pads=[1, 1, 1, 1]), "bad_input"])
    yield refusal(g, y, "bad_input", "input")
    # Control flow: an If (on a constant condition) with a Relu and a Sigmoid branch.
    g = Graph("refuse_if", 13)
    y = conv(g, g.x, 3, 8, pads=[1, 1, 1, 1])
    branches = {}
    for branch, op in (("then", "Relu"), ("else", "Sigmoid")):
        node = helper.make_node(op, [y], [f"{branch}_out"], name=f"{branch}_{op.lower()}")
        output = helper.make_tensor_value_info(f"{branch}_out", TensorProto.FLOAT, ["N", 8, SIZE, SIZE])
        branches[f"{branch}_branch"] = helper.make_graph([node], f"{branch}_branch", [], [output])
    condition = g.const("condition", np.array(True))
    yield refusal(g, g.node("If", [condition], name="bad_if", **branches), "bad_if", "If")


# Models whose op the onnx checker calls deprecated (and refuses) though onnxruntime runs them.
DEPRECATED = {"groupnorm_opset18"}  # GroupNormalization-18, deprecated by GroupNormalization-21


def write(model, path):
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as error:
        if model.graph.name not in DEPRECATED or "is deprecated" not in str(error):
            sys.exit(f"make_onnx_import_models: {model.graph.name}: {error}")
    onnx.save(model, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the folder to write the models into")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    written = set()

    def save(name, model):
        if name in written:
            sys.exit(f"make_onnx_import_models: two models named {name}")
        written.add(name)
        write(model, os.path.join(args.out, f"{name}.onnx"))
        return f"{name}.onnx"

    accepted = [save(name, model) for family in ACCEPTED for name, model in family()]
    refusals = [f"{save(name, model)}\t{offender}\t{kind}" for name, model, offender, kind in refused_models()]
    sized = [f"{save(name, model)}\t{size}" for name, model, size in sized_models()]
    for file, lines in (("models.txt", accepted), ("refusals.tsv", refusals), ("sized.tsv", sized)):
        with open(os.path.join(args.out, file), "w") as f:
            f.write("".join(f"{line}\n" for line in lines))
    print(f"make_onnx_import_models: {len(accepted)} models to accept, {len(refusals)} to refuse, in {args.out}")


if __name__ == "__main__":
    main()
