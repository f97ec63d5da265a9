"""What the package's tests share: small networks and data that train in well under a second."""

import numpy as np
import pytest

import cnnengine
from cnnengine import layers


def tiny_network(channels=1, side=8, classes=3):
    network = cnnengine.Network((channels, side, side))
    network.add(layers.conv2d(4, 3, padding=1))
    network.add(layers.relu())
    network.add(layers.max_pool2d(2))
    network.add(layers.flatten())
    network.add(layers.dense(classes))
    return network


def labelled_images(n=96, channels=1, side=8, classes=3, seed=0):
    """uint8 images whose class is the third of the image that is brightest: learnable at once."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = rng.integers(0, 60, (n, channels, side, side)).astype(np.uint8)
    band = side // classes
    for i, c in enumerate(y):
        x[i, :, c * band:(c + 1) * band, :] += 150
    return x, y.astype(np.int64)


@pytest.fixture
def data():
    return labelled_images()


@pytest.fixture
def model():
    return cnnengine.Model(tiny_network(), device="cpu", threads=1, lr=0.01)
