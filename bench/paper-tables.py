#!/usr/bin/env python3
"""torchgpipe's speed and memory benchmarks at CPU scale.

Speed: U-Net(B=3, C=8) and AmoebaNet-D(L=2, D=16) on 64 images of 3x64x64, 2 stages of one CPU
thread, m = 1, 4 and 32 micro-batches: for each m the model is profiled at the micro-batch size
(with one co-runner when m > 1), balanced with dp for that m and trained with that plan; --runs
rounds one after the other. Memory: U-Net(B=3, C) on 32 images, 2 stages, 8 micro-batches, GPipe,
for C = 8, 16, 32, 48, checkpointing never and always: the largest stage memory of the plan beside
the largest per-stage peak measured.

Raw: every plan and run summary in reports/paper-tables-raw.json; summary: reports/paper-tables.md.
Usage: bench/paper-tables.py [--build build] [--runs 2] [--allow-dirty] [--from-raw]
(about 4 minutes)"""
import argparse
import json
import os

import bench_support
from bench_support import run

SPEED_MODELS = [("unet:B=3,C=8", "64,3,64,64"), ("amoebanetd:L=2,D=16", "64,3,64,64")]
CHUNKS = [1, 4, 32]
CHANNELS = [8, 16, 32, 48]


def plan_and_train(pipebal, work, spec, shape, chunks, co_runners, checkpoint, steps):
    profile, plan, out = (os.path.join(work, f) for f in ("profile.json", "plan.json", "run.json"))
    run([pipebal, "profile", "--model", spec, "--input-shape", shape, "--chunks", str(chunks),
         "--threads", "1", "--co-runners", str(co_runners), "--repeat", "5", "-q", "-o", profile])
    run([pipebal, "balance", profile, "--stages", "2", "--chunks", str(chunks), "--checkpoint",
         checkpoint, "-o", plan])
    run([pipebal, "train", "--plan", plan, "--steps", str(steps), "--warmup-steps", "2", "-q",
         "-o", out])
    p, r = json.load(open(plan)), json.load(open(out))
    return {"model": spec, "input_shape": shape, "chunks": chunks, "checkpoint": checkpoint,
            "balance": p["balance"], "predicted_step_ms": p["prediction"]["step_ms"],
            "predicted_peak_bytes": max(s["memory_bytes"] for s in p["stages"]),
            "measured_step_ms": r["median_step_ms"],
            "measured_peak_bytes": max(s["peak_memory_bytes"] for s in r["stages"])}


def measure(pipebal, args, work):
    raw = {"speed": [], "memory": []}
    for r in range(1, args.runs + 1):
        for spec, shape in SPEED_MODELS:
            for m in CHUNKS:
                row = plan_and_train(pipebal, work, spec, shape, m, 1 if m > 1 else 0,
                                     "except_last", 4)
                raw["speed"].append({"run": r, **row})
    for c in CHANNELS:
        for checkpoint in ("never", "always"):
            raw["memory"].append(plan_and_train(pipebal, work, f"unet:B=3,C={c}", "32,3,64,64",
                                                8, 1, checkpoint, 2))
    return raw


def summary(raw):
    made = raw["made"]
    lines = [
        "# torchgpipe's speed and memory benchmarks at CPU scale", "",
        f"Made by `bench/paper-tables.py` at commit `{made['commit']}` on {made['machine']}, "
        f"{made['date']}; raw data: `paper-tables-raw.json`.", "",
        "## Speed", "",
        "U-Net(B=3, C=8) and AmoebaNet-D(L=2, D=16) on 64 images of 3×64×64, 2 pipeline stages "
        "of one CPU thread each, m = 1, 4 and 32 micro-batches. For each m the model is profiled "
        "at the micro-batch size (with one co-runner when m > 1), balanced with `dp` for that m "
        "and trained for 4 measured steps after 2 warm-up steps with that plan (`pipebal train "
        "--plan`). Speed-up over m = 1 is the m = 1 step time over the step time.", ""]
    for r in sorted({x["run"] for x in raw["speed"]}):
        lines += [f"Run {r}:", "",
                  "| model | m | balance | predicted ms | measured ms | predicted speed-up over "
                  "m=1 | measured speed-up over m=1 |",
                  "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
        rows = [x for x in raw["speed"] if x["run"] == r]
        for x in rows:
            base = next(y for y in rows if y["model"] == x["model"] and y["chunks"] == 1)
            lines.append(f"| `{x['model']}` | {x['chunks']} | {x['balance']} | "
                         f"{x['predicted_step_ms']:.1f} | {x['measured_step_ms']:.1f} | "
                         f"{base['predicted_step_ms'] / x['predicted_step_ms']:.2f} | "
                         f"{base['measured_step_ms'] / x['measured_step_ms']:.2f} |")
        lines.append("")
    lines += [
        "## Memory", "",
        "U-Net(B=3, C) on 32 images of 3×64×64, 2 stages, 8 micro-batches, GPipe, for growing C, "
        "checkpointing never and always. Predicted: the largest stage memory in the `dp` plan "
        "(parameters × 2 plus the activations the schedule keeps). Measured: the largest "
        "per-stage peak the counting allocator attributes to a stage's worker over the two "
        "warm-up steps (the first allocates the parameters' gradients, which every later step "
        "holds throughout).", "",
        "| C | checkpoint | balance | predicted peak (MiB) | measured peak (MiB) | step ms |",
        "| ---: | --- | --- | ---: | ---: | ---: |"]
    for x in raw["memory"]:
        channels = x["model"].split("C=")[1]
        lines.append(f"| {channels} | {x['checkpoint']} | {x['balance']} | "
                     f"{x['predicted_peak_bytes'] / 2**20:.1f} | "
                     f"{x['measured_peak_bytes'] / 2**20:.1f} | {x['measured_step_ms']:.0f} |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    bench_support.report_main(ap, "reports/paper-tables-raw.json", "reports/paper-tables.md",
                              measure, summary, meta_key="made")


if __name__ == "__main__":
    main()
