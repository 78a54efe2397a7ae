"""devices.py - which OpenCL device a serving replica takes, and how large a
batch that device holds.  No Ray here: app.py passes the node's identity.

Ray places a replica on a node that has a free unit of a custom resource
("opencl_device" unless told otherwise) but, unlike for GPUs, tells the
replica nothing about which unit it got: Ray sets no environment variable
and keeps no ids for custom resources.  So a replica claims a slot itself.
The node's devices (clformer.devices(), or the ones $CLFORMER_SERVE_DEVICES
lists, comma-separated selectors or indices) each have `per_device` slots;
a slot is an exclusive flock() on a file in a directory of that node's Ray
session.  The kernel drops the lock when the replica's process ends however
it ends, so the replica Ray starts in place of a dead one takes the freed
slot, and no stale claim survives.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import errno
import fcntl
import os
from typing import Any

ENV_DEVICES = "CLFORMER_SERVE_DEVICES"


class NoFreeDevice(RuntimeError):
    """Every slot of every device on this node is taken."""


@dataclasses.dataclass
class Slot:
    device: Any   # clformer.Device
    index: int    # which of the device's slots
    path: str     # the lock file
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # drops the flock
            self.fd = -1


def node_devices(spec: str | None = None) -> list:
    """The devices replicas on this node may take: every device, or those
    `spec` (default $CLFORMER_SERVE_DEVICES) names by index or selector."""
    import clformer
    found = clformer.devices()
    spec = os.environ.get(ENV_DEVICES, "") if spec is None else spec
    if not spec.strip():
        return found
    picked = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        match = [d for d in found if d.selector == part or str(d.index) == part]
        if not match:
            raise NoFreeDevice(f"{ENV_DEVICES} names {part!r}, which is none of this node's devices "
                               f"({', '.join(d.selector for d in found) or 'none'})")
        if match[0] not in picked:
            picked.append(match[0])
    return picked


def claim(devices: list, per_device: int, lock_dir: str) -> Slot:
    """Takes the first free slot, first slots of every device before second
    slots, so that N replicas on a node spread over its devices."""
    if not devices:
        raise NoFreeDevice("this node has no OpenCL device for a replica")
    os.makedirs(lock_dir, exist_ok=True)
    for k in range(per_device):
        for d in devices:
            path = os.path.join(lock_dir, f"device-{d.selector.replace(':', '-')}.slot-{k}.lock")
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue
                raise
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return Slot(d, k, path, fd)
    raise NoFreeDevice(f"all {len(devices) * per_device} replica slots of this node are taken "
                       f"({len(devices)} device(s) x {per_device} per device): the node advertises more "
                       "opencl_device resource than it has devices for")


# ------------------------------------------------------------ device memory

_CL_DEVICE_TYPE_ALL = 0xFFFFFFFF
_CL_DEVICE_GLOBAL_MEM_SIZE = 0x101F
_CL_DEVICE_NAME = 0x102B


def global_mem_bytes(device: Any) -> int | None:
    """CL_DEVICE_GLOBAL_MEM_SIZE of `device` (a clformer.Device), asked of the
    OpenCL ICD loader directly; None when that fails or finds another device
    at the same indices."""
    try:
        cl = ctypes.CDLL(ctypes.util.find_library("OpenCL") or "libOpenCL.so.1")
        n = ctypes.c_uint(0)
        if cl.clGetPlatformIDs(0, None, ctypes.byref(n)) != 0 or device.platform_index >= n.value:
            return None
        plats = (ctypes.c_void_p * n.value)()
        cl.clGetPlatformIDs(n.value, plats, None)
        m = ctypes.c_uint(0)
        plat = ctypes.c_void_p(plats[device.platform_index])
        if cl.clGetDeviceIDs(plat, ctypes.c_uint64(_CL_DEVICE_TYPE_ALL), 0, None, ctypes.byref(m)) != 0 \
                or device.device_index >= m.value:
            return None
        devs = (ctypes.c_void_p * m.value)()
        cl.clGetDeviceIDs(plat, ctypes.c_uint64(_CL_DEVICE_TYPE_ALL), m.value, devs, None)
        dev = ctypes.c_void_p(devs[device.device_index])
        name = ctypes.create_string_buffer(256)
        if cl.clGetDeviceInfo(dev, _CL_DEVICE_NAME, ctypes.c_size_t(256), name, None) != 0 \
                or name.value.decode(errors="replace").strip() != device.name.strip():
            return None
        mem = ctypes.c_uint64(0)
        if cl.clGetDeviceInfo(dev, _CL_DEVICE_GLOBAL_MEM_SIZE, ctypes.c_size_t(8), ctypes.byref(mem), None) != 0:
            return None
        return int(mem.value)
    except (OSError, AttributeError):
        return None


def batch_tokens(config: dict, free_bytes: int, share: float = 0.25, cap: int = 16384) -> int:
    """How many tokens (rows x padded length) one batch of an encoder pass
    may hold so that its activations take at most `share` of `free_bytes`:
    per token, about 8 hidden-wide f32 vectors (the layer's input, Q, K, V,
    attention output, residual, norm, and the next layer's input), two
    intermediate-wide ones (the MLP), and one attention score row per head
    when the attention runs as GEMMs.  At least one full-length sequence."""
    hidden = int(config.get("hidden_size") or config.get("n_embd") or config.get("d_model") or 768)
    inter = int(config.get("intermediate_size") or config.get("n_inner") or config.get("encoder_ffn_dim")
                or 4 * hidden)
    heads = int(config.get("num_attention_heads") or config.get("n_head") or 12)
    length = max_positions(config) or 512
    per_token = 4 * (8 * hidden + 2 * inter + heads * length)
    fit = int(free_bytes * share) // per_token
    return max(length, min(fit, cap))


def max_positions(config: dict) -> int | None:
    for key in ("max_position_embeddings", "n_positions", "n_ctx"):
        v = config.get(key)
        if isinstance(v, int) and v > 0:
            return v
    return None
