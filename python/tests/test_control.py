"""Callbacks steering a run, Ctrl-C, save, load and resume to the same bits, and the plan."""

import json
import os
import signal
import subprocess

import numpy as np
import pytest

import cnnengine
from conftest import labelled_images, tiny_network
from test_train import write_idx_folder


class Recorder(cnnengine.Callback):
    def __init__(self, stop_at=None, rate_at=None):
        self.events, self.rates = [], []
        self.stop_at, self.rate_at = stop_at, rate_at

    def on_train_begin(self, logs=None):
        self.events.append("train_begin")

    def on_epoch_begin(self, epoch, logs=None):
        self.events.append(f"epoch_begin {epoch}")

    def on_batch_end(self, step, logs=None):
        self.rates.append(logs["learning_rate"])
        if step == self.rate_at:
            self.model.learning_rate = 0.002
        if step == self.stop_at:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self.events.append(f"epoch_end {epoch} {sorted(logs)[:2]}")

    def on_train_end(self, logs=None):
        self.events.append("train_end")


def test_callbacks_see_the_run_and_steer_it(model, data):
    x, y = data
    recorder = Recorder(stop_at=9, rate_at=3)
    history = model.fit(x, y, batch_size=16, epochs=5, callbacks=[recorder], verbose=0)
    assert recorder.model is model
    assert recorder.events[:2] == ["train_begin", "epoch_begin 0"]
    assert recorder.events[-1] == "train_end"
    # The rate set after step 3 is step 4's; the stop after step 9 ends the run there.
    assert recorder.rates[:3] == [pytest.approx(0.01)] * 3 and recorder.rates[3:] == [pytest.approx(0.002)] * 6
    assert model._session.steps == 9 and "stop_training" in history.stopped_because
    assert model.learning_rate == pytest.approx(0.002)


def test_a_callback_error_stops_the_run_and_is_raised(model, data):
    x, y = data

    class Failing(cnnengine.Callback):
        def on_batch_end(self, step, logs=None):
            if step == 2:
                raise RuntimeError("the callback's own error")

    with pytest.raises(RuntimeError, match="the callback's own error"):
        model.fit(x, y, batch_size=16, epochs=3, callbacks=[Failing()], verbose=0)
    assert model._session.steps == 2


def test_lambda_callback_and_scheduler(model, data):
    x, y = data
    seen = []
    model.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[
        cnnengine.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(logs["learning_rate"])),
        cnnengine.LearningRateScheduler(lambda epoch, rate: 0.01 / (epoch + 1)),
    ])
    assert seen == [pytest.approx(0.01), pytest.approx(0.005), pytest.approx(0.01 / 3)]


def test_ctrl_c_stops_at_a_step_saves_and_raises(tmp_path, data):
    x, y = data
    checkpoint = tmp_path / "run.ckpt"

    class Interrupt(cnnengine.Callback):
        def on_batch_end(self, step, logs=None):
            if step == 4:
                os.kill(os.getpid(), signal.SIGINT)

    model = cnnengine.Model(tiny_network(), device="cpu", threads=1)
    with pytest.raises(KeyboardInterrupt, match="step 4"):
        model.fit(x, y, batch_size=16, epochs=3, callbacks=[Interrupt()], verbose=0, checkpoint=checkpoint)
    assert checkpoint.exists()
    # Python's own handler is back: a later Ctrl-C is a KeyboardInterrupt again.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    resumed = cnnengine.Model(tiny_network(), device="cpu", threads=1)
    history = resumed.fit(x, y, batch_size=16, epochs=3, verbose=0, resume=checkpoint)
    straight = cnnengine.Model(tiny_network(), device="cpu", threads=1)
    assert history.history["loss"] == straight.fit(x, y, batch_size=16, epochs=3, verbose=0).history["loss"]


SIGTERM_RUN = '''
import os, signal, sys
import numpy as np
import cnnengine
sys.path.insert(0, sys.argv[2])
from conftest import labelled_images, tiny_network

class Terminate(cnnengine.Callback):
    def on_batch_end(self, step, logs=None):
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)

x, y = labelled_images()
model = cnnengine.Model(tiny_network(), device="cpu", threads=1)
model.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[Terminate()], checkpoint=sys.argv[1])
print("still running after SIGTERM")
'''


def test_sigterm_saves_then_ends_the_process(tmp_path):
    import sys
    checkpoint = tmp_path / "run.ckpt"
    done = subprocess.run([sys.executable, "-c", SIGTERM_RUN, str(checkpoint), os.path.dirname(__file__)],
                          capture_output=True, text=True)
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert "still running" not in done.stdout and checkpoint.exists()


def test_resume_gives_the_same_bits_as_one_run(tmp_path, data):
    x, y = data
    checkpoint = tmp_path / "run.ckpt"
    first = cnnengine.Model(tiny_network(), device="cpu", threads=1)
    first.fit(x, y, batch_size=16, epochs=1, verbose=0, checkpoint=checkpoint)
    resumed = cnnengine.Model(tiny_network(), device="cpu", threads=1)
    history = resumed.fit(x, y, batch_size=16, epochs=3, verbose=0, resume=checkpoint)
    straight = cnnengine.Model(tiny_network(), device="cpu", threads=1)
    assert history.history["loss"] == straight.fit(x, y, batch_size=16, epochs=3, verbose=0).history["loss"]
    np.testing.assert_array_equal(resumed.predict(x), straight.predict(x))


def test_save_and_load(tmp_path, model, data):
    x, y = data
    model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    path = tmp_path / "model.cnn"
    model.save(path)
    loaded = cnnengine.load(path, device="cpu")
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    assert loaded.evaluate(x, y) == model.evaluate(x, y)
    text = tmp_path / "notes.txt"
    text.write_text("mine")
    with pytest.raises(cnnengine.ConfigError, match="notes.txt.*overwrite=True"):
        model.save(text)
    with pytest.raises(cnnengine.ConfigError, match="notes.txt.*overwrite=True"):
        model.export_onnx(text)
    assert text.read_text() == "mine"
    corrupt = tmp_path / "corrupt.cnn"
    corrupt.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(cnnengine.CheckpointError, match="corrupt.cnn"):
        cnnengine.load(corrupt)


def test_same_bits_as_train_images(tmp_path):
    program = os.environ.get("CNN_TRAIN_IMAGES")
    if not program:
        pytest.skip("CNN_TRAIN_IMAGES does not name train_images")
    x, y = labelled_images(n=80, side=8)
    folder = tmp_path / "data"
    write_idx_folder(folder, x[:64], y[:64], x[64:], y[64:])
    network_file = tmp_path / "tiny.txt"
    network_file.write_text(tiny_network().text())
    cli_metrics = tmp_path / "cli.jsonl"
    subprocess.run([program, "--data", str(folder), "--model", str(network_file), "--epochs", "2", "--batch", "16",
                    "--schedule", "constant", "--lr", "0.01", "--threads", "1", "--metrics-out", str(cli_metrics),
                    "--device", "cpu"], check=True, capture_output=True)
    model = cnnengine.Model(tiny_network(), device="cpu", threads=1, lr=0.01)
    py_metrics = tmp_path / "py.jsonl"
    model.fit(folder, batch_size=16, epochs=2, verbose=0, metrics=py_metrics)

    def losses(path):
        return [line["loss"] for line in map(json.loads, path.read_text().splitlines()) if line.get("type") == "step"]

    assert losses(cli_metrics) and losses(py_metrics) == losses(cli_metrics)


def test_plan_under_a_budget():
    model = cnnengine.Model(cnnengine.preset("small", (1, 28, 28), 10), device="cpu", memory_budget="12MiB")
    plan = model.plan(256)
    assert plan["budget"] == 12 << 20 and plan["fits"]
    assert 0 < plan["micro_batch"] < 256 and plan["accumulation_steps"] == -(-256 // plan["micro_batch"])
    assert plan["bytes"]["total"] <= plan["budget"] and plan["bytes"]["parameters"] >= 421642 * 4
    assert "step arena" in plan["table"]
    unbounded = cnnengine.Model(cnnengine.preset("small", (1, 28, 28), 10), device="cpu").plan(64)
    assert unbounded["budget"] is None and unbounded["micro_batch"] == 64 and unbounded["accumulation_steps"] == 1


def test_a_callback_may_predict_and_save_but_not_fit(tmp_path, data):
    x, y = data
    model = cnnengine.Model(tiny_network(), device="cpu", threads=1, lr=0.01)
    seen, refusals = [], []

    class Watch(cnnengine.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(self.model.predict(x[:8]))
            self.model.save(tmp_path / f"epoch{epoch}.cnn")
            try:
                self.model.fit(x, y, epochs=1, verbose=0)
            except cnnengine.ConfigError as error:
                refusals.append(str(error))

    model.fit(x, y, batch_size=16, epochs=2, callbacks=[Watch()], verbose=0)
    # Each epoch's predictions are that epoch's weights: the last are the model's at the end.
    assert not np.array_equal(seen[0], seen[1])
    np.testing.assert_array_equal(seen[1], model.predict(x[:8]))
    np.testing.assert_array_equal(cnnengine.load(tmp_path / "epoch1.cnn").predict(x[:8]), seen[1])
    assert len(refusals) == 2 and "training already" in refusals[0]


def test_another_thread_waits_for_the_model(data):
    import threading
    x, y = data
    model = cnnengine.Model(tiny_network(), device="cpu", threads=1)
    outputs = []
    started = threading.Event()

    class Slow(cnnengine.Callback):
        def on_train_begin(self, logs=None):
            started.set()

    thread = threading.Thread(target=lambda: (started.wait(), outputs.append(model.predict(x[:4]))))
    thread.start()
    model.fit(np.concatenate([x] * 10), np.concatenate([y] * 10), batch_size=16, epochs=1, verbose=0,
              callbacks=[Slow()])
    thread.join()
    np.testing.assert_array_equal(outputs[0], model.predict(x[:4]))


def test_export_onnx_and_load_it_back(tmp_path, model, data):
    x, y = data
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    path = tmp_path / "model.onnx"
    try:
        model.export_onnx(path)
    except cnnengine.ConfigError as error:
        if "ONNX" in str(error) and not path.exists():
            pytest.skip(f"this build has no ONNX: {error}")
        raise
    imported = cnnengine.load(path, device="cpu")
    np.testing.assert_allclose(imported.predict(x), model.predict(x), rtol=1e-5, atol=1e-6)


def test_plan_counts_the_loader_as_fit_does(data):
    x = np.zeros((64, 1, 28, 28), np.uint8)
    y = np.zeros(64, np.int64)
    for budget in ("48KiB", "300KiB", "2MiB"):
        model = cnnengine.Model(cnnengine.preset("small", (1, 28, 28), 10), device="cpu", memory_budget=budget)
        plan = model.plan(64)
        try:
            model.fit(x, y, batch_size=64, epochs=1, verbose=0)
            fitted = True
        except MemoryError:
            fitted = False
        assert plan["fits"] == fitted, (budget, plan["table"])
        if fitted:  # evaluation stages fewer samples at once where its batch would not fit
            assert model.evaluate(x, y, batch_size=256)["samples"] == 64


def test_load_takes_the_options_a_saved_model_may_change(tmp_path, model, data):
    x, y = data
    path = tmp_path / "model.cnn"
    model.save(path)
    loaded = cnnengine.load(path, device="cpu", class_names=["low", "middle", "high"], label_smoothing=0.1)
    assert loaded.class_names == ["low", "middle", "high"]
    with pytest.raises(cnnengine.ConfigError, match="class_names"):
        cnnengine.load(path, device="cpu", class_names=["one"])
    with pytest.raises(cnnengine.ConfigError, match="task"):
        cnnengine.load(path, device="cpu", task="regress")


def test_the_engines_lines_go_to_pythons_stdout(model, data):
    import contextlib
    import io
    x, y = data
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        model.fit(x, y, batch_size=16, epochs=2, verbose=2)
    assert "epoch 1/2" in captured.getvalue() and "epoch 2/2" in captured.getvalue()


def test_fits_overlapping_in_threads_give_ctrl_c_back(data):
    import threading
    x, y = data
    x, y = np.concatenate([x] * 4), np.concatenate([y] * 4)
    models = [cnnengine.Model(tiny_network(), device="cpu", threads=1) for _ in range(2)]
    threads = [threading.Thread(target=m.fit, args=(x, y), kwargs={"epochs": 2 + i, "verbose": 0})
               for i, m in enumerate(models)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        import time
        time.sleep(1)


def test_validation_data_of_a_folder_is_its_validation_or_test_side(tmp_path, model):
    x, y = labelled_images(n=60)
    write_idx_folder(tmp_path / "data", x[:48], y[:48], x[48:], y[48:])
    history = model.fit(x[:48], y[:48], batch_size=16, epochs=1, verbose=0, validation_data=tmp_path / "data")
    assert history.history["val_loss"][0] == pytest.approx(model.evaluate(x[48:], y[48:])["loss"], rel=1e-6)


def test_freeze_the_backbone(model, data):
    x, y = data
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    model.freeze("backbone")
    assert model.network.frozen_through == model.network.head - 1
    conv_before = model.predict(x, output="logits")
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert not np.array_equal(conv_before, model.predict(x, output="logits"))
    model.freeze(0)
    assert model.network.frozen_through == 0
