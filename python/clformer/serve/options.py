"""options.py - how one serving application is set up (ServeOptions), shared
by the command line, the ingress and the model replicas; no Ray here."""
from __future__ import annotations

import dataclasses
import os

from .api import Limits


def gguf_file(path: str) -> str | None:
    """The GGUF file a model path names, by the library's rule (what
    `clformer chat` and clformer.Model load): the path itself when it is a
    file, else the one *.gguf file of a directory without config.json; None
    for a Hugging Face directory (and for a directory holding no or several
    GGUF files, which the library refuses at load, saying which)."""
    if os.path.isfile(path):
        return path
    if not os.path.isdir(path) or os.path.exists(os.path.join(path, "config.json")):
        return None
    found = sorted(f for f in os.listdir(path) if f.endswith(".gguf") and os.path.isfile(os.path.join(path, f)))
    return os.path.join(path, found[0]) if len(found) == 1 else None


@dataclasses.dataclass(frozen=True)
class ServeOptions:
    model_dir: str                     #: a Hugging Face directory, a .gguf file or a directory holding one
    name: str = ""                     #: the model name clients send ("model"); default: served_name()
    weights: str = "stored"            #: linear weights' storage: a weight type the library lists (--weights)
    replicas: int = 1                  #: model replicas in the whole cluster
    replicas_per_device: int = 1       #: replicas that share one OpenCL device
    resource: str = "opencl_device"    #: the Ray custom resource a node advertises per device
    devices: str | None = None         #: the devices replicas may take (None: $CLFORMER_SERVE_DEVICES, else all)
    replica_cpus: float = 0.0          #: Ray CPUs a model replica reserves (the device is its resource)
    max_ongoing_requests: int = 32     #: requests one model replica holds at once (batching needs several)
    max_queued_requests: int = 64      #: waiting for a replica at the ingress; past it the answer is 429
    max_batch_tokens: int = 0          #: embedding batch bound in padded tokens (0: from the device's memory)
    max_batch_images: int = 16         #: classification batch bound
    batch_wait_s: float = 0.005        #: how long a batch waits for more requests
    kv_bytes: int = 0                  #: the engine's KV pool per replica (0: the library's default, shared)
    retries: int = 3                   #: attempts after the first when a replica dies or is unreachable
    template_budget: tuple = (0, 0, 0)  #: a chat template render's steps, bytes, memory (0: the library's default)
    #: a chat template's Jinja source used instead of the model's (--chat-template FILE's text: it travels to
    #: every replica, wherever it runs); "" the model's
    chat_template: str = dataclasses.field(default="", repr=False)
    limits: Limits = Limits()
    #: the key every endpoint but /health asks for ("Authorization: Bearer KEY"; "" none); out of repr and logs
    api_key: str = dataclasses.field(default="", repr=False)

    def served_name(self) -> str:
        """--name, else a GGUF file's name without .gguf, else the directory's name."""
        if self.name:
            return self.name
        gguf = gguf_file(self.model_dir)
        base = os.path.basename(gguf or os.path.normpath(self.model_dir))
        return base[:-5] if gguf and base.endswith(".gguf") and len(base) > 5 else base

    def replica_resources(self) -> dict:
        """The custom resource one replica takes: 1/N of a device."""
        return {self.resource: round(1.0 / self.replicas_per_device, 4)}
