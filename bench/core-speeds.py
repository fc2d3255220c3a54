#!/usr/bin/env python3
"""Do this machine's cores run alike? A pipeline's devices on a CPU are its cores, and a plan that
assumes them equal puts as much on a slow one as on a fast one. On a shared VM one core can run
slower than another for minutes at a time (a neighbour on the same physical core or its cache),
more for memory-bound layers than for GEMMs; a stage thread that the scheduler puts there, or
moves there mid-run, changes speed with it. `validate --auto --bind-cores` pins the stages and
plans with each core's measured speed for that reason.

Each round trains the plain model (one stage, one micro-batch, one thread, `pipebal train
--steps 15`) pinned with `taskset` to each core this process may run on, in an order that
rotates from round to round, for a memory-bound model (AmoebaNet-D) and a GEMM-bound one (the
wide MLP). It reports each run's median step, and per model each core's median over the rounds
and the slowest core's over the fastest's.

Writes the raw medians (JSON) and the markdown summary made from them.
Usage: bench/core-speeds.py [--build build] [--rounds 6] [--allow-dirty] [--from-raw]
Run it on an otherwise idle machine, from a clean checkout (the summary names the commit)."""
import argparse
import json
import os
import statistics
import sys

import bench_support
from bench_support import run

# name, model, input shape, layers (the plain model's balance)
MODELS = [
    ("amoebanetd", "amoebanetd:L=2,D=16", "32,3,64,64", 12),
    ("mlp-wide", "mlp:layers=16,width=512", "256,512", 17),
]


def train_ms(pipebal, core, model, shape, layers, out):
    run(["taskset", "-c", str(core), pipebal, "train", "--model", model, "--input-shape", shape,
         "--balance", str(layers), "--chunks", "1", "--checkpoint", "never", "--steps", "15",
         "--quiet", "-o", out])
    with open(out) as f:
        return json.load(f)["median_step_ms"]


def measure(pipebal, args, work):
    cores = sorted(os.sched_getaffinity(0))
    doc = {"cores": cores, "rounds": []}
    for r in range(args.rounds):
        order = cores[r % len(cores):] + cores[:r % len(cores)]
        runs = []
        for name, model, shape, layers in MODELS:
            for core in order:
                ms = train_ms(pipebal, core, model, shape, layers, os.path.join(work, "run.json"))
                runs.append({"model": name, "core": core, "median_step_ms": ms})
                print(f"round {r + 1}/{args.rounds}: {name} on CPU {core}: {ms:.1f} ms",
                      file=sys.stderr, flush=True)
        doc["rounds"].append({"order": order, "runs": runs})
    return doc


def summarise(doc):
    cores = doc["cores"]
    lines = [
        "# Do the cores run alike?",
        "",
        f"Made by `bench/core-speeds.py` at commit `{doc['commit']}` on {doc['machine']}, "
        f"{doc['date']}; raw data: `core-speeds-raw.json`. Each of {len(doc['rounds'])} rounds "
        "trained each model's plain model (one stage, one micro-batch, one thread, 15 measured "
        "steps) pinned with `taskset` to each core in turn, the order rotating; times are each "
        "run's median step.",
        "",
        "| model | " + " | ".join(f"CPU {c} ms (median of rounds)" for c in cores)
        + " | slowest / fastest core | rounds (" + ", ".join(f"CPU {c}" for c in cores) + ") |",
        "| --- | " + " | ".join("---:" for _ in cores) + " | ---: | --- |",
    ]
    for name, model, shape, _ in MODELS:
        per_core = {c: [run["median_step_ms"] for rnd in doc["rounds"] for run in rnd["runs"]
                        if run["model"] == name and run["core"] == c] for c in cores}
        medians = {c: statistics.median(v) for c, v in per_core.items() if v}
        if not medians:
            continue
        rounds = "; ".join(
            ", ".join(f"{run['median_step_ms']:.1f}" for c in cores for run in rnd["runs"]
                      if run["model"] == name and run["core"] == c)
            for rnd in doc["rounds"])
        lines.append(f"| `{model}` [{shape}] | "
                     + " | ".join(f"{medians[c]:.1f}" for c in cores)
                     + f" | {max(medians.values()) / min(medians.values()):.2f} | {rounds} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    bench_support.report_main(ap, "reports/core-speeds-raw.json", "reports/core-speeds.md",
                              measure, summarise)


if __name__ == "__main__":
    main()
