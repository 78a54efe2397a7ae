"""clformer.serve - a model directory served over HTTP on Ray Serve.

    python -m clformer.serve MODEL_DIR [--replicas N] [--weights q8]

POST /v1/embeddings and /v1/completions (OpenAI's bodies and answers,
completions streamed as server-sent events with "stream": true),
/v1/classify (an image's bytes) and /run (named arrays as JSON lists).
One model replica per OpenCL device (or N per device), placed by a Ray
custom resource; docs/serving.md shows a cluster.  Ray is imported only
by the parts that need it: `import clformer` does not need Ray, and
clformer.serve.api (the request checks) does not either.
"""
from .api import Limits, RequestError
from .options import ServeOptions

__all__ = ["Limits", "RequestError", "ServeOptions", "build_app", "start"]


def build_app(opts: "ServeOptions"):
    """The Ray Serve application for `opts` (see app.build_app)."""
    from .app import build_app as _build
    return _build(opts)


def start(opts: "ServeOptions", **kwargs):
    """Starts Serve and deploys the application on the Ray already initialised (see app.start)."""
    from .app import start as _start
    return _start(opts, **kwargs)
