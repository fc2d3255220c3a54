#!/usr/bin/env python3
"""Prediction accuracy on the zoo models: `pipebal validate --stages 2` on each, --runs times (in
turns, so that a slow spell of a shared machine does not fall on one model only). Every
validation.json is kept as reports/validation-accuracy/NAME-RUN.json; the summary made from them
is reports/validation-accuracy.md: one row per run and candidate balance (predicted beside
measured step time, and speed-up over the same balance run as one micro-batch) and a summary per
model. About one minute per run on 2 cores.

Usage: bench/validation-accuracy.py [--build build] [--runs 3] [--allow-dirty]"""
import argparse
import json
import os
import shutil
import statistics
import tempfile

from bench_support import binary, meta, run, write_json, write_text

MODELS = [
    ("gpt", "gpt:layers=6,dim=128,heads=4,seq=64,vocab=1000,dropout=0", "64,64", 4),
    ("resnet", "resnet:depth=50,width=16,classes=10", "32,3,64,64", 8),
    ("unet", "unet:B=3,C=8", "32,3,64,64", 8),
    ("amoebanetd", "amoebanetd:L=2,D=16,classes=10", "32,3,64,64", 8),
]
OUT = "reports/validation-accuracy"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--allow-dirty", action="store_true")
    args = ap.parse_args()
    made = meta(args.allow_dirty)
    pipebal = binary(args.build, "tools/pipebal", args.allow_dirty)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    with tempfile.TemporaryDirectory() as work:
        for r in range(1, args.runs + 1):
            for name, spec, shape, chunks in MODELS:
                out = os.path.join(work, name)
                run([pipebal, "validate", "--model", spec, "--input-shape", shape, "--stages", "2",
                     "--chunks", str(chunks), "--steps", "7", "-o", out])
                shutil.copy(os.path.join(out, "validation.json"), f"{OUT}/{name}-{r}.json")
    write_json(f"{OUT}/made.json", {**made, "runs": args.runs})

    rows, summary = [], []
    for name, _, _, _ in MODELS:
        steps, speedups = [], []
        for r in range(1, args.runs + 1):
            v = json.load(open(f"{OUT}/{name}-{r}.json"))
            for c in v["candidates"]:
                p, m = c["predicted"], c["measured"]
                steps.append(abs(c["step_error"]))
                speedups.append(abs(c["speedup_error"]))
                rows.append(f"| `{name}` | {r} | {', '.join(c['algorithms'])} | {c['balance']} "
                            f"| {p['step_ms']:.1f} | {m['step_ms']:.1f} | {c['step_error']:+.1%} "
                            f"| {p['speedup']:.2f} | {m['speedup']:.2f} | "
                            f"{c['speedup_error']:+.1%} |")
        summary.append(f"| `{v['model']}` {v['input_shape']}, {v['chunks']} chunks | {len(steps)} "
                       f"| {statistics.median(steps):.1%} | {sum(e <= 0.15 for e in steps)}/"
                       f"{len(steps)} | {statistics.median(speedups):.1%} | "
                       f"{sum(e <= 0.10 for e in speedups)}/{len(speedups)} |")
    lines = [
        "# Prediction accuracy: `pipebal validate` on the zoo models", "",
        f"Made by `bench/validation-accuracy.py` at commit `{made['commit']}` on "
        f"{made['machine']}, {made['date']} (raw documents: `validation-accuracy/NAME-RUN.json`). "
        f"Each model is validated {args.runs} times, in turns, with `pipebal validate --stages 2 "
        "--steps 7` (GPipe, checkpoint except_last, 1 thread per stage). The prediction comes "
        "from a profile at the micro-batch size, next to one co-runner thread, and for the "
        "one-micro-batch baseline from a profile of the whole batch. The measurement is the "
        "median of 7 steps after two warm-up steps; each candidate's pipelined and "
        "one-micro-batch runs are trained step by step in turns. Speed-up is over the same "
        "balance run as one micro-batch. Every distinct balance the candidates produced is a "
        "row. How the prediction got here: [`validation-history.md`](validation-history.md).", "",
        "| model | run | candidate | balance | predicted ms | measured ms | step error "
        "| predicted × | measured × | speed-up error |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |", *rows, "",
        "| model | rows | median \\|step error\\| | within 15% | median \\|speed-up error\\| "
        "| within 10% |",
        "| --- | ---: | ---: | ---: | ---: | ---: |", *summary]
    write_text("reports/validation-accuracy.md", lines)


if __name__ == "__main__":
    main()
