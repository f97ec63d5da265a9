#!/usr/bin/python3
"""Markdown tables from conv_peak --onednn's JSON lines (--json-out): for each network, each
ordinary convolution's three passes on our CPU backend and on oneDNN's primitive (made for NCHW;
in its own layouts with the reorders from and to NCHW timed; its own layouts without them), the
ratio of oneDNN's best case over ours, and the scratchpads; then each network's totals, every
convolution weighted by the number of times the network has it, and the passes where oneDNN is
furthest ahead of ours and furthest behind. The backward-data pass of a convolution that reads the
network's input (the stem) is listed but left out of the totals and the extremes: training never
runs it (no gradient is wanted for the input: Conv2D::backward passes an empty dx).

usage: conv_onednn_table.py RESULTS.jsonl > TABLE.md
"""
import collections
import json
import sys

PASSES = ("forward", "backward_data", "backward_filter")
SHORT = {"forward": "fwd", "backward_data": "bwd-data", "backward_filter": "bwd-filter"}
WAYS = (("ms", "ours"), ("onednn_ms", "oneDNN NCHW"), ("onednn_reordered_ms", "oneDNN reordered"),
        ("onednn_any_ms", "oneDNN best layout"))


def size(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def reads_input(d):
    """Whether the convolution reads the network's input: "[3x224x224] -> ..." at input 3x224x224:16."""
    return d["conv"].startswith("[" + d["input"].split(":")[0] + "]")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    peaks, nets = [], collections.OrderedDict()
    with open(sys.argv[1]) as f:
        for line in f:
            d = json.loads(line)
            if d["kind"] == "peak":
                peaks.append(d)
            elif d["kind"] == "conv" and "onednn_ms" in d:  # the chosen kernel's line, not --compare's
                d["in_training"] = not (d["pass"] == "backward_data" and reads_input(d))
                nets.setdefault((d["model"], d["input"]), collections.OrderedDict())[(d["conv"], d["pass"])] = d
    for p in peaks:
        print(f"- Peak on {p['threads']} threads: fp32 {p['fp32_gflops']:.0f} GFLOP/s ({p['device']}); "
              f"{p.get('onednn', 'no oneDNN')}")
    print()
    print("ms are medians; \"best / ours\" is oneDNN's best layout's time over ours (below 1: oneDNN faster); "
          "scratchpad: the convolution primitive's, NCHW / best layout; diff: max |oneDNN - ours| / max |ours| "
          "(NCHW, best layout).")
    for (model, spec), lines in nets.items():
        print(f"\n### {model} at {spec}\n")
        print("| convolution | times | ours | pass | ours ms | oneDNN NCHW ms | reordered ms | best layout ms "
              "| best / ours | oneDNN (NCHW; best) | scratchpad | diff |")
        print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |")
        for (conv, pass_), d in lines.items():
            name = SHORT[pass_] + ("" if d["in_training"] else " (not in training)")
            print(f"| {conv} | {d['times_in_network']} | {d['kernel']} | {name} | {d['ms']:.2f} | "
                  f"{d['onednn_ms']:.2f} | {d['onednn_reordered_ms']:.2f} | {d['onednn_any_ms']:.2f} | "
                  f"{d['onednn_any_ms'] / d['ms']:.2f} | {d['onednn_impl']}; {d['onednn_any_impl']} | "
                  f"{size(d['onednn_scratchpad_bytes'])} / {size(d['onednn_any_scratchpad_bytes'])} | "
                  f"{d['onednn_max_rel_diff']:.0e}, {d['onednn_any_max_rel_diff']:.0e} |")

    print("\n### Totals: every convolution times the number of times the network has it (ms), "
          "the stem's backward-data left out\n")
    print("| network | pass | " + " | ".join(name for _, name in WAYS)
          + " | per layer the faster of ours and oneDNN's best | NCHW / ours | reordered / ours | best / ours |")
    print("| --- | --- |" + " ---: |" * (len(WAYS) + 4))
    for (model, spec), lines in nets.items():
        for pass_ in PASSES + ("all",):
            chosen = [d for (_, p), d in lines.items() if pass_ in ("all", p) and d["in_training"]]
            sums = [sum(d["times_in_network"] * d[key] for d in chosen) for key, _ in WAYS]
            faster = sum(d["times_in_network"] * min(d["ms"], d["onednn_any_ms"]) for d in chosen)
            cells = [f"{s:.1f}" for s in sums] + [f"{faster:.1f}"] + [f"{s / sums[0]:.2f}" for s in sums[1:]]
            label = "**all**" if pass_ == "all" else SHORT[pass_]
            print(f"| {model} at {spec} | {label} | " + " | ".join(cells) + " |")

    print("\n### Where oneDNN's best layout is furthest ahead of ours and furthest behind (per pass)\n")
    every = [(d["onednn_any_ms"] / d["ms"], model, spec, d) for (model, spec), lines in nets.items()
             for d in lines.values() if d["in_training"]]
    every.sort(key=lambda e: e[0])
    def show(title, ratio, model, spec, d):
        weighted = d["times_in_network"] * (d["onednn_any_ms"] - d["ms"])
        print(f"- {title}: {model} at {spec}, {d['conv']} {SHORT[d['pass']]} (x{d['times_in_network']}): "
              f"oneDNN {d['onednn_any_ms']:.2f} ms ({d['onednn_any_impl']}) against ours {d['ms']:.2f} ms "
              f"({d['kernel']}): {ratio:.2f}, {weighted:+.1f} ms in the network")

    for title, chosen in (("ahead", every[:3]), ("behind", every[::-1][:3])):
        for e in chosen:
            show(title, *e)
    print("\nBy time in the network (times x (oneDNN's best - ours)):\n")
    every.sort(key=lambda e: e[3]["times_in_network"] * (e[3]["onednn_any_ms"] - e[3]["ms"]))
    for title, chosen in (("ahead", every[:3]), ("behind", every[::-1][:3])):
        for e in chosen:
            show(title, *e)


if __name__ == "__main__":
    main()
