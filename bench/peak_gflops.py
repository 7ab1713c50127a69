#!/usr/bin/python3
"""The best GFLOPS of any single repetition in a bench/gemm_peak.cpp JSON output (a ceiling, so
the best sample is the estimate); prints nothing when the file has none.

  peak_gflops.py GEMM_PEAK_JSON"""
import json
import sys

with open(sys.argv[1]) as f:
    runs = json.load(f)["benchmarks"]
# Google Benchmark writes rate counters per second; older versions wrote them unscaled.
rates = [b["GFLOPS"] for b in runs if b.get("run_type") == "iteration" and "GFLOPS" in b]
rates = [x / 1e9 if x > 1e6 else x for x in rates]
print(round(max(rates), 1) if rates else "")
