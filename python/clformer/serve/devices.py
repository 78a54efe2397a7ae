"""devices.py - which OpenCL device a serving replica takes, and how large a
batch that device holds.  No Ray here: replica.py passes the node's identity.

Ray places a replica on a node that has a free unit of a custom resource
("opencl_device" unless told otherwise) but, unlike for GPUs, tells the
replica nothing about which unit it got: Ray sets no environment variable
and keeps no ids for custom resources.  So a replica claims a slot itself.
The node's devices (clformer.devices(), or the ones $CLFORMER_SERVE_DEVICES
lists, comma-separated selectors or indices) each have `per_device` slots;
a slot is an exclusive flock() on a file in a directory per Ray node
(lock_dir()).  The kernel drops the lock when the replica's process ends
however it ends, so the replica Ray starts in place of a dead one takes the
freed slot, and no stale claim survives.

The directory is one only the server's user can write ($XDG_RUNTIME_DIR/
clformer-serve, else <tmp>/clformer-serve-<uid>, mode 0700, checked with
lstat/fstat: a real directory, ours, no group or other write), else another
local user could plant a symlink where a lock file goes or take the slots.
Lock files are opened with O_NOFOLLOW relative to the checked directory.  A
replica removes its lock file when it lets the slot go, and the last one
the node's directory; a claim checks after taking the lock that the name
still names the file it locked, so a removal cannot give one slot to two.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import errno
import fcntl
import os
import re
import stat
import tempfile
import time
from typing import Any

ENV_DEVICES = "CLFORMER_SERVE_DEVICES"

_NODE_ID = re.compile(r"[0-9A-Za-z_-]{1,128}")
_LOCK_NAME = re.compile(r"device-[0-9A-Za-z_-]+\.slot-[0-9]+\.lock")
_ATTEMPTS = 16  # a claim's retries when a releasing replica removed the file or directory it opened


class NoFreeDevice(RuntimeError):
    """Every slot of every device on this node is taken."""


class UnsafeLockDir(RuntimeError):
    """The lock directory, or a lock file, is not one only this user controls."""


@dataclasses.dataclass
class Slot:
    device: Any   # clformer.Device
    index: int    # which of the device's slots
    path: str     # the lock file
    fd: int

    def release(self) -> None:
        """Lets the slot go: removes the lock file (while still holding its
        lock, and only if the name still names it), drops the lock, and
        removes the node's directory when no other slot's file is in it."""
        if self.fd < 0:
            return
        try:
            held, now = os.fstat(self.fd), os.lstat(self.path)
            if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
                os.unlink(self.path)
        except OSError:
            pass
        finally:
            os.close(self.fd)  # drops the flock
            self.fd = -1
        try:
            os.rmdir(os.path.dirname(self.path))
        except OSError:
            pass  # another slot's file is there (ENOTEMPTY), or it is gone


def lock_base() -> str:
    """Where the node directories go: $XDG_RUNTIME_DIR/clformer-serve (a
    per-user directory by its specification), else <tmp>/clformer-serve-<uid>."""
    run = os.environ.get("XDG_RUNTIME_DIR", "")
    if run and os.path.isabs(run) and os.path.isdir(run):
        return os.path.join(run, "clformer-serve")
    return os.path.join(tempfile.gettempdir(), f"clformer-serve-{os.geteuid()}")


def lock_dir(node_id: str, base: str | None = None) -> str:
    """The checked lock directory of Ray node `node_id` (created 0700, as is
    `base`, default lock_base()); UnsafeLockDir when either exists but is not
    a directory only this user can write."""
    if not isinstance(node_id, str) or not _NODE_ID.fullmatch(node_id):
        raise ValueError(f"node id {node_id!r} is not a Ray node id (hex digits)")
    base = lock_base() if base is None else base
    _private_dir(base)
    path = os.path.join(base, node_id)
    _private_dir(path)
    return path


def _check_dir(path: str, st: os.stat_result) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeLockDir(f"the device lock directory {path} is not a directory (a symlink or a file is there); "
                            "remove it")
    if st.st_uid != os.geteuid():
        raise UnsafeLockDir(f"the device lock directory {path} belongs to uid {st.st_uid}, not to this server's "
                            f"user (uid {os.geteuid()}); remove it, or set XDG_RUNTIME_DIR to a directory of your own")
    if st.st_mode & 0o022:
        raise UnsafeLockDir(f"the device lock directory {path} is writable by group or others (mode "
                            f"{stat.S_IMODE(st.st_mode):04o}); remove it or chmod it 0700")


def _private_dir(path: str) -> None:
    """Creates `path` 0700 if it is missing, then checks it (not following a symlink)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    _check_dir(path, os.lstat(path))


def _open_dir(path: str) -> int:
    """An fd of the checked directory `path`, created (with its parents) when missing."""
    if not os.path.lexists(path):
        os.makedirs(os.path.dirname(path) or ".", 0o700, exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeLockDir(f"the device lock directory {path} is not a directory (a symlink or a file is "
                                "there); remove it") from None
        raise
    try:
        _check_dir(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


class _DirGone(Exception):
    """A releasing replica removed the (then empty) directory under the claim."""


def _take(dfd: int, name: str, path: str) -> int | None:
    """The fd of lock file `name` in directory `dfd`, locked; None when
    another replica holds it."""
    for _ in range(_ATTEMPTS):
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UnsafeLockDir(f"the device lock file {path} is a symbolic link; it was not followed. "
                                    "Remove it (who else writes in this directory?)") from None
            if e.errno == errno.ENOENT:
                raise _DirGone() from None
            raise
        try:
            held = os.fstat(fd)
            if not stat.S_ISREG(held.st_mode) or held.st_uid != os.geteuid():
                raise UnsafeLockDir(f"the device lock file {path} is not a regular file of this server's user")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    return None
                raise
            try:
                now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
                # Its holder released it (and removed the name) between our
                # open and our lock: the lock is on a file no one else will
                # open again.  Take the name's new file instead.
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        except BaseException:
            try:
                os.close(fd)
            except OSError:
                pass
            raise
    raise RuntimeError(f"could not take {path}: it was replaced {_ATTEMPTS} times while being locked")


def claim(devices: list, per_device: int, lock_dir: str) -> Slot:
    """Takes the first free slot, first slots of every device before second
    slots, so that N replicas on a node spread over its devices.  `lock_dir`
    (lock_dir(node id)) must be a directory only this user can write; it is
    created when missing."""
    if not devices:
        raise NoFreeDevice("this node has no OpenCL device for a replica")
    for _ in range(_ATTEMPTS):
        dfd = _open_dir(lock_dir)
        try:
            for k in range(per_device):
                for d in devices:
                    name = f"device-{d.selector.replace(':', '-')}.slot-{k}.lock"
                    path = os.path.join(lock_dir, name)
                    fd = _take(dfd, name, path)
                    if fd is not None:
                        return Slot(d, k, path, fd)
        except _DirGone:
            continue  # a slot we hold in it would have kept it: none is held yet
        finally:
            os.close(dfd)
        raise NoFreeDevice(f"all {len(devices) * per_device} replica slots of this node are taken "
                           f"({len(devices)} device(s) x {per_device} per device): the node advertises more "
                           "opencl_device resource than it has devices for")
    raise RuntimeError(f"could not claim a slot in {lock_dir}: the directory was removed {_ATTEMPTS} times")


def sweep(path: str, wait_s: float = 0.0) -> bool:
    """Removes the lock files in node directory `path` that no process holds
    (a replica killed before it released its slot), then the directory when
    empty; waits up to wait_s for dying replicas to let go.  True when the
    directory is gone.  For the driver at shutdown."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            dfd = _open_dir_existing(path)
        except FileNotFoundError:
            return True
        try:
            for name in os.listdir(dfd):
                if _LOCK_NAME.fullmatch(name):
                    _remove_unheld(dfd, name)
        finally:
            os.close(dfd)
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
        time.sleep(0.1)


def sweep_all(base: str | None = None) -> None:
    """sweep() of every node directory under `base` (default lock_base()):
    what runs killed before their shutdown left.  Safe beside running
    servers: a held file stays, and a claim whose directory was removed
    under it makes it again."""
    base = lock_base() if base is None else base
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if _NODE_ID.fullmatch(name):
            try:
                sweep(os.path.join(base, name))
            except (OSError, UnsafeLockDir):
                pass


def _open_dir_existing(path: str) -> int:
    if not os.path.lexists(path):
        raise FileNotFoundError(path)
    return _open_dir(path)


def _remove_unheld(dfd: int, name: str) -> None:
    try:
        fd = os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held, now = os.fstat(fd), os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
            os.unlink(name, dir_fd=dfd)
    except OSError:
        pass  # held by a live replica, or already gone
    finally:
        os.close(fd)


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
