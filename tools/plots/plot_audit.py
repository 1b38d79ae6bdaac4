#!/usr/bin/env python3
"""Plot a `lowbit audit --csv` file: error against block size (log2 axis), one line per format,
one column of panels per input; top row mean absolute error (log scale), bottom row SQNR in dB.
A `lowbit audit --trajectory --csv` file gives loss and distance to the baseline run (torchao.adam.dense,
float32 states) against the step.

    python tools/plots/plot_audit.py audit.csv --out docs/audit/example   # writes example.png and example.svg
"""
import argparse
import csv
import math
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKERS = "osD^v<>px*h"
LINESTYLES = ["-", "--", "-.", ":"]


def read_rows(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    if not rows:
        sys.exit(f"plot_audit: {path} has no measured rows")
    return rows


def plot_trajectory(path, out, title):
    """`lowbit audit --trajectory --csv`: loss and distance to the baseline run against the step."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    formats = list(OrderedDict.fromkeys(r["format"] for r in rows))
    baseline = formats[0]  # lowbit writes the baseline's rows first
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for k, v in enumerate(formats):
        pts = [(int(r["step"]), float(r["loss"]), float(r["relative_param_distance"])) for r in rows if r["format"] == v]
        style = dict(label=v, color=f"C{k}", linestyle=LINESTYLES[k % len(LINESTYLES)], linewidth=1.6)
        axes[0].plot([p[0] for p in pts], [p[1] for p in pts], **style)
        if v != baseline:
            axes[1].plot([p[0] for p in pts], [p[2] if p[2] > 0 else float("nan") for p in pts], **style)
    axes[0].set_ylabel("loss")
    axes[1].set_ylabel(f"||W - W_base|| / ||W_base||  (base: {baseline})")
    for ax in axes:
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=9)
    fig.suptitle(title)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{out}.{ext}", dpi=110, metadata={"Date": None} if ext == "svg" else None)
    print(f"wrote {out}.png and {out}.svg")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="output of lowbit audit --csv")
    ap.add_argument("--out", required=True, help="output path without extension (.png and .svg are written)")
    ap.add_argument("--title", help="default: what the CSV holds")
    args = ap.parse_args()

    with open(args.csv, newline="") as f:
        header = next(csv.reader(f), [])
    if "step" in header:
        plot_trajectory(args.csv, args.out, args.title or "lowbit audit --trajectory: AdamW with quantized states")
        return
    rows = read_rows(args.csv)
    inputs = list(OrderedDict.fromkeys(r["input"] for r in rows))
    formats = list(OrderedDict.fromkeys(r["format"] for r in rows))
    blocks = sorted({int(r["block_size"]) for r in rows})

    fig, axes = plt.subplots(2, len(inputs), figsize=(4.6 * len(inputs) + 1.5, 7.5), squeeze=False, sharex=True)
    for col, name in enumerate(inputs):
        for k, fmt in enumerate(formats):
            pts = sorted((int(r["block_size"]), float(r["mean_abs_error"]), float(r["sqnr_db"]))
                         for r in rows if r["input"] == name and r["format"] == fmt)
            if not pts:
                continue
            xs = [p[0] for p in pts]
            # Formats that coincide (torchao.fp8 and fp8.perblock.e4m3 on finite data) stay visible:
            # each later format gets a smaller, hollow-or-filled marker and its own dash pattern.
            style = dict(marker=MARKERS[k % len(MARKERS)], label=fmt, color=f"C{k}",
                         linestyle=LINESTYLES[k % len(LINESTYLES)] if len(pts) > 1 else "none",
                         markersize=(9 - 0.7 * k) if len(pts) > 1 else 9,
                         fillstyle="none" if k % 2 else "full")
            axes[0][col].plot(xs, [p[1] for p in pts], **style)
            axes[1][col].plot(xs, [p[2] if math.isfinite(p[2]) else float("nan") for p in pts], **style)
        short = name if len(name) <= 44 else "..." + name[-41:]
        axes[0][col].set_title(short, fontsize=9)
        axes[0][col].set_yscale("log")
        axes[0][col].set_ylabel("mean |x - x^|" if col == 0 else "")
        axes[1][col].set_ylabel("SQNR (dB)" if col == 0 else "")
        axes[1][col].set_xlabel("block size")
        for row in (0, 1):
            ax = axes[row][col]
            ax.set_xscale("log", base=2)
            ax.set_xticks(blocks)
            ax.set_xticklabels([str(b) for b in blocks], rotation=45, fontsize=8)
            ax.grid(True, which="major", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="center right", fontsize=9)
    fig.suptitle(args.title or "lowbit audit: round-trip error per block size")
    fig.tight_layout(rect=(0, 0, 1 - 1.9 / fig.get_figwidth(), 0.96))
    for ext in ("png", "svg"):
        # No timestamps in the SVG: the same CSV gives the same bytes.
        fig.savefig(f"{args.out}.{ext}", dpi=110, metadata={"Date": None} if ext == "svg" else None)
    print(f"wrote {args.out}.png and {args.out}.svg")


if __name__ == "__main__":
    main()
