"""Turns what a user passes to fit, evaluate and predict into the engine's data sets: numpy
arrays read in place (checked here, with messages that say how to mend them), data folders, or
what ``open_dataset`` returned."""

import os
from typing import Any, List, Optional, Sequence

import numpy as np

from . import _cnnengine
from .errors import ShapeError, DataError


class DataFolder:
    """A data folder opened as ``train_images --data`` opens it: IDX, CIFAR, image folders,
    segmentation and labels.csv folders. ``train``, ``validation`` (a val/ folder, or None) and
    ``test`` (or None) are its sides; ``kind`` says what it held."""

    def __init__(self, train: Any, validation: Any, test: Any, kind: str, path: str) -> None:
        self.train = train
        self.validation = validation
        self.test = test
        self.kind = kind
        self.path = path

    def __repr__(self) -> str:
        return f"DataFolder({self.path!r}, kind={self.kind!r}, train={self.train.description!r})"


def open_dataset(
    path: "os.PathLike[str] | str",
    image_shape: Sequence[int] = (0, 0, 0),
    seed: int = 1,
    task: Optional[str] = None,
    resize_shorter_side: int = 0,
    skip_corrupt: bool = False,
) -> DataFolder:
    """Opens the data set in ``path`` (see ``train_images --help``'s --data for the layouts).

    ``image_shape`` (channels, height, width) converts and resizes an image folder's images (0:
    as the images are); ``resize_shorter_side`` frames them as torchvision's Resize then
    CenterCrop; ``task`` asks for one task where a folder could hold two."""
    folder = os.fspath(path)
    if isinstance(folder, bytes):
        folder = os.fsdecode(folder)
    if "\0" in folder:
        raise ValueError(f"path: {folder!r} holds a NUL character")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**64:
        raise ValueError(f"seed={seed!r}: a whole number from 0 to 2**64 - 1")
    if isinstance(resize_shorter_side, bool) or not isinstance(resize_shorter_side, (int, np.integer)) \
            or resize_shorter_side < 0:
        raise ValueError(f"resize_shorter_side={resize_shorter_side!r}: 0 (stretched) or a side in pixels")
    train, validation, test, kind = _cnnengine._open_dataset(
        folder, [int(v) for v in image_shape], int(seed), task, int(resize_shorter_side), bool(skip_corrupt)
    )
    return DataFolder(train, validation, test, kind, folder)


def _contiguous(array: np.ndarray, name: str) -> None:
    if not array.flags.c_contiguous:
        raise DataError(
            f"{name} is not in C order (a transposed or strided view): it is read in place, so give "
            f"np.ascontiguousarray({name})"
        )


def image_array(x: Any, input_shape: List[int], data_format: str, name: str) -> np.ndarray:
    """``x`` as the engine reads it in place: uint8 or float32, C order, (N, C, H, W) or (N, H, W, C)."""
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(f"data_format={data_format!r}: 'channels_first' (N, C, H, W) or 'channels_last' (N, H, W, C)")
    if not isinstance(x, np.ndarray):
        # A DLPack or buffer-protocol array (a PyTorch CPU tensor, a memoryview) is a view, not a copy.
        try:
            x = np.from_dlpack(x) if hasattr(x, "__dlpack__") else np.asarray(x)
        except Exception as error:
            raise TypeError(f"{name}: a numpy array (or one numpy can view), a data folder's path or "
                            f"open_dataset's result, not {type(x).__name__} ({error})") from None
    if x.dtype not in (np.uint8, np.float32):
        raise DataError(
            f"{name} holds {x.dtype} values: give uint8 (scaled to [0, 1] by the engine) or float32 "
            f"({name}.astype(np.float32))"
        )
    _contiguous(x, name)
    if x.ndim == 3 and input_shape[0] == 1:  # greyscale images without their channel
        n, h, w = x.shape
        x = x.reshape((n, 1, h, w) if data_format == "channels_first" else (n, h, w, 1))  # a view
    if x.ndim != 4:
        layout = "(N, C, H, W)" if data_format == "channels_first" else "(N, H, W, C)"
        raise ShapeError(f"{name} has shape {x.shape}: give {layout}")
    c, h, w = (x.shape[1:] if data_format == "channels_first" else (x.shape[3], x.shape[1], x.shape[2]))
    if [c, h, w] != list(input_shape):
        hint = ""
        if data_format == "channels_first" and x.shape[3] == input_shape[0]:
            hint = " (it looks like (N, H, W, C): give data_format='channels_last')"
        raise ShapeError(
            f"{name} holds samples of {c}x{h}x{w} (shape {x.shape}); the network takes "
            f"{input_shape[0]}x{input_shape[1]}x{input_shape[2]}{hint}"
        )
    if x.shape[0] == 0:
        raise DataError(f"{name} holds no samples")
    return x


def array_data(
    x: Any, y: Any, task: str, classes: int, input_shape: List[int], data_format: str, name: str,
    class_names: Optional[List[str]], labelled: bool = True,
) -> Any:
    """An engine data set over ``x`` and ``y`` (None: images alone, to predict)."""
    x = image_array(x, input_shape, data_format, name)
    n = x.shape[0]
    labels = masks = values = None
    if y is None:
        if labelled:
            raise ValueError(f"{name} needs its targets: y is None")
    else:
        y = np.asarray(y)
        if y.shape[:1] != (n,):
            raise ShapeError(f"y has shape {y.shape} for {n} images in {name}")
        if task == "classify":
            if y.ndim == 2 and y.shape[1] == 1:
                y = y.reshape(n)
            if y.ndim != 1:
                raise ShapeError(
                    f"y has shape {y.shape}: give one class number a sample, shape ({n},)"
                    + (" (one-hot rows? y.argmax(axis=1))" if y.ndim == 2 else "")
                )
            if y.dtype.kind not in "iu":
                raise DataError(f"y holds {y.dtype} values: class numbers are integers (y.astype(np.int64))")
            if y.dtype.kind == "u" and y.size and y.max() > np.iinfo(np.int64).max:
                i = int(y.argmax())
                raise DataError(f"y[{i}] is {y[i]}, not a class")
            labels = np.ascontiguousarray(y, dtype=np.int64)
        elif task == "segment":
            if y.ndim == 4 and y.shape[1] == 1:
                y = y.reshape(n, y.shape[2], y.shape[3])
            if y.ndim != 3:
                raise ShapeError(f"y has shape {y.shape}: give a mask an image, shape ({n}, H, W)")
            if y.dtype.kind not in "iu":
                raise DataError(f"y holds {y.dtype} values: a mask holds class numbers (255: none)")
            if y.dtype != np.uint8:
                if y.size and (y.min() < 0 or y.max() > 255):
                    raise DataError("y: a mask value outside 0 to 255 (a class, or 255 for none)")
                y = y.astype(np.uint8)
            _contiguous(y, "y")
            masks = y
        else:
            if y.ndim == 1 and classes == 1:
                y = y.reshape(n, 1)
            if y.ndim != 2:
                raise ShapeError(f"y has shape {y.shape}: give ({n}, {classes})")
            if y.dtype.kind not in "fiub":
                raise DataError(f"y holds {y.dtype} values: give numbers")
            values = np.ascontiguousarray(y, dtype=np.float32)
    return _cnnengine._array_data(
        x, labels, masks, values, task, int(classes), data_format == "channels_last", name, list(class_names or [])
    )
