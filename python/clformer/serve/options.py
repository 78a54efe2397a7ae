"""options.py - how one serving application is set up (ServeOptions), shared
by the command line, the ingress and the model replicas; no Ray here."""
from __future__ import annotations

import dataclasses
import os

from .api import Limits


@dataclasses.dataclass(frozen=True)
class ServeOptions:
    model_dir: str
    name: str = ""                     #: the model name clients send ("model"); default: the directory's name
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
    retries: int = 3                   #: attempts after the first when a replica dies or is unreachable
    template_budget: tuple = (0, 0, 0)  #: a chat template render's steps, bytes, memory (0: the library's default)
    limits: Limits = Limits()

    def served_name(self) -> str:
        return self.name or os.path.basename(os.path.normpath(self.model_dir))

    def replica_resources(self) -> dict:
        """The custom resource one replica takes: 1/N of a device."""
        return {self.resource: round(1.0 / self.replicas_per_device, 4)}
