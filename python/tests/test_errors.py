"""Bad input from Python: a clear exception of the right kind naming what was wrong, never a crash."""

import numpy as np
import pytest

import cnnengine
from cnnengine import layers
from conftest import tiny_network


def test_error_kinds_derive_from_pythons():
    assert issubclass(cnnengine.ConfigError, ValueError) and issubclass(cnnengine.ShapeError, ValueError)
    assert issubclass(cnnengine.DataError, ValueError) and issubclass(cnnengine.BudgetTooSmall, MemoryError)
    assert issubclass(cnnengine.BudgetTooSmall, cnnengine.OutOfMemory) and issubclass(cnnengine.OutOfMemory,
                                                                                      cnnengine.Error)


@pytest.mark.parametrize("images, message", [
    (np.zeros((4, 1, 8, 8), np.float64), "float64 values"),
    (np.zeros((4, 1, 8, 16), np.uint8)[:, :, :, ::2], "C order"),
    (np.zeros((4, 1, 8, 9), np.uint8), "the network takes 1x8x8"),
    (np.zeros((4, 8, 8, 1), np.uint8), "channels_last"),
    (np.zeros((4, 64), np.uint8), "give \\(N, C, H, W\\)"),
    (np.zeros((0, 1, 8, 8), np.uint8), "no samples"),
])
def test_bad_images_are_refused_clearly(model, images, message):
    with pytest.raises(ValueError, match=message):
        model.fit(images, np.zeros(len(images), np.int64), verbose=0)


@pytest.mark.parametrize("labels, error, message", [
    (np.array([0, 1, 2, 3]), cnnengine.DataError, r"y\[3\] is 3, not a class"),
    (np.array([0, 1, -1, 0]), cnnengine.DataError, r"y\[2\] is -1"),
    (np.array([0.0, 1.0, 2.0, 0.0]), cnnengine.DataError, "integers"),
    (np.eye(3)[[0, 1, 2, 0]], cnnengine.ShapeError, "one-hot"),
    (np.array([0, 1, 2]), cnnengine.ShapeError, "for 4 images"),
])
def test_bad_labels_are_refused_clearly(model, labels, error, message):
    with pytest.raises(error, match=message):
        model.fit(np.zeros((4, 1, 8, 8), np.uint8), labels, verbose=0)


def test_a_nan_image_is_named(model):
    x = np.zeros((32, 1, 8, 8), np.float32)
    x[17, 0, 3, 3] = np.nan
    with pytest.raises(cnnengine.DataError, match=r"x\[17\]"):
        model.fit(x, np.zeros(32, np.int64), batch_size=8, verbose=0)


def test_bad_options_name_themselves():
    with pytest.raises(cnnengine.ConfigError, match="unknown option 'learning_rte'"):
        cnnengine.Model(tiny_network(), learning_rte=0.1)
    with pytest.raises(cnnengine.ConfigError, match="optimizer"):
        cnnengine.Model(tiny_network(), optimizer="adam")
    with pytest.raises(cnnengine.ConfigError, match="learning rate"):
        cnnengine.Model(tiny_network(), lr=-1.0)
    with pytest.raises(cnnengine.ConfigError, match="seed"):
        cnnengine.Model(tiny_network(), seed="one")
    with pytest.raises(cnnengine.ConfigError, match="memory"):
        cnnengine.Model(tiny_network(), memory_budget="lots")
    model = cnnengine.Model(tiny_network(), device="cpu")
    x, y = np.zeros((8, 1, 8, 8), np.uint8), np.zeros(8, np.int64)
    with pytest.raises(cnnengine.ConfigError, match="unknown option 'epoch'"):
        model.fit(x, y, epoch=2)
    with pytest.raises(cnnengine.ConfigError, match="validation_split"):
        model.fit(x, y, validation_split=1.5, verbose=0)
    with pytest.raises(ValueError, match="batch_size"):
        model.predict(x, batch_size=0)
    with pytest.raises(ValueError, match="data_format"):
        model.fit(x, y, data_format="nhwc")


def test_a_budget_too_small_is_a_memory_error(data):
    x, y = data
    model = cnnengine.Model(cnnengine.preset("small", (1, 28, 28), 10), device="cpu", memory_budget=64 << 10)
    with pytest.raises(MemoryError, match="budget"):
        model.fit(np.zeros((8, 1, 28, 28), np.uint8), np.zeros(8, np.int64), verbose=0)
    assert model.plan(64)["fits"] is False


def test_networks_refuse_what_does_not_fit():
    with pytest.raises(cnnengine.ShapeError, match="input_shape"):
        cnnengine.Network((1, 0, 8))
    with pytest.raises(cnnengine.ShapeError, match="input_shape"):
        cnnengine.Network((1, 8))
    network = cnnengine.Network((1, 8, 8))
    with pytest.raises(cnnengine.ShapeError):
        network.add(layers.conv2d(4, 9))
    layer = layers.relu()
    network.add(layer)
    with pytest.raises(cnnengine.ConfigError, match="in a network already"):
        network.add(layer)
    with pytest.raises(cnnengine.ConfigError):
        layers.dropout(1.5)
    with pytest.raises(cnnengine.ConfigError, match="preset"):
        cnnengine.preset("resnet9000", (3, 32, 32), 10)
    with pytest.raises(cnnengine.ShapeError, match="no layers"):
        cnnengine.Model(cnnengine.Network((1, 8, 8)))
    with pytest.raises(cnnengine.ConfigError):
        cnnengine.Network.from_text("conv 4 3\nwhatever 2\n", (1, 8, 8))
    with pytest.raises(cnnengine.CheckpointError):
        cnnengine.load("/nonexistent/model.cnn")


def test_the_model_keeps_its_own_network(model, data):
    x, y = data
    before = model.network.text()
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert model.network.text() == before  # the engine's rewrites are its copies'
    copy = model.network
    copy.add(layers.relu())
    assert len(model.network) == len(copy) - 1
    assert model.predict(x).shape == (len(x), 3)


def test_predict_refuses_samples_of_another_shape(model, tmp_path):
    from test_train import write_idx_folder
    x, y = np.zeros((20, 1, 4, 4), np.uint8), np.arange(20) % 3
    write_idx_folder(tmp_path / "small", x[:16], y[:16], x[16:], y[16:])
    with pytest.raises(cnnengine.ShapeError, match="1x4x4.*takes"):
        model.predict(cnnengine.open_dataset(tmp_path / "small").test)


def test_a_diverged_fit_leaves_the_weights_as_they_were(data):
    x, y = data
    model = cnnengine.Model(tiny_network(), device="cpu", threads=1, optimizer="sgd", lr=1e9)
    before = model.predict(x)
    with pytest.raises(cnnengine.TrainingDiverged, match="weights from before this fit"):
        model.fit(x, y, batch_size=16, epochs=3, verbose=0)
    np.testing.assert_array_equal(model.predict(x), before)


def test_more_bad_input_is_refused_clearly(model, data, tmp_path):
    x, y = data
    with pytest.raises(ValueError, match="epochs"):
        model.fit(x, y, epochs=None)
    with pytest.raises(ValueError, match="batch_size"):
        model.fit(x, y, batch_size=True)
    with pytest.raises(ValueError, match="verbose"):
        model.fit(x, y, verbose=3)
    with pytest.raises(TypeError, match="None"):
        model.fit(None)
    with pytest.raises(TypeError, match="callbacks\\[0\\]"):
        model.fit(x, y, verbose=0, callbacks=[object()])
    with pytest.raises(ValueError, match="validation_data"):
        model.fit(x, y, verbose=0, validation_data=x)
    with pytest.raises(cnnengine.ConfigError, match="memory_budget"):
        cnnengine.Model(tiny_network(), memory_budget=True)
    with pytest.raises(TypeError, match="cnnengine.Network"):
        cnnengine.Model("small")
    with pytest.raises(ValueError, match="NUL"):
        model.save(str(tmp_path / "a.cnn") + "\0b")
    with pytest.raises(cnnengine.DataError, match="not a class"):
        model.fit(x[:2], np.array([2**63, 0], np.uint64), verbose=0)
    with pytest.raises(cnnengine.ConfigError) as refused:
        model.fit(x, y, verbose=0, crop_padding=-1)
    assert "loading." not in str(refused.value) and "crop_padding" in str(refused.value)
    with pytest.raises(cnnengine.ConfigError) as refused:
        model.fit(x, y, verbose=0, metrics=tmp_path, overwrite=False)
    assert "FitOptions::" not in str(refused.value) and "metrics" in str(refused.value)


def test_a_corrupt_file_is_a_checkpoint_error_whatever_its_bytes(tmp_path, model):
    path = tmp_path / "model.cnn"
    model.save(path)
    data = bytearray(path.read_bytes())
    for position in range(28, min(len(data), 480), 9):
        flipped = bytearray(data)
        flipped[position] ^= 0xC3
        bad = tmp_path / "bad.cnn"
        bad.write_bytes(bytes(flipped))
        with pytest.raises(cnnengine.CheckpointError):
            cnnengine.load(bad, device="cpu")
