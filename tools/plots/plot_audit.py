#!/usr/bin/env python3
"""Plot a `lowbit audit --csv` file.

Default (--x bits): per input (one panel each, in a grid, titled with the input's name), the error
against the bits per element each configuration stores, one curve per format through its block sizes,
each point labelled with its block size; one legend for all panels. The error is --metric, by default
rel_l2_error: relative to the tensor's own norm, so panels of tensors of any scale read alike, and
informative on second moments, where bitsandbytes' mean relative error is not (docs/audit.md).
--x block: the earlier view, mean absolute error and SQNR against the block size, a column per input.

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
    save(fig, out)


# The measures --metric takes: the CSV's column, its axis label, and whether a log axis suits it.
METRICS = {
    "rel_l2_error": ("relative L2 error ||x - x^|| / ||x||", True),
    "mean_abs_error": ("mean |x - x^|", True),
    "mean_rel_error": ("mean relative error (bitsandbytes' definition)", True),
    "max_abs_error": ("max |x - x^|", True),
    "sqnr_db": ("SQNR (dB)", False),
}


def short_title(name, width=48):
    return name if len(name) <= width else "..." + name[-(width - 3):]


def state_file(inputs):
    """The --state file every input is a tensor of ('FILE:tensor'), or None: panels are then titled
    with the tensor names alone, the file once above them."""
    files = {name.rsplit(":", 1)[0] for name in inputs if ":" in name}
    if len(files) != 1 or not all(":" in name for name in inputs):
        return None
    file = files.pop()
    return file if file.endswith(".safetensors") else None


def format_style(k, points):
    """Formats that coincide (torchao.fp8 and fp8.perblock.e4m3 on finite data) stay visible: each
    later format gets a smaller, hollow-or-filled marker and its own dash pattern."""
    return dict(marker=MARKERS[k % len(MARKERS)], color=f"C{k % 10}",
                linestyle=LINESTYLES[k % len(LINESTYLES)] if points > 1 else "none",
                markersize=(9 - 0.6 * (k % 6)) if points > 1 else 9,
                fillstyle="none" if k % 2 else "full")


def shared_legend(fig, axes_list, ncol):
    handles, labels = [], []
    for ax in axes_list:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=9, frameon=False)
    return len(labels)


def plot_bits(rows, out, title, metric):
    """Error against bits per element: a panel per input, a curve per format, block sizes on the points."""
    if "bits_per_element" not in rows[0]:
        sys.exit("plot_audit: the CSV has no bits_per_element column (written by lowbit audit since it reports "
                 "bits per element); rerun the audit, or use --x block")
    if metric not in rows[0]:
        sys.exit(f"plot_audit: the CSV has no column {metric}")
    label, log = METRICS[metric]
    inputs = list(OrderedDict.fromkeys(r["input"] for r in rows))
    formats = list(OrderedDict.fromkeys(r["format"] for r in rows))
    state = state_file(inputs)
    cols = min(len(inputs), 2 if len(inputs) <= 4 else 3 if len(inputs) <= 9 else 4)
    nrows = math.ceil(len(inputs) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6.4 * cols, 4.6 * nrows + 1.4), squeeze=False)
    for idx, name in enumerate(inputs):
        ax = axes[idx // cols][idx % cols]
        labelled = set()  # one block-size label per spot: coinciding formats would print it twice
        mine = [r for r in rows if r["input"] == name]
        # An exact round trip (error 0: an already quantized state, docs/audit.md) has no place on a log
        # axis: it is drawn as a downward triangle on a floor below the panel's smallest error.
        positive = [float(r[metric]) for r in mine if math.isfinite(float(r[metric])) and float(r[metric]) > 0]
        floor = min(positive) / 3 if positive else 1e-12
        for k, fmt in enumerate(formats):
            pts = sorted((float(r["bits_per_element"]), float(r[metric]), int(r["block_size"]))
                         for r in mine if r["format"] == fmt)
            pts = [p for p in pts if math.isfinite(p[1])]
            if log:
                exact = [p for p in pts if p[1] <= 0]
                pts = [p for p in pts if p[1] > 0]
                for x, _, block in exact:
                    ax.plot([x], [floor], marker="v", markersize=9, color=f"C{k % 10}", linestyle="none")
                    ax.annotate(f"{block}: exact", (x, floor), textcoords="offset points", xytext=(4, 3), fontsize=6.5,
                                color=f"C{k % 10}")
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=fmt, **format_style(k, len(pts)))
            for x, y, block in pts:
                spot = (round(x, 2), f"{y:.3g}")
                if spot in labelled:
                    continue
                labelled.add(spot)
                ax.annotate(str(block), (x, y), textcoords="offset points", xytext=(4, 3), fontsize=6.5, color=f"C{k % 10}")
        ax.set_title(short_title(name[len(state) + 1:] if state else name), fontsize=10)
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("bits per element (codes + scales + side tensors)", fontsize=8)
        ax.set_ylabel(label if idx % cols == 0 else "", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(True, which="both", alpha=0.25)
    for idx in range(len(inputs), nrows * cols):
        axes[idx // cols][idx % cols].set_visible(False)
    used = [axes[i // cols][i % cols] for i in range(len(inputs))]
    count = shared_legend(fig, used, ncol=min(len(formats), 4))
    legend_rows = math.ceil(count / min(len(formats), 4))
    fig.suptitle(title + (f"\n{short_title(state, 90)}" if state else "") + "\n(numbers at the points: block size)",
                 fontsize=11)
    bottom = (0.35 + 0.25 * legend_rows) / fig.get_figheight()
    fig.tight_layout(rect=(0, bottom, 1, 1))
    save(fig, out)


def plot_blocks(rows, out, title):
    """Mean absolute error (log scale, top) and SQNR (bottom) against the block size, a column per input."""
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
            style = format_style(k, len(pts))
            axes[0][col].plot(xs, [p[1] for p in pts], label=fmt, **style)
            axes[1][col].plot(xs, [p[2] if math.isfinite(p[2]) else float("nan") for p in pts], label=fmt, **style)
        axes[0][col].set_title(short_title(name, 44), fontsize=9)
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
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1 - 1.9 / fig.get_figwidth(), 0.96))
    save(fig, out)


def save(fig, out):
    for ext in ("png", "svg"):
        # No timestamps in the SVG: the same CSV gives the same bytes.
        fig.savefig(f"{out}.{ext}", dpi=110, metadata={"Date": None} if ext == "svg" else None)
    print(f"wrote {out}.png and {out}.svg")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="output of lowbit audit --csv")
    ap.add_argument("--out", required=True, help="output path without extension (.png and .svg are written)")
    ap.add_argument("--title", help="default: what the CSV holds")
    ap.add_argument("--x", choices=("bits", "block"), default="bits",
                    help="bits: error against bits per element (default); block: error and SQNR against block size")
    ap.add_argument("--metric", choices=sorted(METRICS), default="rel_l2_error",
                    help="--x bits: the error drawn (default rel_l2_error)")
    args = ap.parse_args()

    with open(args.csv, newline="") as f:
        header = next(csv.reader(f), [])
    if "step" in header:
        plot_trajectory(args.csv, args.out, args.title or "lowbit audit --trajectory: AdamW with quantized states")
        return
    rows = read_rows(args.csv)
    if args.x == "bits":
        plot_bits(rows, args.out, args.title or "lowbit audit: error against bits per element", args.metric)
    else:
        plot_blocks(rows, args.out, args.title or "lowbit audit: round-trip error per block size")


if __name__ == "__main__":
    main()
