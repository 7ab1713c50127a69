#!/usr/bin/python3
"""Times the CLIP-B/32-shaped towers in PyTorch (eager, no grad), the same architecture the
benchmark ONNX files are exported from. Prints one JSON line with median_ms.

  torch_clip.py vision|text BATCH THREADS RUNS
"""
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from reference_models import ClipText, ClipVision  # noqa: E402


def main():
    kind, batch, threads, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if kind == "vision":
        model = ClipVision(image_hw=(224, 224), patch=32, width=768, heads=12, layers=12, proj=512).eval()
        args = (torch.randn(batch, 3, 224, 224),)
    else:
        model = ClipText(vocab=49408, max_len=77, width=512, heads=8, layers=12, proj=512).eval()
        args = (torch.randint(1, 49406, (batch, 77)), torch.ones(batch, 77, dtype=torch.long))
    times = []
    with torch.no_grad():
        for i in range(runs + 2):
            t0 = time.perf_counter()
            model(*args)
            if i >= 2:
                times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"median_ms": statistics.median(times), "runs": runs, "threads": threads}))


if __name__ == "__main__":
    main()
