"""The engine's errors as Python exceptions.

Every error the engine raises is a :class:`cnnengine.Error`; each kind also derives from the
built-in exception a Python program expects, so that ``except ValueError`` or ``except
MemoryError`` catch what they should. The message is the engine's: it names what was wrong
(the option, the layer, the file, the bytes).
"""


class Error(Exception):
    """Any error a user of cnnengine can cause."""


class ConfigError(Error, ValueError):
    """An option out of range or in conflict, a call that breaks its contract."""


class ShapeError(Error, ValueError):
    """A layer that does not fit its input; a network that does not fit the data."""


class DataError(Error, ValueError):
    """Data that is missing, truncated, corrupt or out of range (a label outside the classes)."""


class CheckpointError(Error, ValueError):
    """A checkpoint that cannot be written, or read back as this network's."""


class DeviceError(Error, RuntimeError):
    """No usable device; a CUDA, cuDNN or cuBLAS call that failed."""


class TrainingDiverged(Error, ArithmeticError):
    """A step's loss was not finite; nothing of that step was applied."""


class OutOfMemory(Error, MemoryError):
    """The memory budget (or the device) refused an allocation; the message holds the byte table."""


class BudgetTooSmall(OutOfMemory):
    """The budget cannot hold even one sample's step: the message says how much it needs."""


_BY_KIND = {
    "Error": Error,
    "ConfigError": ConfigError,
    "ShapeError": ShapeError,
    "DataError": DataError,
    "CheckpointError": CheckpointError,
    "DeviceError": DeviceError,
    "TrainingDiverged": TrainingDiverged,
    "OutOfMemory": OutOfMemory,
    "BudgetTooSmall": BudgetTooSmall,
}
