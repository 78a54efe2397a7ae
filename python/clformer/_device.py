"""_device.py - OpenCL devices (clf_list_devices) and `clformer probe`.

The probe (device properties, measurements, kernel self-validation) lives in
the command line (tools/cmd_probe.c); probe() runs the `clformer` program the
wheel carries beside this package, or the one on $PATH, with --json.
"""
from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import shutil
import subprocess
from typing import Union

from . import _errors, _lib

_TYPES = ((1 << 1, "CPU"), (1 << 2, "GPU"), (1 << 3, "ACCELERATOR"), (1 << 4, "CUSTOM"), (1 << 0, "DEFAULT"))


@dataclasses.dataclass(frozen=True)
class Device:
    """One OpenCL device, as clf_list_devices describes it.

    ``selector`` ("P:D") is what ``device=`` arguments and $CLFORMER_DEVICE take.
    """

    index: int  #: position in devices()
    platform: str  #: platform name
    name: str  #: device name
    type: str  #: "CPU", "GPU", "ACCELERATOR", ... ("|"-joined when several bits are set)
    selector: str  #: "P:D": platform index, device index
    platform_index: int
    device_index: int
    vendor: str
    driver_version: str
    device_version: str  #: "OpenCL 3.0 PoCL ..."

    def __str__(self) -> str:
        return f"{self.selector} {self.platform} / {self.name} ({self.type})"


def _type_name(bits: int) -> str:
    names = [n for b, n in _TYPES if bits & b]
    return "|".join(names) if names else f"0x{bits:x}"


def _device(desc: _lib.DeviceDesc, index: int) -> Device:
    t = _lib.text
    return Device(index=index, platform=t(desc.platform_name), name=t(desc.device_name), type=_type_name(desc.type),
                  selector=f"{desc.platform_index}:{desc.device_index}", platform_index=desc.platform_index,
                  device_index=desc.device_index, vendor=t(desc.vendor), driver_version=t(desc.driver_version),
                  device_version=t(desc.device_version))


def devices() -> list[Device]:
    """Every OpenCL device of every platform, in the library's order.

    Returns [] when there is none (the library's CLF_E_NO_DEVICE); other
    failures raise clformer.Error."""
    lib = _lib.lib
    count = ctypes.c_size_t(0)
    st = lib.clf_list_devices(None, 0, ctypes.byref(count))
    if st == _errors.NoDeviceError.code:
        return []
    _errors.check(st)
    n = count.value
    arr = (_lib.DeviceDesc * max(n, 1))()
    st = lib.clf_list_devices(arr, n, ctypes.byref(count))
    if st == _errors.NoDeviceError.code:
        return []
    _errors.check(st)
    return [_device(arr[i], i) for i in range(min(n, count.value))]


DeviceLike = Union[str, int, Device, None]


def selector_of(device: DeviceLike) -> str | None:
    """The clf_select_device selector for a device argument: None (the
    default: $CLFORMER_DEVICE, else the first GPU, else the first device), an
    index into devices(), a Device, or a selector string ("0:1", or part of
    "platform / device name")."""
    if device is None:
        return None
    if isinstance(device, Device):
        return device.selector
    if isinstance(device, bool) or not isinstance(device, (int, str)):
        raise _errors.InvalidArgumentError(
            f"device must be None, an int index, a clformer.Device or a selector string, not {type(device).__name__}")
    if isinstance(device, int):
        found = devices()
        if not 0 <= device < len(found):
            raise _errors.DeviceNotFoundError(f"device index {device} is not one of the {len(found)} devices")
        return found[device].selector
    if "\0" in device:
        raise _errors.InvalidArgumentError("device selector contains a NUL character")
    return device


def select(device: DeviceLike) -> Device:
    """The Device that `device` selects (see selector_of)."""
    sel = selector_of(device)
    desc = _lib.DeviceDesc()
    _errors.check(_lib.lib.clf_select_device(_lib.cstr(sel, "device") if sel is not None else None, ctypes.byref(desc)))
    return _device_from_desc(desc)


def _device_from_desc(desc: _lib.DeviceDesc) -> Device:
    """The Device of a description, its index found in devices()."""
    for d in devices():
        if (d.platform_index, d.device_index) == (desc.platform_index, desc.device_index):
            return d
    return _device(desc, -1)


def cli_path() -> str:
    """The `clformer` program: $CLFORMER_CLI, the one the wheel carries, else $PATH's."""
    env = os.environ.get("CLFORMER_CLI")
    if env:
        return env
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clformer")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    found = shutil.which("clformer")
    if found:
        return found
    raise _errors.NotFoundError("the clformer program is not installed beside the package nor on $PATH "
                                "(set $CLFORMER_CLI to it)")


def probe(device: DeviceLike = None, *, measure: bool = True, validate: bool = True, quick: bool = False,
          timeout: float | None = None) -> dict:
    """What `clformer probe --json` reports about one device (or, with
    device None, every device): properties, measurements (skipped with
    measure=False), kernel self-validation (skipped with validate=False),
    the GEMM tuning profile.  The JSON's schema is "clformer-probe".

    Raises clformer.Error with the program's message when it fails."""
    args = [cli_path(), "probe", "--json"]
    sel = selector_of(device)
    if sel is not None:
        select(sel)  # the library's own DeviceNotFoundError, before starting the program
        args += ["--device", sel]
    if not measure:
        args.append("--no-measure")
    if not validate:
        args.append("--no-validate")
    if quick:
        args.append("--quick")
    try:
        run = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise _errors.Error(f"clformer probe ran past {timeout} s") from e
    if run.returncode != 0:
        msg = run.stderr.strip() or f"clformer probe exited with {run.returncode}"
        if "not found" in msg and sel is not None:
            raise _errors.DeviceNotFoundError(msg)
        raise _errors.Error(msg)
    try:
        return json.loads(run.stdout)
    except json.JSONDecodeError as e:
        raise _errors.FormatError(f"clformer probe --json printed what is not JSON: {e}") from e
