"""local.py - a Ray of this machine alone for `python -m clformer.serve`
without --address: its own instance, whatever cluster the machine knew
before, with every process listening on loopback only.

Ray's ray.init() with no address joins $RAY_ADDRESS, else the cluster that
the last `ray start` wrote to /tmp/ray/ray_current_cluster (even one long
stopped); address="local" starts a new instance whatever those say
(ray/_private/services.py canonicalize_bootstrap_address).  Ray's own
processes (GCS, raylet, agents, workers) then listen on 127.0.0.1 once
multi-node clusters are off; Serve's replicas still open their
inter-deployment gRPC server on "[::]:0", which restrict_replica_grpc()
turns into 127.0.0.1; Serve's HTTP proxy gets the header deadline of
_http_guard.py through the environment it inherits.
"""
from __future__ import annotations

import os

from . import _http_guard

ENV_LOOPBACK = "CLFORMER_SERVE_LOOPBACK"  # "1": this Ray listens on loopback only (set by local_ray)


def local_ray(num_cpus: int = 2, resources: dict | None = None) -> None:
    """ray.init for one machine: a new Ray instance, every Ray process on
    127.0.0.1, no dashboard, Serve's proxy with the header deadline
    ($CLFORMER_SERVE_HEADER_TIMEOUT_S, default 10 s).

    Ray turns a node address of 127.0.0.1 into the machine's outward address
    unless multi-node clusters are off (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0,
    read when ray is imported, hence also set on the imported constant); with
    them off, GCS, raylet, agents and workers listen on 127.0.0.1 only.  The
    processes Ray starts inherit this process's environment: RAY_ADDRESS is
    taken out of it (a worker must not look for another cluster) and the
    variables of local mode and of the header deadline put in."""
    import ray
    from ray._private import ray_constants
    os.environ.pop("RAY_ADDRESS", None)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the machine
    os.environ[ENV_LOOPBACK] = "1"
    os.environ.update(_http_guard.proxy_env())
    ray_constants.ENABLE_RAY_CLUSTER = False
    ray.init(address="local", num_cpus=num_cpus, resources=resources or {}, include_dashboard=False,
             log_to_driver=False)


def restrict_replica_grpc() -> None:
    """In a Serve replica's constructor: under local_ray, the replica's
    inter-deployment gRPC server (which Serve opens after the constructor
    returns, on "[::]:0") listens on 127.0.0.1 instead.  Elsewhere nothing
    changes: on a cluster the other nodes' proxies and replicas call it."""
    if os.environ.get(ENV_LOOPBACK) != "1":
        return
    from ray.serve._private import replica as serve_replica
    bind = serve_replica.add_port_to_grpc_server
    if getattr(bind, "_clf_loopback", False):
        return

    def loopback(server, address):
        host, sep, port = str(address).rpartition(":")
        if sep and host in ("[::]", "0.0.0.0", ""):
            address = f"127.0.0.1:{port}"
        return bind(server, address)

    loopback._clf_loopback = True
    serve_replica.add_port_to_grpc_server = loopback
