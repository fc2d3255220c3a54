#!/usr/bin/env python3
"""Do per-layer costs add up on models with many small layers? For each model: the sum of the
profile's per-layer forward and backward times (one thread, the whole batch) beside the measured
step of the plain model trained as one stage with one micro-batch (one thread), in interleaved
rounds (profile, train, profile, train, ...); the ratio is per round, its median reported.
Beside it the sum with what the profile says the engine adds to such a step (one forward and one
backward action, `engine` in the profile): what the simulator predicts for the plain model.
Each round also trains with subnormal floats kept (PIPEBAL_KEEP_DENORMALS=1; pipebal flushes
them by default, workflow/denormals.h), to show what flushing them is worth per model.

Writes the raw measurements (JSON) and the markdown summary made from them.
Usage: bench/layer-sum.py [--build build] [--rounds 3] [--steps 10] [--from-raw]
(--from-raw writes the summary again from the committed raw data, measuring nothing.)
Run it on an otherwise idle machine, from a clean checkout (the summary names the commit)."""
import argparse
import json
import os
import statistics
import sys

import bench_support
from bench_support import run

MODELS = [
    # The planner grid's narrow MLP: few layers, each a fraction of a millisecond.
    ("mlp 16 x 64", "mlp:layers=16,width=64", "256,64"),
    ("mlp 150 x 64", "mlp:layers=150,width=64", "32,64"),
    ("mlp 150 x 256", "mlp:layers=150,width=256", "64,256"),
    ("resnet-152", "resnet:depth=152,width=8", "16,3,32,32"),
    ("gpt 24 blocks", "gpt:layers=24,dim=64,heads=4,seq=32,vocab=500,dropout=0", "16,32"),
    ("unet B=5", "unet:B=5,C=4", "16,3,64,64"),
]
RAW = "reports/layer-sum-raw.json"
MD = "reports/layer-sum.md"




def measure(pipebal, args, work):
    raw = {"cores": os.cpu_count(), "rounds": args.rounds, "steps": args.steps, "models": []}
    for name, spec, shape in MODELS:
        print(f"{name} ...", file=sys.stderr, flush=True)
        rounds = []
        for _ in range(args.rounds):
            profile = os.path.join(work, "profile.json")
            run([pipebal, "profile", "--model", spec, "--input-shape", shape, "--chunks", "1",
                 "--threads", "1", "-q", "-o", profile])
            document = json.load(open(profile))
            layers = document["layers"]
            # A step's own cost and one per action: the plain model's forward and backward.
            engine = document.get("engine", {"step_ms": 0, "action_ms": 0})
            engine_ms = engine["step_ms"] + 2 * engine["action_ms"]
            summed = sum(l["forward_ms"] + l["backward_ms"] for l in layers)
            # The layers' own medians, before the profiler scales them to the median pass.
            medians = sum(statistics.median(l["forward_samples_ms"]) +
                          statistics.median(l["backward_samples_ms"]) for l in layers)
            out = os.path.join(work, "run.json")
            train = [pipebal, "train", "--model", spec, "--input-shape", shape, "--balance",
                     str(len(layers)), "--chunks", "1", "--threads", "1", "--steps",
                     str(args.steps), "-q", "-o", out]
            run(train)
            measured = json.load(open(out))["median_step_ms"]
            run(train, env=dict(os.environ, PIPEBAL_KEEP_DENORMALS="1"))
            kept = json.load(open(out))["median_step_ms"]
            rounds.append({"layers": len(layers), "sum_ms": summed, "medians_sum_ms": medians,
                           "engine_ms": engine_ms,
                           "measured_ms": measured, "denormals_kept_ms": kept})
        raw["models"].append({"name": name, "spec": spec, "input_shape": shape,
                              "rounds": rounds})
    return raw


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    bench_support.report_main(ap, RAW, MD, measure, summary)


def kept_columns(rounds):
    """The kept-subnormals step and its ratio to the flushed one; raw data from before the
    comparison was measured has neither."""
    if "denormals_kept_ms" not in rounds[0]:
        return "– | –"
    kept = statistics.median(r["denormals_kept_ms"] for r in rounds)
    ratio = statistics.median(r["denormals_kept_ms"] / r["measured_ms"] for r in rounds)
    return f"{kept:.1f} | {ratio:.2f}"


def medians_column(rounds):
    """The sum of the layers' own medians over the measured step (median over rounds); raw data
    from before it was recorded has none."""
    if "medians_sum_ms" not in rounds[0]:
        return "–"
    return f"{statistics.median(r['medians_sum_ms'] / r['measured_ms'] for r in rounds):.3f}"


def engine_column(rounds):
    """The sum with the engine's cost over the measured step (median over rounds); raw data
    from before it was recorded has none."""
    if "engine_ms" not in rounds[0]:
        return "–"
    ratio = statistics.median((r["sum_ms"] + r["engine_ms"]) / r["measured_ms"] for r in rounds)
    return f"{ratio:.3f}"


def summary(raw):
    lines = [
        "# Do per-layer costs add up?",
        "",
        f"Made by `bench/layer-sum.py` at commit `{raw['commit']}` on {raw['machine']}; raw "
        f"data: `layer-sum-raw.json`. Per model, {raw['rounds']} rounds of: profile the whole "
        "batch at one thread (`pipebal profile --chunks 1 --threads 1`), then train the plain "
        f"model as one stage with one micro-batch at one thread ({raw['steps']} measured steps, "
        "their median). The ratio is per round (sum / measured), its median reported. Rounds "
        "apart: the slowest round's measured step over the fastest's, the noise the ratio sits "
        "in. Subnormals kept: the same training step with subnormal floats kept "
        "(`PIPEBAL_KEEP_DENORMALS=1`; pipebal flushes them to zero by default), measured right "
        "after the one that flushes them; kept / flushed: the median of the rounds' ratios. "
        "Medians / measured: the same ratio with the layers' own medians summed, before the "
        "profiler scales them to add up to the median pass (`profiler::summarise_passes`). "
        "With the engine / measured: the sum plus what the profile measured pipebal's engine "
        "to add to such a step (its `engine` costs: once per step, and once per action, here a "
        "forward and a backward), which the simulator adds too: its prediction for this step.",
        "",
        "| model | layers | sum of layers ms | measured step ms | sum / measured | "
        "with the engine / measured | medians / measured | rounds apart | subnormals kept ms | "
        "kept / flushed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in raw["models"]:
        ratios = [r["sum_ms"] / r["measured_ms"] for r in m["rounds"]]
        measured = [r["measured_ms"] for r in m["rounds"]]
        lines.append(
            f"| {m['name']} (`{m['spec']}` [{m['input_shape']}]) | {m['rounds'][0]['layers']} | "
            f"{statistics.median(r['sum_ms'] for r in m['rounds']):.1f} | "
            f"{statistics.median(r['measured_ms'] for r in m['rounds']):.1f} | "
            f"{statistics.median(ratios):.3f} | {engine_column(m['rounds'])} | "
            f"{medians_column(m['rounds'])} | "
            f"{max(measured) / min(measured):.2f} | "
            f"{kept_columns(m['rounds'])} |")
    return lines


if __name__ == "__main__":
    main()
