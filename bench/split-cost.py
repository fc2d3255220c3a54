#!/usr/bin/env python3
"""What splitting the backward costs (zb-h1): the profile's B + W over the backward whole, and the
engine's, on the stage that pays for it.

zb-h1 gains where the bubble it fills is worth more than what splitting the backward into B and W
adds. The balancer takes that cost from the profile (per layer `input_grad_ms` + `weight_ms`
against `backward_ms`); the engine pays it on each stage whose input needs a gradient (on the
first stage B is empty and W the whole backward, which costs nothing extra). For the GPT of
`bench/schedules.py` on 2 devices, its last stage (the dp balance's) is that stage. This script
measures, for each micro-batch count:

- profile: `--profiles` separate `pipebal profile` processes (one thread, one co-runner, as the
  schedules report profiles), each giving the last stage's sum of B + W over its sum of backward;
- engine: `--rounds` rounds, each training the 1F1B plan and the zb-h1 plan with W right after B
  (`--weight-delays 0,0`) one after the other (`pipebal train --trace`), and taking from each
  trace (the median step) the last stage's median B action (1F1B: the backward whole, with the
  loss) and its median B + W (zb-h1): their ratio per round.

Writes the raw measurements (JSON) and the markdown summary made from them.
Usage: bench/split-cost.py [--build build] [--profiles 8] [--rounds 8] [--allow-dirty]
       [--from-raw]
(--from-raw writes the summary again from the committed raw data, measuring nothing.)"""
import argparse
import json
import os
import statistics
import sys

import bench_support
from bench_support import run

MODEL = "gpt:layers=6,dim=128,heads=4,seq=64,vocab=1000,dropout=0"
CHUNKS = [4, 8]
RAW = "reports/split-cost-raw.json"
MD = "reports/split-cost.md"


def profile_ratio(profile, first_layer):
    """The last stage's B + W over its backward whole, from a profile's per-layer medians."""
    layers = profile["layers"][first_layer:]
    split = sum(layer["input_grad_ms"] + layer["weight_ms"] for layer in layers)
    whole = sum(layer["backward_ms"] for layer in layers)
    return {"split_ms": split, "whole_ms": whole, "ratio": split / whole}


def last_stage_actions(trace_path, stage):
    """The median duration (ms) of each kind of action (F, R, B, W) of `stage` in a trace."""
    durations = {}
    for event in json.load(open(trace_path))["traceEvents"]:
        if event.get("ph") == "X" and event.get("tid") == stage:
            durations.setdefault(event["cat"], []).append(event["dur"] / 1000)
    return {kind: statistics.median(values) for kind, values in durations.items()}


def measure(pipebal, profiles, rounds, work):
    cases = []
    for chunks in CHUNKS:
        common = ["--chunks", str(chunks)]
        paths = [os.path.join(work, f"profile-{chunks}-{p}.json") for p in range(profiles)]
        for path in paths:
            run([pipebal, "profile", "--model", MODEL, *common, "--threads", "1", "--co-runners",
                 "1", "-q", "-o", path])
        samples = [json.load(open(path)) for path in paths]
        plans = {}  # balanced on the last profile
        for name, flags in [("1f1b", ["--schedule", "1f1b"]),
                            ("zb-h1", ["--schedule", "zb-h1", "--weight-delays", "0,0"])]:
            plans[name] = os.path.join(work, f"{name}-{chunks}.json")
            run([pipebal, "balance", paths[-1], "--stages", "2", *common, *flags, "-o",
                 plans[name]])
        balance = json.load(open(plans["1f1b"]))["balance"]
        last = len(balance) - 1
        first_layer = sum(balance[:-1])
        case = {"chunks": chunks, "balance": balance,
                "profiles": [profile_ratio(s, first_layer) for s in samples], "rounds": []}
        for r in range(rounds):
            actions = {}
            for name in ("1f1b", "zb-h1"):
                trace = os.path.join(work, f"trace-{name}.json")
                run([pipebal, "train", "--model", MODEL, "--plan", plans[name], "--steps", "4",
                     "-q", "--trace", trace])
                actions[name] = last_stage_actions(trace, last)
            whole = actions["1f1b"]["B"]
            split = actions["zb-h1"]["B"] + actions["zb-h1"].get("W", 0.0)
            case["rounds"].append({"whole_ms": whole, "b_ms": actions["zb-h1"]["B"],
                                   "w_ms": actions["zb-h1"].get("W", 0.0),
                                   "ratio": split / whole})
        cases.append(case)
        print(f"{chunks} micro-batches done", file=sys.stderr)
    return cases


def summary(raw):
    lines = [
        "# What splitting the backward costs: profile against engine",
        "",
        f"Made by `bench/split-cost.py` at commit `{raw['commit']}` on {raw['machine']}, "
        f"{raw['date']}; raw data: `split-cost-raw.json`. The GPT `{MODEL}` at its default input "
        "on 2 devices, balanced by `pipebal balance` (1F1B); its last stage, whose input needs a "
        "gradient, is the one where splitting the backward into B and W costs anything. "
        f"Profile: {raw['profiles']} `pipebal profile` processes (one thread, one co-runner), "
        "each giving the last stage's layers' B + W (`input_grad_ms` + `weight_ms`) over their "
        f"backward whole (`backward_ms`). Engine: {raw['rounds']} rounds, each training the 1F1B "
        "plan and zb-h1 with W right after B (`--weight-delays 0,0`) for 4 steps, one after the "
        "other, the last stage's median B + W in the median step's trace over 1F1B's median B "
        "(the backward whole). Ratios above 1 are what the split adds; the balancer plans with the "
        "profile's.",
        "",
        "| micro-batches | last stage's layers | profile: B + W over whole, each process | median "
        "| engine: B + W over whole, each round | median | engine B, W, whole (median ms) |",
        "| ---: | --- | --- | ---: | --- | ---: | --- |",
    ]
    for case in raw["cases"]:
        profile = [p["ratio"] for p in case["profiles"]]
        engine = [r["ratio"] for r in case["rounds"]]
        first = sum(case["balance"][:-1])
        med = lambda key: statistics.median(r[key] for r in case["rounds"])  # noqa: E731
        lines.append(
            f"| {case['chunks']} | {first}-{sum(case['balance']) - 1} | "
            f"{', '.join(f'{x:.3f}' for x in profile)} | {statistics.median(profile):.3f} | "
            f"{', '.join(f'{x:.3f}' for x in engine)} | {statistics.median(engine):.3f} | "
            f"{med('b_ms'):.1f}, {med('w_ms'):.1f}, {med('whole_ms'):.1f} |")
    lines.append("")
    for case in raw["cases"]:
        profile = [p["ratio"] for p in case["profiles"]]
        engine = [r["ratio"] for r in case["rounds"]]
        lines.append(
            f"- {case['chunks']} micro-batches: the profiles found the split adding "
            f"{100 * (min(profile) - 1):+.1f}% to {100 * (max(profile) - 1):+.1f}% "
            f"(median {100 * (statistics.median(profile) - 1):+.1f}%), the engine paid "
            f"{100 * (min(engine) - 1):+.1f}% to {100 * (max(engine) - 1):+.1f}% "
            f"(median {100 * (statistics.median(engine) - 1):+.1f}%). The backward whole alone "
            f"moved as much from one process to the next: "
            f"{min(p['whole_ms'] for p in case['profiles']):.1f} to "
            f"{max(p['whole_ms'] for p in case['profiles']):.1f} ms profiled, "
            f"{min(r['whole_ms'] for r in case['rounds']):.1f} to "
            f"{max(r['whole_ms'] for r in case['rounds']):.1f} ms in the engine.")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiles", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=8)
    bench_support.report_main(
        ap, RAW, MD,
        lambda pipebal, args, work: {
            "profiles": args.profiles, "rounds": args.rounds,
            "cases": measure(pipebal, args.profiles, args.rounds, work)},
        summary)


if __name__ == "__main__":
    main()
