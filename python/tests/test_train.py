"""fit, evaluate and predict on each task, from arrays in either layout and from a data folder."""

import threading

import numpy as np
import pytest

import cnnengine
from cnnengine import layers
from conftest import labelled_images, tiny_network


def test_fit_learns_and_returns_keras_history(model, data):
    x, y = data
    history = model.fit(x, y, batch_size=16, epochs=3, validation_split=0.25, verbose=0)
    assert {"accuracy", "learning_rate", "loss", "val_accuracy", "val_loss"} <= set(history.history)
    assert len(history.history["loss"]) == 3 and history.epoch == [0, 1, 2]
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert model.history is history
    result = model.evaluate(x, y)
    assert result["samples"] == len(x) and result["accuracy"] > 0.5
    probabilities = model.predict(x[:7])
    assert probabilities.shape == (7, 3) and probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, rtol=1e-5)
    logits = model.predict(x[:7], output="logits")
    assert np.array_equal(logits.argmax(axis=1), probabilities.argmax(axis=1))


def test_channels_last_float_is_the_same_data(data):
    x, y = data
    results = []
    for images, layout in ((x, "channels_first"), (np.ascontiguousarray(x.transpose(0, 2, 3, 1)).astype(np.float32) / 255,
                                                   "channels_last")):
        model = cnnengine.Model(tiny_network(), device="cpu", threads=1, lr=0.01)
        history = model.fit(images, y, batch_size=16, epochs=1, verbose=0, data_format=layout)
        results.append((history.history["loss"], model.predict(images, data_format=layout)))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-4, atol=1e-6)


def test_greyscale_without_channel_axis(model, data):
    x, y = data
    model.fit(x[:, 0], y, batch_size=16, epochs=1, verbose=0)
    assert model.predict(x[:3, 0]).shape == (3, 3)


def test_a_second_fit_goes_on_from_the_first(data):
    x, y = data
    once = cnnengine.Model(tiny_network(), device="cpu", threads=1, lr=0.01)
    both = once.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False).history["loss"]
    twice = cnnengine.Model(tiny_network(), device="cpu", threads=1, lr=0.01)
    first = twice.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False).history["loss"]
    second = twice.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False).history["loss"]
    # The weights, AdamW's moments and its step count carried over: the same run, to the bit.
    assert first + second == both
    assert twice._session.steps == once._session.steps == 12


def test_segmentation_multilabel_and_regression():
    rng = np.random.default_rng(1)
    x = rng.random((24, 1, 16, 16), dtype=np.float32)
    masks = (x[:, 0] > 0.5).astype(np.uint8)
    masks[:, 0, 0] = 255  # a pixel of no class
    unet = cnnengine.Model(cnnengine.preset("unet:depth=2,width=4", (1, 16, 16), 2), task="segment", device="cpu",
                           threads=1, lr=0.01)
    history = unet.fit(x, masks, batch_size=8, epochs=2, verbose=0)
    assert "loss" in history.history
    result = unet.evaluate(x, masks)
    assert {"loss", "accuracy", "pixel_accuracy", "mean_iou"} <= set(result)
    assert unet.predict(x[:2]).shape == (2, 2, 16, 16)

    def head(outputs):
        network = cnnengine.Network((1, 16, 16))
        for layer in (layers.conv2d(4, 3, stride=2, padding=1), layers.relu(), layers.global_avg_pool2d(),
                      layers.flatten(), layers.dense(outputs)):
            network.add(layer)
        return network

    labels = (rng.random((24, 3)) > 0.5).astype(np.float32)
    multilabel = cnnengine.Model(head(3), task="multilabel", device="cpu", threads=1)
    multilabel.fit(x, labels, batch_size=8, epochs=1, verbose=0)
    predictions = multilabel.predict(x[:4])
    assert predictions.shape == (4, 3) and ((predictions > 0) & (predictions < 1)).all()
    assert "mean_f1" in multilabel.evaluate(x, labels)

    targets = x.mean(axis=(1, 2, 3))
    regression = cnnengine.Model(head(1), task="regress", device="cpu", threads=1, loss="huber")
    regression.fit(x, targets, batch_size=8, epochs=1, verbose=0)
    assert {"mae", "rmse"} <= set(regression.evaluate(x, targets))


def test_the_gil_is_released_while_training(data):
    x, y = data
    x, y = np.concatenate([x] * 20), np.concatenate([y] * 20)
    model = cnnengine.Model(tiny_network(), device="cpu", threads=1)
    counted = [0]
    done = threading.Event()

    def count():
        while not done.is_set():
            counted[0] += 1

    thread = threading.Thread(target=count)
    thread.start()
    try:
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    finally:
        done.set()
        thread.join()
    assert counted[0] > 1000


def test_a_data_folder_and_open_dataset(tmp_path):
    folder = tmp_path / "shapes"
    x, y = labelled_images(n=60, side=8)
    write_idx_folder(folder, x[:48], y[:48], x[48:], y[48:])
    model = cnnengine.Model(tiny_network(), device="cpu", threads=1, lr=0.01)
    history = model.fit(str(folder), batch_size=16, epochs=1, verbose=0)
    assert len(history.history["loss"]) == 1
    opened = cnnengine.open_dataset(folder)
    assert opened.kind == "idx" and len(opened.train) == 48 and len(opened.test) == 12
    assert model.evaluate(opened.test)["samples"] == 12
    assert model.evaluate(folder) == model.evaluate(opened.test)  # a folder's test side
    assert model.predict(str(folder)).shape == (12, 3)
    model.fit(opened, batch_size=16, epochs=1, verbose=0)


def write_idx_folder(folder, x_train, y_train, x_test, y_test):
    """Images and labels as IDX files (uncompressed), the layout train_images --data reads."""
    folder.mkdir(parents=True)

    def write(name, array):
        header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
        (folder / name).write_bytes(header + array.astype(np.uint8).tobytes())

    write("train-images-idx3-ubyte", x_train[:, 0])
    write("train-labels-idx1-ubyte", y_train)
    write("t10k-images-idx3-ubyte", x_test[:, 0])
    write("t10k-labels-idx1-ubyte", y_test)


def test_photo_augmentations_the_same_on_any_loader_threads():
    x, y = labelled_images(channels=3)
    losses = []
    for threads in (1, 2):
        model = cnnengine.Model(tiny_network(channels=3), device="cpu", threads=1, lr=0.01)
        history = model.fit(x, y, batch_size=16, epochs=1, verbose=0, flip=True, random_resized_crop=True,
                            color_jitter=0.4, random_erasing=0.5, loader_threads=threads)
        losses.append(history.history["loss"])
    assert losses[0] == losses[1]
    plain = cnnengine.Model(tiny_network(channels=3), device="cpu", threads=1, lr=0.01)
    assert plain.fit(x, y, batch_size=16, epochs=1, verbose=0).history["loss"] != losses[0]
