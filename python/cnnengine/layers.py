"""The built-in layers, with PyTorch's definitions: ``network.add(layers.conv2d(32, 3, padding=1))``."""

from ._cnnengine import layers as _built_in

Layer = _built_in.Layer
add, avg_pool2d, batchnorm2d, concat = _built_in.add, _built_in.avg_pool2d, _built_in.batchnorm2d, _built_in.concat
conv2d, conv_transpose2d, dense = _built_in.conv2d, _built_in.conv_transpose2d, _built_in.dense
depthwise_conv2d, dropout, flatten = _built_in.depthwise_conv2d, _built_in.dropout, _built_in.flatten
gelu, global_avg_pool2d, global_max_pool2d = _built_in.gelu, _built_in.global_avg_pool2d, _built_in.global_max_pool2d
group_norm, hardsigmoid, hardswish = _built_in.group_norm, _built_in.hardsigmoid, _built_in.hardswish
layer_norm, leaky_relu, max_pool2d = _built_in.layer_norm, _built_in.leaky_relu, _built_in.max_pool2d
multiply, pad, relu, relu6 = _built_in.multiply, _built_in.pad, _built_in.relu, _built_in.relu6
sigmoid, silu, tanh, upsample = _built_in.sigmoid, _built_in.silu, _built_in.tanh, _built_in.upsample

__all__ = [
    "Layer", "add", "avg_pool2d", "batchnorm2d", "concat", "conv2d", "conv_transpose2d", "dense", "depthwise_conv2d",
    "dropout", "flatten", "gelu", "global_avg_pool2d", "global_max_pool2d", "group_norm", "hardsigmoid", "hardswish",
    "layer_norm", "leaky_relu", "max_pool2d", "multiply", "pad", "relu", "relu6", "sigmoid", "silu", "tanh",
    "upsample",
]
