"""clformer.serve - a model served over HTTP with OpenAI's API, in one process
(the default: uvicorn, single.py) or on Ray Serve (--replicas, --address).

    python -m clformer.serve MODEL [--replicas N] [--weights q8] [--api-key KEY]

POST /v1/embeddings and /v1/completions (OpenAI's bodies and answers,
completions streamed as server-sent events with "stream": true),
/v1/classify (an image's bytes) and /run (named arrays as JSON lists).
On Ray, one model replica per OpenCL device (or N per device), placed by a
Ray custom resource; docs/serving.md shows a cluster.  Ray is imported only
by ray_app.py (Ray mode): `import clformer`, the request checks (api.py),
the application (app.py) and the one-process server do not need it.
"""
from .api import Limits, RequestError
from .options import ServeOptions

__all__ = ["Limits", "RequestError", "ServeOptions", "build_app", "start"]


def build_app(opts: "ServeOptions"):
    """The Ray Serve application for `opts` (see ray_app.build_app)."""
    from .app import build_app as _build
    return _build(opts)


def start(opts: "ServeOptions", **kwargs):
    """Starts Serve and deploys the application on the Ray already initialised (see ray_app.start)."""
    from .app import start as _start
    return _start(opts, **kwargs)
