#!/usr/bin/env python3
"""bench_ort.py - the ONNX Runtime peer of tools/bench.py: runs one exported
model on the CPU execution provider and prints one JSON line (median ms over
--repeat runs after one warm-up, the session's settings, the version).

Runs under the /opt/clf-ort venv (ONNX Runtime needs NumPy 2, Debian's
PyTorch NumPy 1: tools/bench-env.sh makes both), called by bench.py:

    /opt/clf-ort/bin/python tools/bench_ort.py MODEL.onnx OUT.npy \
        --in NAME=FILE.npy ... [--repeat N] [--threads T]

Configuration (its best on a CPU): intra_op_num_threads = T (bench.py passes
the number of cores), inter_op_num_threads 1, sequential execution, every
graph optimization (ORT_ENABLE_ALL).
"""
import argparse
import json
import statistics
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--in", dest="inputs", action="append", default=[])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, required=True)
    a = ap.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    feeds = {}
    for spec in a.inputs:
        name, path = spec.split("=", 1)
        feeds[name] = np.load(path)
    wanted = {i.name for i in sess.get_inputs()}
    feeds = {k: v for k, v in feeds.items() if k in wanted}
    out = sess.run(None, feeds)[0]  # warm-up; also the output compared
    np.save(a.out, out)
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({
        "median_ms": statistics.median(times), "min_ms": min(times), "runs": a.repeat,
        "version": ort.__version__, "providers": sess.get_providers(),
        "intra_op_num_threads": a.threads, "graph_optimization": "ORT_ENABLE_ALL",
    }))


if __name__ == "__main__":
    main()
