"""cnnengine from Python: plan every byte before the first step, train under a hard memory budget.

    import cnnengine
    network = cnnengine.preset("small", (1, 28, 28), 10)
    model = cnnengine.Model(network, memory_budget="1GiB")
    history = model.fit(x_train, y_train, batch_size=64, epochs=2, validation_split=0.1)
    print(model.evaluate(x_test, y_test), model.plan(64)["micro_batch"])
"""

from . import _cnnengine, callbacks, errors, layers
from ._cnnengine import Network, preset_names, preset_usages
from ._data import DataFolder, open_dataset
from ._model import Model, load
from .callbacks import Callback, History, LambdaCallback, LearningRateScheduler
from .errors import (
    BudgetTooSmall, CheckpointError, ConfigError, DataError, DeviceError, Error, OutOfMemory, ShapeError,
    TrainingDiverged,
)

_cnnengine._set_error_classes(errors._BY_KIND)



def preset(name: str, input_shape, classes: int) -> Network:
    """A built-in network (preset_names(): small, resnet18, resnet50, mobilenetv2, unet, ...) for
    samples of input_shape (channels, height, width) and ``classes`` outputs; a name may carry
    options ("unet:depth=3,width=16")."""
    return Network.preset(name, list(input_shape), int(classes))


__all__ = [
    "BudgetTooSmall", "Callback", "CheckpointError", "ConfigError", "DataError", "DataFolder", "DeviceError",
    "Error", "History", "LambdaCallback", "LearningRateScheduler", "Model", "Network", "OutOfMemory",
    "ShapeError", "TrainingDiverged", "callbacks", "errors", "layers", "load", "open_dataset", "preset",
    "preset_names", "preset_usages",
]
