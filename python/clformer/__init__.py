"""clformer - Transformer inference on any OpenCL device, from Python.

A thin layer over libclformer through ctypes; NumPy arrays in and out.

    import clformer, numpy as np
    print(clformer.devices())
    with clformer.Model("path/to/bert") as m:
        out = m(input_ids=np.array([[101, 7592, 102]]))
        print(out["last_hidden_state"].shape)

See docs/python.md for the whole API, the install and the error model.
"""
from ._lib import path as library_path
from ._errors import (BlasError, BuildError, DeviceNotFoundError, DtypeError, Error, FormatError, InvalidArgumentError,
                      IOFailedError, LimitError, NoDeviceError, NotFoundError, OpenCLError, OutOfMemoryError, ShapeError,
                      UnsupportedError)
from ._device import Device, devices, probe
from ._chat import ChatReply, ChatStream, TemplateBudget
from ._generate import GenerationSettings, TextStream, generation_settings
from ._model import Model
from ._engine import Delta, Engine, EngineStats, Sequence, SequenceResult, TokenLogprob
from ._text import Tokenizer

__version__ = "0.1.0"

__all__ = [
    "__version__", "library_path", "Device", "devices", "probe", "Model", "Engine", "EngineStats", "Sequence",
    "SequenceResult", "Delta", "TokenLogprob", "GenerationSettings", "generation_settings", "TextStream", "ChatReply",
    "ChatStream", "TemplateBudget", "Tokenizer", "Error", "InvalidArgumentError",
    "ShapeError", "DtypeError", "NoDeviceError", "DeviceNotFoundError", "OpenCLError", "BuildError",
    "OutOfMemoryError", "BlasError", "UnsupportedError", "IOFailedError", "FormatError", "NotFoundError", "LimitError",
]
