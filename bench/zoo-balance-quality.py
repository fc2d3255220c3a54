#!/usr/bin/env python3
"""Quality of the baseline partitioners on real profiles: profiles each zoo model (small CPU
sizes, micro-batch = batch / 4, one thread), balances it into 2, 4 and 8 stages with every
algorithm, and reports each algorithm's bottleneck over dp's (the optimum). Raw: every plan in
reports/zoo-balance-raw.json; summary: reports/zoo-balance.md.

Usage: bench/zoo-balance-quality.py [--build build] [--allow-dirty] [--from-raw]"""
import argparse
import json
import os

import bench_support
from bench_support import run

MODELS = [
    ("mlp:layers=16,width=256", "64,256"),
    ("resnet:depth=50,width=16", "32,3,64,64"),
    ("unet:B=3,C=8", "16,3,64,64"),
    ("amoebanetd:L=3,D=16", "16,3,64,64"),
    ("gpt:layers=12,dim=128,heads=4,seq=64", "32,64"),
]
ALGORITHMS = ["dp", "blockpartition", "uniform", "parameters"]


def measure(pipebal, work):
    models = []
    for spec, shape in MODELS:
        profile = os.path.join(work, "profile.json")
        run([pipebal, "profile", "--model", spec, "--input-shape", shape, "--chunks", "4",
             "--threads", "1", "--repeat", "5", "-q", "-o", profile])
        layers = len(json.load(open(profile))["layers"])
        entry = {"model": spec, "input_shape": shape, "layers": layers, "stages": {}}
        for stages in (2, 4, 8):
            if stages > layers:
                continue
            entry["stages"][str(stages)] = {
                algorithm: json.loads(run([pipebal, "balance", profile, "--stages", str(stages),
                                           "--algorithm", algorithm, "--format", "json"]))
                for algorithm in ALGORITHMS}
        models.append(entry)
    return models


def summary(raw):
    made = raw["made"]
    lines = [
        "# Partitioners on the zoo's profiles", "",
        f"Made by `bench/zoo-balance-quality.py` at commit `{made['commit']}` on "
        f"{made['machine']}, {made['date']}; raw data (every plan): `zoo-balance-raw.json`. "
        "Each model is profiled at a small CPU size (micro-batch = batch / 4, one thread, 5 "
        "repetitions) and balanced into 2, 4 and 8 stages (GPipe, 4 micro-batches, checkpoint "
        "except_last) by every algorithm; the table gives each one's bottleneck over `dp`'s, the "
        "optimum.", "",
        "| model | layers | stages | blockpartition | uniform | parameters |",
        "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for m in raw["models"]:
        for stages, plans in m["stages"].items():
            optimum = plans["dp"]["bottleneck_ms"]
            ratios = " | ".join(f"{plans[a]['bottleneck_ms'] / optimum:.3f}"
                                for a in ALGORITHMS[1:])
            lines.append(f"| `{m['model']}` [{m['input_shape']}] | {m['layers']} | {stages} | "
                         f"{ratios} |")
    return lines


def main():
    bench_support.report_main(
        argparse.ArgumentParser(), "reports/zoo-balance-raw.json", "reports/zoo-balance.md",
        lambda pipebal, args, work: {"models": measure(pipebal, work)}, summary, meta_key="made")


if __name__ == "__main__":
    main()
