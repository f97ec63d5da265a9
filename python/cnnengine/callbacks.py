"""Callbacks, Keras's way: objects with any of the methods below, given the model as ``self.model``.

A callback steers the run through the model: ``self.model.stop_training = True`` ends it at the
step's end (saved as at an epoch's end where a checkpoint was asked for), and
``self.model.learning_rate = r`` sets the rate from the next step on. Early stopping, keeping the
best model and the schedules are options of ``Model.fit`` and ``Model`` (``patience``,
``save_best_only``, ``restore_best_weights``, ``schedule``).
"""

from typing import Any, Callable, Dict, Optional


class Callback:
    """A base class with every method a callback may have; override those you need."""

    model: Any = None

    def set_model(self, model: Any) -> None:
        self.model = model

    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None:
        """Before the first step (or the resumed one)."""

    def on_train_end(self, logs: Optional[Dict[str, float]] = None) -> None:
        """After the last epoch, however the run ended (an exception aside)."""

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        """Before epoch ``epoch`` (from 0) starts."""

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        """After epoch ``epoch`` (from 0): ``logs`` holds loss, accuracy, val_loss, ... as History does."""

    def on_batch_end(self, step: int, logs: Optional[Dict[str, float]] = None) -> None:
        """After optimizer step ``step`` (from 1, counted over the model's fits): its loss, accuracy, rate."""


class LambdaCallback(Callback):
    """A callback from functions: ``LambdaCallback(on_epoch_end=lambda epoch, logs: ...)``."""

    def __init__(
        self,
        on_epoch_begin: Optional[Callable[..., None]] = None,
        on_epoch_end: Optional[Callable[..., None]] = None,
        on_batch_end: Optional[Callable[..., None]] = None,
        on_train_begin: Optional[Callable[..., None]] = None,
        on_train_end: Optional[Callable[..., None]] = None,
    ) -> None:
        for name, function in (
            ("on_epoch_begin", on_epoch_begin),
            ("on_epoch_end", on_epoch_end),
            ("on_batch_end", on_batch_end),
            ("on_train_begin", on_train_begin),
            ("on_train_end", on_train_end),
        ):
            if function is not None:
                setattr(self, name, function)


class LearningRateScheduler(Callback):
    """Keras's: ``schedule(epoch, rate) -> rate`` sets each epoch's rate before it starts."""

    def __init__(self, schedule: Callable[[int, float], float]) -> None:
        self.schedule = schedule

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        self.model.learning_rate = float(self.schedule(epoch, self.model.learning_rate))


class History:
    """What ``Model.fit`` returns: ``history`` maps each metric (Keras's names: loss, accuracy,
    val_loss, val_accuracy, learning_rate, ...) to its value at each epoch."""

    def __init__(self, epochs: list, params: Dict[str, Any]) -> None:
        self.epoch = list(range(len(epochs)))
        self.history: Dict[str, list] = {}
        for logs in epochs:
            for name, value in logs.items():
                self.history.setdefault(name, []).append(value)
        self.params = params

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, metrics={sorted(self.history)})"
