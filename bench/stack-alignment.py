#!/usr/bin/env python3
"""What the stack's alignment does to the profile and to the engine (common/aligned_stack.h).

Some of LibTorch's CPU kernels cost more or less with where the stack pointer they start from
falls modulo 32 bytes. A process's main thread starts its stack where the environment's size and
address randomisation put it; the engine's stage threads start theirs aligned. pipebal runs
autograd at one alignment everywhere (PIPEBAL_STACK_OFFSET bytes below a 64-byte boundary, or
`off`). This script measures, for each offset and with it off:

- profile: `pipebal profile` (one thread, no co-runner) of the GPT of `bench/schedules.py` at 8
  micro-batches and of its U-Net, each run under `setarch -R` (no address randomisation) with the
  environment padded by 0, 16, 32 and 48 bytes: four known positions of the main thread's stack.
  From each: the GPT's last stage (layers 4-8, the dp balance's on 2 devices) backward whole,
  B and W, and each model's forward and backward totals;
- engine: `--rounds` rounds of training the GPT's 1F1B plan and its zb-h1 plan with W right after
  B (`--weight-delays 0,0`) for 4 steps (`pipebal train --trace`): the median step, and the last
  stage's median actions in the trace.

Rounds interleave the offsets (and the stack positions), so a machine whose speed drifts moves
them alike. Writes the raw measurements (JSON) and the markdown summary made from them.
Usage: bench/stack-alignment.py [--build build] [--rounds 4] [--engine-rounds 6]
       [--allow-dirty] [--from-raw]
(--from-raw writes the summary again from the committed raw data, measuring nothing.)"""
import argparse
import json
import os
import statistics

import bench_support
from bench_support import run

GPT = "gpt:layers=6,dim=128,heads=4,seq=64,vocab=1000,dropout=0"
UNET = "unet:B=2,C=16"
CHUNKS = 8
LAST_STAGE = 4  # the GPT's last stage on 2 devices starts at layer 4 (its dp balance, 1F1B)
OFFSETS = ["off", "0", "16", "32", "48"]
PADS = [0, 16, 32, 48]
RAW = "reports/stack-alignment-raw.json"
MD = "reports/stack-alignment.md"


def env_with(offset, pad):
    env = dict(os.environ, PIPEBAL_STACK_OFFSET=offset)
    env["PIPEBAL_BENCH_PAD"] = "x" * pad  # moves the main thread's stack by `pad` bytes
    return env


def profile(pipebal, model, offset, pad, path):
    run(["setarch", "-R", pipebal, "profile", "--model", model, "--chunks", str(CHUNKS),
         "--threads", "1", "--co-runners", "0", "-q", "-o", path], env=env_with(offset, pad))
    layers = json.load(open(path))["layers"]
    total = lambda key, ls: sum(layer[key] for layer in ls)  # noqa: E731
    out = {"forward_ms": total("forward_ms", layers), "backward_ms": total("backward_ms", layers)}
    if model == GPT:
        last = layers[LAST_STAGE:]
        out.update(last_whole_ms=total("backward_ms", last), last_b_ms=total("input_grad_ms", last),
                   last_w_ms=total("weight_ms", last))
    return out


def train(pipebal, plan, offset, work):
    trace, record = os.path.join(work, "trace.json"), os.path.join(work, "run.json")
    run([pipebal, "train", "--model", GPT, "--plan", plan, "--steps", "4", "-q", "--trace", trace,
         "-o", record], env=env_with(offset, 0))
    durations = {}
    for event in json.load(open(trace))["traceEvents"]:
        if event.get("ph") == "X" and event.get("tid") == 1:
            durations.setdefault(event["cat"], []).append(event["dur"] / 1000)
    actions = {kind: statistics.median(values) for kind, values in durations.items()}
    return {"step_ms": json.load(open(record))["median_step_ms"], "b_ms": actions["B"],
            "w_ms": actions.get("W", 0.0)}


def measure(pipebal, rounds, engine_rounds, work):
    path = os.path.join(work, "profile.json")
    profiles = {offset: [] for offset in OFFSETS}
    for r in range(rounds):
        for pad in PADS:
            for offset in OFFSETS:
                gpt = profile(pipebal, GPT, offset, pad, path)
                unet = profile(pipebal, UNET, offset, pad, path)
                profiles[offset].append({"round": r, "pad": pad, "gpt": gpt, "unet": unet})
    # The plans, balanced once on a default profile, are the same work for every offset.
    run([pipebal, "profile", "--model", GPT, "--chunks", str(CHUNKS), "--threads", "1",
         "--co-runners", "1", "-q", "-o", path])
    plans = {}
    for name, flags in [("1f1b", ["--schedule", "1f1b"]),
                        ("zb-h1", ["--schedule", "zb-h1", "--weight-delays", "0,0"])]:
        plans[name] = os.path.join(work, f"{name}.json")
        run([pipebal, "balance", path, "--stages", "2", "--chunks", str(CHUNKS), *flags, "-o",
             plans[name]])
    balance = json.load(open(plans["1f1b"]))["balance"]
    if sum(balance[:-1]) != LAST_STAGE:
        raise SystemExit(f"the GPT's 1F1B balance is {balance}, not a last stage from layer "
                         f"{LAST_STAGE}: update LAST_STAGE")
    engine = {offset: [] for offset in OFFSETS}
    for r in range(engine_rounds):
        for offset in OFFSETS:
            engine[offset].append({name: train(pipebal, plan, offset, work)
                                   for name, plan in plans.items()})
    return {"balance": balance, "profiles": profiles, "engine": engine}


def med(values):
    return statistics.median(values)


def summary(raw):
    lines = [
        "# The stack's alignment: profile and engine",
        "",
        f"Made by `bench/stack-alignment.py` at commit `{raw['commit']}` on {raw['machine']}, "
        f"{raw['date']}; raw data: `stack-alignment-raw.json`. `PIPEBAL_STACK_OFFSET` sets how "
        "far below a 64-byte boundary autograd's CPU kernels start (`common/aligned_stack.h`; "
        "`off`: wherever the calling thread's stack is). Profile: `pipebal profile` (one thread) "
        f"of the GPT `{GPT}` and the U-Net `{UNET}` at {CHUNKS} micro-batches, without address "
        f"randomisation, the environment padded by {', '.join(map(str, PADS))} bytes (four "
        f"positions of the main thread's stack), {raw['rounds']} rounds: medians over the "
        "processes whose main stack starts at 0 (pads 0, 32) and at 16 (pads 16, 48) modulo 32, "
        "then over all. The GPT's last stage on 2 devices (layers "
        f"{LAST_STAGE}-8) is where zb-h1 splits the backward into B and W. Engine: "
        f"{raw['engine_rounds']} rounds of training the GPT's 1F1B and zb-h1 (W right after B) "
        "plans for 4 steps: medians over rounds of the median step and of the last stage's "
        "actions. Rounds interleave the offsets.",
        "",
        "| offset | GPT last stage's backward whole (ms): main stack at 0, at 16 | B: at 0, at 16 "
        "| W | B + W over whole | GPT forward, backward (all layers) | U-Net forward, backward |",
        "| --- | --- | --- | ---: | ---: | --- | --- |",
    ]
    for offset in OFFSETS:
        ps = raw["profiles"][offset]
        at = lambda mod, key: med(p["gpt"][key] for p in ps if p["pad"] % 32 == mod)  # noqa
        g = lambda key: med(p["gpt"][key] for p in ps)  # noqa: E731
        u = lambda key: med(p["unet"][key] for p in ps)  # noqa: E731
        ratio = med((p["gpt"]["last_b_ms"] + p["gpt"]["last_w_ms"]) / p["gpt"]["last_whole_ms"]
                    for p in ps)
        lines.append(
            f"| {offset} | {at(0, 'last_whole_ms'):.2f}, {at(16, 'last_whole_ms'):.2f} | "
            f"{at(0, 'last_b_ms'):.2f}, {at(16, 'last_b_ms'):.2f} | {g('last_w_ms'):.2f} | "
            f"{ratio:.3f} | {g('forward_ms'):.2f}, {g('backward_ms'):.2f} | "
            f"{u('forward_ms'):.2f}, {u('backward_ms'):.2f} |")
    lines += [
        "",
        "| offset | engine: 1F1B step (ms) | zb-h1 step | last stage's B (1F1B, the whole) | "
        "zb-h1's B | W | B + W over whole |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for offset in OFFSETS:
        rounds = raw["engine"][offset]
        e = lambda name, key: med(r[name][key] for r in rounds)  # noqa: E731
        whole = e("1f1b", "b_ms")
        lines.append(
            f"| {offset} | {e('1f1b', 'step_ms'):.1f} | {e('zb-h1', 'step_ms'):.1f} | "
            f"{whole:.2f} | {e('zb-h1', 'b_ms'):.2f} | {e('zb-h1', 'w_ms'):.2f} | "
            f"{(e('zb-h1', 'b_ms') + e('zb-h1', 'w_ms')) / whole:.3f} |")
    lines.append("")
    ratio = lambda ps: med((p["gpt"]["last_b_ms"] + p["gpt"]["last_w_ms"])  # noqa: E731
                           / p["gpt"]["last_whole_ms"] for p in ps)
    for offset in OFFSETS:
        ps = raw["profiles"][offset]
        rounds = raw["engine"][offset]
        engine = med((r["zb-h1"]["b_ms"] + r["zb-h1"]["w_ms"]) / r["1f1b"]["b_ms"] for r in rounds)
        at = [ratio([p for p in ps if p["pad"] % 32 == mod]) for mod in (0, 16)]
        lines.append(
            f"- offset {offset}: the profile's B + W over the whole, main stack at 0 and at 16 "
            f"modulo 32: {at[0]:.3f} and {at[1]:.3f}; the engine's, per round: {engine:.3f} "
            "(median).")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--engine-rounds", type=int, default=6)
    bench_support.report_main(
        ap, RAW, MD,
        lambda pipebal, args, work: dict(
            rounds=args.rounds, engine_rounds=args.engine_rounds,
            **measure(pipebal, args.rounds, args.engine_rounds, work)),
        summary)


if __name__ == "__main__":
    main()
