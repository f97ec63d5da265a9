"""cnnengine.Model: a network on a device with its weights, trained and used Keras's way."""

import os
import signal
import threading
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from . import _cnnengine
from ._data import DataFolder, array_data, open_dataset
from .callbacks import History

_IMAGENET_MEAN = [0.485, 0.456, 0.406]
_IMAGENET_STD = [0.229, 0.224, 0.225]


def _normalize_settings(normalize: Any) -> Dict[str, Any]:
    if normalize is None:
        return {}
    if isinstance(normalize, str):
        if normalize != "imagenet":
            raise ValueError(f"normalize={normalize!r}: 'imagenet', or (mean, std) per channel")
        return {"normalize_mean": _IMAGENET_MEAN, "normalize_std": _IMAGENET_STD}
    try:
        mean, std = normalize
    except (TypeError, ValueError):
        raise ValueError("normalize: 'imagenet', or (mean, std), each a number or one a channel") from None
    as_list = lambda v: [float(e) for e in (v if isinstance(v, (list, tuple, np.ndarray)) else [v])]
    return {"normalize_mean": as_list(mean), "normalize_std": as_list(std)}


def _path(value: Any, name: str) -> str:
    """A path given as text or os.PathLike, refused where the system would cut it short."""
    try:
        path = os.fspath(value)
    except TypeError:
        raise TypeError(f"{name}: a path (str or os.PathLike), not {type(value).__name__}") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if "\0" in path:
        raise ValueError(f"{name}: {path!r} holds a NUL character")
    return path


class _Dispatcher:
    """The run's events to the user's callbacks; what they set on the model back to the run.

    A callback's exception stops the run at the step's end (saved where a checkpoint was asked
    for) and is raised again from fit once the engine has let go."""

    def __init__(self, model: "Model", callbacks: Optional[Sequence[Any]]) -> None:
        self.model = model
        self.callbacks = list(callbacks or [])
        self.error: Optional[BaseException] = None
        methods = ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_batch_end")
        for i, callback in enumerate(self.callbacks):
            if not any(hasattr(callback, method) for method in methods):
                raise TypeError(f"callbacks[{i}]: an object with any of {', '.join(methods)} "
                                f"(cnnengine.Callback has them all), not {type(callback).__name__}")
            if hasattr(callback, "set_model"):
                callback.set_model(model)
            else:
                try:
                    callback.model = model
                except AttributeError:
                    raise TypeError(f"callbacks[{i}]: its model cannot be set (self.model): derive it from "
                                    "cnnengine.Callback") from None

    def _call(self, method: str, *args: Any) -> None:
        for callback in self.callbacks:
            function = getattr(callback, method, None)
            if function is not None:
                function(*args)

    def __call__(self, event: str, payload: Any, learning_rate: float) -> Optional[Dict[str, Any]]:
        model = self.model
        model._current_rate = learning_rate
        if self.error is None:
            try:
                if event == "train_begin":
                    self._call("on_train_begin", {})
                elif event == "epoch_begin":
                    self._call("on_epoch_begin", payload, {})
                elif event == "batch_end":
                    step, logs = payload
                    self._call("on_batch_end", step, logs)
                elif event == "epoch_end":
                    epoch, logs = payload
                    self._call("on_epoch_end", epoch, logs)
                elif event == "train_end":
                    self._call("on_train_end", {})
            except BaseException as error:  # noqa: B902 - raised again by fit, KeyboardInterrupt too
                self.error = error
        answer: Dict[str, Any] = {}
        if model._pending_rate is not None:
            answer["learning_rate"] = model._pending_rate
            model._current_rate = model._pending_rate
            model._pending_rate = None
        if self.error is not None:
            answer["stop"] = f"a callback raised {type(self.error).__name__}: {self.error}"
        elif model.stop_training:
            answer["stop"] = "a callback set model.stop_training"
        return answer or None


class Model:
    """A network on a device, with its optimizer and weights.

    ``network`` is a :class:`cnnengine.Network` (the model keeps its own copy). ``device``: "auto"
    (a usable GPU, else the CPU), "cpu" or "cuda". ``precision``: "fp32", "tf32", "bf16" or
    "fp16". ``memory_budget``: bytes or a text such as "2GiB", a hard cap on the training
    memory (the micro-batch is the largest that fits, the batch kept by accumulation); None for
    none. ``optimizer``: "adamw" or "sgd"; ``lr`` its rate, ``weight_decay`` its decay. ``task``:
    "classify", "segment", "multilabel" or "regress".

    Other options: ``threads``, ``seed``, ``micro_batch``, ``accumulate``, ``recompute`` ("none",
    "cheap", "auto"), ``momentum``, ``nesterov``, ``beta_1``, ``beta_2``, ``epsilon``,
    ``schedule`` ("constant", Keras's default; "cosine", "step", "onecycle", "plateau"),
    ``warmup_steps``, ``step_every``, ``gamma``, ``final_fraction``, ``plateau_factor``,
    ``plateau_patience``, ``label_smoothing``, ``class_weights``, ``pos_weights``, ``loss``
    ("mse", "huber"), ``huber_delta``, ``threshold``, ``class_names``, ``normalize`` ("imagenet"
    or (mean, std): applied to every image the model is given, and saved with it). An unknown
    option or a value out of range is a ValueError naming it.
    """

    def __init__(
        self,
        network: Any,
        device: str = "auto",
        precision: str = "fp32",
        memory_budget: Union[int, str, None] = None,
        optimizer: str = "adamw",
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        task: str = "classify",
        **options: Any,
    ) -> None:
        if not isinstance(network, _cnnengine.Network):
            raise TypeError(
                f"network: a cnnengine.Network (cnnengine.preset(name, input_shape, classes) makes one), "
                f"not {type(network).__name__}"
            )
        settings = dict(options)
        settings.update(_normalize_settings(settings.pop("normalize", None)))
        settings.update(
            device=device, precision=precision, memory_budget=memory_budget, optimizer=optimizer, lr=lr,
            weight_decay=weight_decay, task=task,
        )
        self._settings = settings
        self._session = _cnnengine._Session.create(network, settings)
        self._init_state()

    def _init_state(self) -> None:
        # One engine call at a time: another thread waits; a callback (the same thread) may
        # evaluate, predict or save during fit.
        self._lock = threading.RLock()
        self.stop_training = False
        self.history: Optional[History] = None
        self._pending_rate: Optional[float] = None
        self._current_rate: Optional[float] = None

    @classmethod
    def _from_session(cls, session: Any, settings: Dict[str, Any]) -> "Model":
        model = cls.__new__(cls)
        model._settings = settings
        model._session = session
        model._init_state()
        return model

    def _locked(self, call: Any) -> Any:
        with self._lock:
            return call()

    # ---- what the model is

    @property
    def network(self) -> Any:
        """A copy of the model's network: changing it changes nothing of the model (freeze()
        freezes the model's layers)."""
        return self._session.network

    def freeze(self, through: Union[int, str] = "backbone", mode: str = "eval") -> None:
        """Fine-tuning: nodes 1 to ``through`` of the summary stop training (``"backbone"``: every
        node before the head, the last layer with parameters; 0: none, all train again).
        ``mode="eval"`` runs them as inference (BatchNorm on its running statistics, dropout off),
        ``"train"`` as training, with no gradient either way. The optimizer starts afresh at the
        next fit, its parameters being others."""
        if through == "backbone":
            through = self._session.head - 1
        if isinstance(through, bool) or not isinstance(through, int):
            raise TypeError(f"through: a node number or 'backbone', not {through!r}")
        self._locked(lambda: self._session.freeze(through, mode))

    @property
    def device(self) -> str:
        """"cpu" or "cuda": where the model runs."""
        return self._session.device

    @property
    def task(self) -> str:
        return self._session.task

    @property
    def class_names(self) -> List[str]:
        return list(self._session.class_names)

    @property
    def learning_rate(self) -> float:
        """The rate of the next optimizer step. Set it (from a callback, or between fits) to
        change the rate from the next step on; the schedule's shape goes on from it."""
        if self._pending_rate is not None:
            return self._pending_rate
        if self._current_rate is not None:
            return self._current_rate
        return float(self._session.learning_rate)

    @learning_rate.setter
    def learning_rate(self, rate: float) -> None:
        rate = float(rate)
        if not np.isfinite(rate) or rate <= 0:
            raise ValueError(f"learning_rate={rate}: a positive number")
        self._pending_rate = rate

    def count_params(self) -> int:
        """The trainable parameters' count."""
        return int(self._session.parameter_count)

    def summary(self, print_fn: Any = print) -> None:
        """Prints the network, a line a layer, with the device and the parameters' count."""
        print_fn(self._session.summary_text.rstrip("\n"))
        print_fn(f"  device: {self.device} ({self._session.device_reason})")

    # ---- data

    def _open(self, path: Any) -> DataFolder:
        return open_dataset(path, image_shape=self._session.input_shape, task=self.task)

    def _data(self, x: Any, y: Any, data_format: str, name: str, labelled: bool = True, side: str = "train") -> Any:
        if x is None:
            raise TypeError(f"{name}: images (a numpy array), a data folder's path or open_dataset's result, not None")
        if isinstance(x, (str, os.PathLike)):
            x = self._open(x)
        if isinstance(x, DataFolder):
            if y is not None:
                raise ValueError(f"{name} is a data folder, which holds its labels: y must be None")
            data = getattr(x, side)
            if data is None:
                raise ValueError(f"{name}: {x.path} has no {side} side; give one of its sides (.train, .test)")
            return data
        if isinstance(x, _cnnengine._Data):
            return x
        return array_data(
            x, y, self.task, self._session.outputs, self._session.input_shape, data_format, name,
            self._session.class_names, labelled,
        )

    def _validation(self, validation_data: Any, x: Any, data_format: str) -> Any:
        if validation_data is None:
            return x.validation if isinstance(x, DataFolder) else None
        if isinstance(validation_data, (str, os.PathLike)):
            validation_data = self._open(validation_data)
        if isinstance(validation_data, DataFolder):  # its val/ side, or else its test side
            side = "validation" if validation_data.validation is not None else "test"
            return self._data(validation_data, None, data_format, "validation_data", side=side)
        if isinstance(validation_data, _cnnengine._Data):
            return validation_data
        if isinstance(validation_data, np.ndarray) or not isinstance(validation_data, (tuple, list)) \
                or len(validation_data) < 2:
            raise ValueError("validation_data: a tuple (x, y), a data folder's path, or open_dataset's result")
        return self._data(validation_data[0], validation_data[1], data_format, "validation_data[0]")

    # ---- training and use

    def fit(
        self,
        x: Any,
        y: Any = None,
        batch_size: int = 64,
        epochs: int = 1,
        validation_split: float = 0.0,
        validation_data: Any = None,
        callbacks: Optional[Sequence[Any]] = None,
        verbose: int = 1,
        data_format: str = "channels_first",
        **options: Any,
    ) -> History:
        """Trains the model; returns a History whose ``history`` maps loss, accuracy, val_loss,
        val_accuracy, learning_rate, ... to each epoch's value.

        ``x``: images as a numpy array, uint8 (scaled to [0, 1]) or float32, (N, C, H, W) or with
        ``data_format="channels_last"`` (N, H, W, C), read in place (C order); ``y``: a class
        number a sample (classify), a mask a sample (segment: (N, H, W), 255 for none), or
        (N, K) targets (multilabel: 0 or 1; regress). Or ``x`` a data folder's path or
        ``open_dataset``'s result (its val/ side validating, where it has one).

        ``validation_split`` holds out that fraction of the training data (stratified, seeded);
        ``verbose``: 0 silent, 1 a progress bar and a line an epoch, 2 the lines alone.

        Other options: ``checkpoint`` (a path: the run's checkpoint, written at each epoch's end
        and when stopped), ``save_every`` (steps), ``resume`` (a checkpoint to continue from,
        to the same bits), ``load`` (weights to start from; ``new_head``), ``monitor`` (Keras's
        names: "val_loss", "val_accuracy", "loss", ...), ``patience`` (early stopping),
        ``save_best_only`` (the best epoch's checkpoint beside ``checkpoint``),
        ``restore_best_weights``, ``unfreeze_at``, ``warmup_epochs``, ``step_every_epochs``,
        ``shuffle``, ``flip``, ``crop_padding``, ``random_resized_crop`` (torchvision's, scale
        0.08 to 1, from the image as its file stores it), ``color_jitter`` (brightness, contrast
        and saturation factors from [1 - F, 1 + F]), ``random_erasing`` (a probability),
        ``loader_threads``, ``prefetch``, ``metrics``, ``csv``, ``tensorboard`` (paths),
        ``overwrite``, ``limit``.

        A second fit goes on from the weights, the optimizer's state and its step count of the
        first. Ctrl-C stops at the step's end, saves the checkpoint where one was asked for and
        raises KeyboardInterrupt; SIGTERM stops and saves alike, then takes its own action (the
        process's handler, by default the end of the process).
        """
        if isinstance(x, (str, os.PathLike)):
            x = self._open(x)  # once: its train and val/ sides
        train = self._data(x, y, data_format, "x")
        validation = self._validation(validation_data, x, data_format)
        settings = dict(options)
        for key in ("checkpoint", "resume", "load", "metrics", "csv", "tensorboard"):
            if settings.get(key) is not None:
                settings[key] = _path(settings[key], key)
        settings.update(
            batch_size=batch_size, epochs=epochs, validation_split=validation_split, verbose=verbose
        )
        dispatcher = _Dispatcher(self, callbacks)
        self.stop_training = False
        # Without callbacks nothing in Python needs the run's events: no GIL taken at each step.
        events = dispatcher if dispatcher.callbacks or self._pending_rate is not None else None
        result = self._locked(lambda: self._session.fit(train, validation, settings, events))
        history = History(result["history"], {"epochs": epochs, "batch_size": batch_size, "steps": result["steps"]})
        history.stopped_because = result["stopped_because"]
        history.best_epoch = result["best_epoch"]
        self.history = history
        if dispatcher.error is not None:
            raise dispatcher.error
        if result["signal"] == signal.SIGINT:
            saved = f"; the checkpoint is saved in {settings['checkpoint']}" if settings.get("checkpoint") else ""
            raise KeyboardInterrupt(f"training stopped at step {result['steps']}{saved}")
        if result["signal"]:  # SIGTERM: the run stopped and saved; now the signal's own action
            os.kill(os.getpid(), result["signal"])
        return history

    def evaluate(
        self, x: Any, y: Any = None, batch_size: int = 256, data_format: str = "channels_first", verbose: int = 0
    ) -> Dict[str, float]:
        """The mean loss, the task's accuracy and its scores over (x, y): a dict ({"loss": ...,
        "accuracy": ..., "samples": ...}, with "mean_iou", "mae", ... for the other tasks). A data
        folder (its path, or open_dataset's result) is evaluated on its test side."""
        data = self._data(x, y, data_format, "x", side="test")
        result = dict(self._locked(lambda: self._session.evaluate(data, int(batch_size))))
        if verbose:
            print(" - ".join(f"{k}: {v:.4f}" if isinstance(v, float) else f"{k}: {v}" for k, v in result.items()))
        return result

    def predict(
        self, x: Any, batch_size: int = 256, data_format: str = "channels_first", output: str = "probabilities"
    ) -> np.ndarray:
        """The model's outputs for each image of ``x``: with ``output="probabilities"`` what the
        task makes of them (a classification's softmax, a segmentation's softmax over the classes
        at each pixel, a multi-label's sigmoid, a regression's values), or ``"logits"``. A data
        folder's test side, where ``x`` is one."""
        if output not in ("probabilities", "logits"):
            raise ValueError(f"output={output!r}: 'probabilities' or 'logits'")
        data = self._data(x, None, data_format, "x", labelled=False, side="test")
        return self._locked(lambda: self._session.predict(data, int(batch_size), output == "probabilities"))

    def plan(self, batch_size: int = 64) -> Dict[str, Any]:
        """The memory plan of a training step of ``batch_size`` samples, before anything is
        allocated: the micro-batch that fits the budget, the accumulation steps, the budget,
        the bytes by category (parameters, gradients, optimizer state, arena, ...) and the table
        train_images prints."""
        return dict(self._locked(lambda: self._session.plan(int(batch_size))))

    def save(self, path: "os.PathLike[str] | str", overwrite: bool = False) -> None:
        """Writes the weights, the network and what an image goes through, atomically
        (``cnnengine.load`` reads it). A file there that is not a checkpoint is kept unless
        ``overwrite``. To continue a run to the same bits, use fit's ``checkpoint`` and ``resume``."""
        self._locked(lambda: self._session.save(_path(path, "path"), bool(overwrite)))

    def export_onnx(self, path: "os.PathLike[str] | str", overwrite: bool = False) -> None:
        """Writes the network and its weights as ONNX, for other runtimes (cnnengine.load reads it
        too). A file there that is not an ONNX model is kept unless ``overwrite``."""
        self._locked(lambda: self._session.export_onnx(_path(path, "path"), bool(overwrite)))

    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self._session.input_shape)
        return f"<cnnengine.Model {self.task} on {self.device}, input {shape}, {self.count_params()} parameters>"


def load(path: "os.PathLike[str] | str", device: str = "auto", precision: str = "fp32", **options: Any) -> Model:
    """A model saved by ``Model.save``, a run's checkpoint (``train_images --save``) or an ONNX
    file, with its weights; ``options`` as Model's (the optimizer's for a later fit)."""
    settings = dict(options)
    settings.update(_normalize_settings(settings.pop("normalize", None)))
    settings.update(device=device, precision=precision)
    session = _cnnengine._Session.load(_path(path, "path"), settings)
    return Model._from_session(session, settings)
