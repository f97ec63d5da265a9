#!/usr/bin/python3
"""Markdown tables from conv_peak's JSON lines (--json-out): the measured peak, then each
convolution of each network with its three passes as a fraction of the fp32 peak (GFLOP/s of the
direct convolution, so Winograd can pass 100%), and where conv_peak --compare timed im2col + GEMM
too, how many times faster the kernel the backend chose is, pass by pass and in all.

usage: conv_peak_table.py RESULTS.jsonl > TABLE.md
"""
import collections
import json
import sys

PASSES = ("forward", "backward_data", "backward_filter")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    peaks, runs = [], collections.OrderedDict()
    with open(sys.argv[1]) as f:
        for line in f:
            d = json.loads(line)
            if d["kind"] == "peak":
                peaks.append(d)
                continue
            key = (d["model"], d["input"], d["conv"])
            entry = runs.setdefault(key, {"times": d["times_in_network"], "kernels": collections.OrderedDict()})
            entry["kernels"].setdefault(d["kernel"], {})[d["pass"]] = d
    for p in peaks:
        print(f"- Peak on {p['threads']} threads: fp32 {p['fp32_gflops']:.0f} GFLOP/s, "
              f"bf16 {p['bf16_gflops']:.0f} GFLOP/s ({p['device']})")
    print()
    print("| model | input:batch | convolution | times | kernel | forward | backward-data | backward-filter "
          "| over im2col + GEMM |")
    print("| --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- |")
    for (model, spec, conv), entry in runs.items():
        kernels = entry["kernels"]
        chosen = next(iter(kernels))
        shares = [kernels[chosen][p]["of_fp32_peak"] for p in PASSES]
        speedup = ""
        if chosen != "gemm" and "gemm" in kernels:
            ours = [kernels[chosen][p]["ms"] for p in PASSES]
            gemm = [kernels["gemm"][p]["ms"] for p in PASSES]
            speedup = " / ".join(f"{g / o:.2f}" for g, o in zip(gemm, ours)) + f" (all {sum(gemm) / sum(ours):.2f})"
        print(f"| {model} | {spec} | {conv} | {entry['times']} | {chosen} | "
              + " | ".join(f"{100 * s:.0f}%" for s in shares) + f" | {speedup} |")


if __name__ == "__main__":
    main()
