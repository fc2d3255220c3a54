#!/usr/bin/env python3
"""Dropout in a TorchScript model no longer costs the pipeline its overlap. Three scripted CNNs
(8 blocks of Conv2d(16, 16, 3), ReLU, dropout; a pooling head), made here with PyTorch: p = 0,
nn.Dropout(0.1) (which pipebal moves onto each stage's own generator) and nn.AlphaDropout(0.1)
(left on ATen's process-wide generator, so its stages take turns under a lock). Each trains in 2
stages of one thread with 8 micro-batches and with 1 (`pipebal train`, the same balance), the six
runs in turn, --rounds times; the speed-up is the 1-micro-batch step over the 8-micro-batch step
of the same round, its median reported.

Writes reports/script-dropout-raw.json and reports/script-dropout.md.
Usage: bench/script-dropout.py [--build build] [--rounds 5] [--steps 10] [--allow-dirty]
       [--from-raw]"""
import argparse
import json
import os
import statistics

import bench_support
from bench_support import run

PYTHON = "/usr/bin/python3"  # Debian's, with torch
MAKE_MODEL = """
import sys, torch
from torch import nn
kind, p, path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
drop = {"dropout": nn.Dropout, "alpha": nn.AlphaDropout}[kind]
layers = []
for _ in range(8):
    layers += [nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), drop(p)]
head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)]
torch.jit.script(nn.Sequential(*layers, *head)).save(path)
"""
MODELS = [("no dropout (p = 0)", "dropout", 0.0), ("nn.Dropout(0.1)", "dropout", 0.1),
          ("nn.AlphaDropout(0.1)", "alpha", 0.1)]
BALANCE = "13,14"
SHAPE = "64,16,32,32"


def measure(pipebal, args, work):
    raw = {"balance": BALANCE, "input_shape": SHAPE, "steps": args.steps, "rounds": [],
           "models": [name for name, _, _ in MODELS]}
    paths = []
    for i, (_, kind, p) in enumerate(MODELS):
        paths.append(os.path.join(work, f"model{i}.pt"))
        run([PYTHON, "-c", MAKE_MODEL, kind, str(p), paths[-1]])
    for _ in range(args.rounds):
        row = {}
        for (name, _, _), path in zip(MODELS, paths):
            for chunks in (8, 1):
                out = os.path.join(work, "run.json")
                run([pipebal, "train", "--model", path, "--input-shape", SHAPE, "--balance",
                     BALANCE, "--chunks", str(chunks), "--steps", str(args.steps), "-q", "-o",
                     out])
                row[f"{name}, {chunks}"] = json.load(open(out))["median_step_ms"]
        raw["rounds"].append(row)
    return raw


def summary(raw):
    made = raw["made"]
    steps = raw.get("steps", 10)  # raw data from before the count was recorded: the default
    lines = [
        "# Dropout in TorchScript models keeps the overlap", "",
        f"Made by `bench/script-dropout.py` at commit `{made['commit']}` on {made['machine']}, "
        f"{made['date']}; raw data: `script-dropout-raw.json`. Scripted CNNs (8 blocks of "
        "Conv2d(16, 16, 3), ReLU, dropout; a pooling head) on a batch of 64 images of "
        "16×32×32, 2 stages of one thread "
        f"([{raw['balance']}]), 8 micro-batches against 1, {len(raw['rounds'])} rounds of the six "
        f"runs in turn, each the median of {steps} steps; the speed-up is per round, its median "
        "given. nn.Dropout draws from each stage's own generator (pipebal rewrites it, "
        "`pipeline/script_dropout.h`); nn.AlphaDropout is left on ATen's process-wide "
        "generator, so its stages take turns under a lock.", "",
        "| model | 1 micro-batch ms | 8 micro-batches ms | speed-up | vs p = 0 |",
        "| --- | ---: | ---: | ---: | ---: |"]
    speedups = {}
    for name in raw["models"]:
        speedups[name] = statistics.median(r[f"{name}, 1"] / r[f"{name}, 8"]
                                           for r in raw["rounds"])
    for name in raw["models"]:
        one = statistics.median(r[f"{name}, 1"] for r in raw["rounds"])
        eight = statistics.median(r[f"{name}, 8"] for r in raw["rounds"])
        lines.append(f"| {name} | {one:.1f} | {eight:.1f} | {speedups[name]:.2f}x | "
                     f"{speedups[name] / speedups[raw['models'][0]]:.3f} |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    bench_support.report_main(ap, "reports/script-dropout-raw.json", "reports/script-dropout.md",
                              measure, summary, meta_key="made")


if __name__ == "__main__":
    main()
