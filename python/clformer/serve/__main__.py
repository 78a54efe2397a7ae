"""python -m clformer.serve MODEL: serves a model (a Hugging Face directory, a
GGUF file or a directory holding one: what `clformer chat` takes) over HTTP.
By default in this one process (uvicorn, the model on this machine's first
allowed OpenCL device; Ray is not imported).  With --replicas N on Ray Serve,
on a local Ray started here (this machine's OpenCL devices as the
"opencl_device" resource; its own instance whatever $RAY_ADDRESS or an
earlier `ray start` say, listening on 127.0.0.1 only), or with --address on
a running cluster whose nodes advertise that resource (docs/serving.md).
Runs until interrupted."""
from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import sys
import threading

ENV_API_KEY = "CLFORMER_SERVE_API_KEY"


def parse(argv: list[str]) -> argparse.Namespace:
    from .._lib import WEIGHT_TYPES  # the weight types the library lists
    p = argparse.ArgumentParser(prog="python -m clformer.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir", metavar="MODEL",
                   help="a Hugging Face model directory, a .gguf file or a directory holding one (the same path "
                        "on every node)")
    p.add_argument("--replicas", type=int, default=None,
                   help="serve on Ray Serve with this many model replicas (0: every device unit the cluster "
                        "advertises x --replicas-per-device); default: one process, no Ray")
    p.add_argument("--replicas-per-device", type=int, default=1, help="replicas sharing one device (default 1)")
    p.add_argument("--weights", default="stored", choices=WEIGHT_TYPES,
                   help="linear weights' storage (stored: a GGUF file's blocks as they are, else f32)")
    p.add_argument("--name", default="",
                   help="the model name clients send (default: a GGUF file's name without .gguf, else the "
                        "directory's name)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    p.add_argument("--address", default=None,
                   help="join this Ray cluster (\"auto\": the one started on this node) instead of a local Ray")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: all)")
    p.add_argument("--devices", default=None,
                   help="devices replicas may take, comma-separated indices or selectors (default: "
                        "$CLFORMER_SERVE_DEVICES, else all)")
    p.add_argument("--resource", default="opencl_device", help="the Ray custom resource of one device")
    p.add_argument("--max-body-bytes", type=int, default=8 << 20)
    p.add_argument("--max-new-tokens", type=int, default=0,
                   help="the largest max_tokens a request may ask for, and the default of chat's (default 0: none, "
                        "what the model's context leaves after the prompt)")
    p.add_argument("--max-batch-tokens", type=int, default=0,
                   help="embedding batch bound in padded tokens (default: from the device's memory)")
    p.add_argument("--kv-bytes", type=int, default=0,
                   help="device memory of each replica's KV pool for completions (default: the library's, a "
                        "quarter of what the weights leave, shared among the replicas of a device)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one request may take (504 past it)")
    p.add_argument("--max-input-chars", type=int, default=65536,
                   help="characters in one text or prompt, checked before tokenizing (default 65536)")
    p.add_argument("--max-concurrent", type=int, default=64,
                   help="requests the ingress holds at once; past it 429 (default 64)")
    p.add_argument("--body-timeout", type=float, default=30.0,
                   help="seconds a request body may take to arrive; past it 408 (default 30)")
    p.add_argument("--header-timeout", type=float, default=None,
                   help="seconds a connection may take to send a request's headers, from its opening or the end "
                        "of the previous response (default $CLFORMER_SERVE_HEADER_TIMEOUT_S, else 10; 0: none)")
    p.add_argument("--api-key", default=None,
                   help=f"every endpoint but /health needs 'Authorization: Bearer KEY' (default ${ENV_API_KEY}; "
                        "prefer the variable: a command line is visible to other users)")
    p.add_argument("--insecure-no-key", action="store_true",
                   help="listen on an address beyond loopback without an API key")
    p.add_argument("--chat-template", default=None, type=chat_template, metavar="FILE",
                   help="the chat template (Jinja) in FILE instead of the model's (for a file without one: a GGUF "
                        "file may lack tokenizer.chat_template), as clformer chat --chat-template")
    p.add_argument("--template-budget", default="", type=template_budget, metavar="steps=N,bytes=N,memory=N",
                   help="what one rendering of the chat template may cost (K, M, G suffixes; default: the "
                        "library's 1000000 steps, 128M bytes, 64M memory; docs/chat.md)")
    a = p.parse_args(argv)
    if a.api_key is None:
        a.api_key = os.environ.get(ENV_API_KEY, "")
    if a.api_key != a.api_key.strip() or any(ord(c) < 0x21 or ord(c) > 0x7e for c in a.api_key):
        p.error("--api-key: printable ASCII without spaces (it travels in an HTTP header)")
    if not a.api_key and not a.insecure_no_key and not loopback(a.host):
        p.error(f"--host {a.host} is reachable from other machines: set an API key (--api-key or ${ENV_API_KEY}), "
                "or say --insecure-no-key")
    a.ray = a.replicas is not None or a.address is not None
    a.replicas = a.replicas or 0
    if a.replicas < 0 or a.replicas_per_device < 1:
        p.error("--replicas must be >= 0 and --replicas-per-device >= 1")
    if a.header_timeout is not None and not a.header_timeout >= 0:
        p.error("--header-timeout must be >= 0")
    if a.max_input_chars < 1 or a.max_concurrent < 1 or not a.body_timeout > 0:
        p.error("--max-input-chars and --max-concurrent must be >= 1, --body-timeout > 0")
    if a.kv_bytes < 0:
        p.error("--kv-bytes must be >= 0")
    if a.max_new_tokens < 0:
        p.error("--max-new-tokens must be >= 0 (0: no cap but the context)")
    why = not_a_model(a.model_dir)
    if why:
        p.error(why)
    return a


def loopback(host: str) -> bool:
    """Whether `host` (an address or "localhost") is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def not_a_model(path: str) -> str | None:
    """Why `path` is not a model the library loads (None when it looks like
    one): a file is taken as GGUF (the library says what is wrong with it),
    a directory needs config.json or exactly one .gguf file."""
    from .options import gguf_file
    if os.path.isfile(path) or os.path.isfile(os.path.join(path, "config.json")):
        return None
    if not os.path.isdir(path):
        return f"{path}: no such file or directory"
    if gguf_file(path):
        return None
    n = sum(f.endswith(".gguf") for f in os.listdir(path))
    if n > 1:
        return f"{path} holds {n} .gguf files and no config.json: name the file to serve"
    return f"{path} has neither config.json nor a .gguf file: not a model"


TEMPLATE_MAX_BYTES = 1 << 20  # clformer chat's bound on a --chat-template file


def chat_template(path: str) -> str:
    """--chat-template FILE: its text (UTF-8, at most 1 MiB), read here so
    that it reaches replicas on any machine; the library parses it when a
    replica loads the model."""
    try:
        with open(path, "rb") as f:
            data = f.read(TEMPLATE_MAX_BYTES + 1)
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{path}: {e.strerror}") from None
    if len(data) > TEMPLATE_MAX_BYTES:
        raise argparse.ArgumentTypeError(f"{path}: larger than 1 MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise argparse.ArgumentTypeError(f"{path}: not UTF-8 text (byte {e.start})") from None
    if "\0" in text:
        raise argparse.ArgumentTypeError(f"{path}: holds a NUL character")
    return text


def template_budget(text: str) -> tuple:
    """--template-budget: "steps=N,bytes=N,memory=N", any of them, N with an
    optional K, M or G (powers of 1024); what is left out is the default (0)."""
    out = {"steps": 0, "bytes": 0, "memory": 0}
    for part in filter(None, text.split(",")):
        key, eq, val = part.partition("=")
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(val[-1:].upper(), 1) if val else 1
        num = val[:-1] if mult > 1 else val
        if key.strip() not in out or not eq or not num.isdigit() or int(num) * mult >= 1 << 64:
            raise argparse.ArgumentTypeError(f"{part!r}: expected steps=N, bytes=N or memory=N (N a positive "
                                             "integer, K/M/G allowed)")
        out[key.strip()] = int(num) * mult
    return (out["steps"], out["bytes"], out["memory"])


def options(a: argparse.Namespace, replicas: int = 1) -> "ServeOptions":
    from .api import Limits
    from .options import ServeOptions
    return ServeOptions(model_dir=os.path.abspath(a.model_dir), name=a.name, weights=a.weights, replicas=replicas,
                        replicas_per_device=a.replicas_per_device, resource=a.resource, devices=a.devices,
                        max_batch_tokens=a.max_batch_tokens, kv_bytes=a.kv_bytes,
                        template_budget=a.template_budget or (0, 0, 0), chat_template=a.chat_template or "",
                        api_key=a.api_key,
                        limits=Limits(max_body_bytes=a.max_body_bytes, max_new_tokens=a.max_new_tokens,
                                      request_timeout_s=a.timeout, max_input_chars=a.max_input_chars,
                                      max_concurrent=a.max_concurrent, body_timeout_s=a.body_timeout))


def single(a: argparse.Namespace) -> int:
    """One process: the model here, uvicorn in front; no Ray."""
    from . import devices, single as one
    try:
        if not devices.node_devices(a.devices):
            print("clformer.serve: this machine has no OpenCL device", file=sys.stderr)
            return 1
    except devices.NoFreeDevice as e:
        print(f"clformer.serve: {e}", file=sys.stderr)
        return 1
    opts = options(a)

    def ready() -> None:
        print(f"clformer.serve: {opts.served_name()} on http://{a.host}:{a.port} (one process"
              f"{', API key required' if opts.api_key else ''}); Ctrl-C stops", flush=True)
    return one.run(opts, a.host, a.port, a.header_timeout, ready)


def main(argv: list[str] | None = None) -> int:
    a = parse(sys.argv[1:] if argv is None else argv)
    if not a.ray:
        return single(a)
    if a.header_timeout is not None:
        # Read by Serve's HTTP proxy (_http_guard.py), which inherits it.
        os.environ["CLFORMER_SERVE_HEADER_TIMEOUT_S"] = f"{a.header_timeout:g}"
    if a.address and "RAY_AUTH_MODE" not in os.environ and (os.environ.get("RAY_AUTH_TOKEN") or os.path.isfile(
            os.path.join(os.path.expanduser("~"), ".ray", "auth_token"))):
        # Ray 2.60 clusters authenticate with a token (~/.ray/auth_token or
        # $RAY_AUTH_TOKEN); a driver joining one uses it only in token mode.
        os.environ["RAY_AUTH_MODE"] = "token"
    import ray
    from ray import serve

    from . import devices
    from .app import start
    from .local import local_ray

    if a.address:
        ray.init(address=a.address, include_dashboard=False, log_to_driver=False)
    else:
        found = devices.node_devices(a.devices)
        if not found:
            print("clformer.serve: this machine has no OpenCL device", file=sys.stderr)
            return 1
        local_ray(num_cpus=a.num_cpus or os.cpu_count() or 2, resources={a.resource: len(found)})
    # The replicas' lock directory on this node (local mode: the only node),
    # removed at shutdown with the lock files of replicas that could not
    # remove their own (devices.py).
    node = None if a.address else ray.get_runtime_context().get_node_id()
    if node:
        devices.sweep_all()  # and what earlier runs, killed, left
    units = ray.cluster_resources().get(a.resource, 0)
    replicas = a.replicas or int(units * a.replicas_per_device)
    if replicas < 1:
        print(f"clformer.serve: the cluster advertises no {a.resource!r} resource (start its nodes with "
              f"--resources '{{\"{a.resource}\": N}}')", file=sys.stderr)
        return 1
    opts = options(a, replicas)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        start(opts, host=a.host, port=a.port)
        print(f"clformer.serve: {opts.served_name()} on http://{a.host}:{a.port} ({replicas} replica(s), "
              f"{a.replicas_per_device} per device, Ray Serve); Ctrl-C stops", flush=True)
        # timed: the handler runs on the main thread only between bytecodes, and an untimed wait
        # is not woken by a signal that lands just before it blocks or on another (Ray's) thread
        while not stop.wait(0.5):
            pass
    finally:
        serve.shutdown()
        ray.shutdown()
        if node:
            devices.sweep(os.path.join(devices.lock_base(), node), wait_s=5.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
