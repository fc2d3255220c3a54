#!/usr/bin/env python3
"""Per-stage memory: the balancer's prediction beside the peak each stage measured, with the
stages as 2 threads of one process (`pipebal train`) and as 2 processes (`pipebal launch
--nproc-per-node 2`, messages in shared memory), for a GPT and a U-Net at 8 micro-batches, every
schedule (interleaved with 2 stages per device) and every checkpoint mode. Each plan is the dp
balance for its schedule and checkpoint mode (`pipebal balance --stages 2`); each run is one
measured step after two warm-up steps, whose allocations the counting allocator charges to the
stage that holds them (the first allocates the parameters' gradients, the second holds them
throughout, as every later step). Memory depends on timing only through the messages waiting to be taken
(the prediction counts those of the simulated timeline, "untimed" leaves them out): one run each.

Writes the raw measurements (JSON) and the markdown summary made from them.
Usage: bench/stage-memory.py [--build build] [--from-raw]
(--from-raw writes the summary again from the committed raw data, measuring nothing.)
Run it from a clean checkout (the summary names the commit)."""
import argparse
import json
import os
import sys

import bench_support
from bench_support import run

MODELS = [
    ("gpt", "gpt:layers=6,dim=128,heads=4,seq=64,vocab=1000,dropout=0", "64,64"),
    ("unet", "unet:B=3,C=8", "32,3,64,64"),
]
CHUNKS = 8
SCHEDULES = [
    ("gpipe", ["--schedule", "gpipe"]),
    ("1f1b", ["--schedule", "1f1b"]),
    ("interleaved 2", ["--schedule", "interleaved", "--virtual", "2"]),
    ("zb-h1", ["--schedule", "zb-h1"]),
]
CHECKPOINTS = ["never", "except_last", "always"]
MIB = 1024 * 1024
RAW = "reports/stage-memory-raw.json"
MD = "reports/stage-memory.md"


def peaks(run_json):
    return [s["peak_memory_bytes"] for s in run_json["stages"]]


def measure(pipebal, work):
    cases = []
    profile, plan, out = (os.path.join(work, f) for f in ("profile.json", "plan.json", "run.json"))
    for name, spec, shape in MODELS:
        print(f"{name}: profiling ...", file=sys.stderr, flush=True)
        run([pipebal, "profile", "--model", spec, "--input-shape", shape, "--chunks",
             str(CHUNKS), "--threads", "1", "--repeat", "3", "-q", "-o", profile])
        for schedule, flags in SCHEDULES:
            for checkpoint in CHECKPOINTS:
                print(f"  {schedule}, checkpoint {checkpoint}", file=sys.stderr, flush=True)
                planned = json.loads(run([pipebal, "balance", profile, "--stages", "2",
                                          "--chunks", str(CHUNKS), "--checkpoint", checkpoint,
                                          "--json", "-o", plan] + flags))
                train = ["train", "--model", spec, "--input-shape", shape, "--plan", plan,
                         "--steps", "1", "--warmup-steps", "2", "-q", "-o", out]
                run([pipebal] + train)
                threads = peaks(json.load(open(out)))
                run([pipebal, "launch", "--nproc-per-node", "2", "--master-port", "0", "--",
                     pipebal] + train)
                across = json.load(open(out))
                if not all(p["shared_memory_peers"] for p in across["processes"]):
                    sys.exit(f"the processes did not share memory: {across['processes']}")
                cases.append({
                    "model": name, "spec": spec, "input_shape": shape, "schedule": schedule,
                    "checkpoint": checkpoint, "balance": planned["balance"],
                    "predicted_bytes": [s["timed_memory_bytes"] for s in planned["stages"]],
                    "untimed_bytes": [s["memory_bytes"] for s in planned["stages"]],
                    "threads_bytes": threads, "processes_bytes": peaks(across)})
    return cases


def main():
    bench_support.report_main(
        argparse.ArgumentParser(), RAW, MD,
        lambda pipebal, args, work: {"chunks": CHUNKS, "cases": measure(pipebal, work)},
        summary)


def summary(raw):
    lines = [
        "# Per-stage memory: predicted and measured, in threads and in processes",
        "",
        f"Made by `bench/stage-memory.py` at commit `{raw['commit']}` on {raw['machine']}, "
        f"{raw['date']}; raw data: `{os.path.basename(RAW)}`. 2 stages per model (4 for "
        f"interleaved, 2 per device), {raw['chunks']} micro-batches, each plan the dp balance "
        "for its schedule and checkpoint mode. Predicted: the plan's peak per stage "
        "(parameters x 2, plus the inputs and activations its action list keeps, plus the "
        "messages it sent that wait for their receiver on the simulated timeline; without "
        "those: \"untimed\"). Measured: the "
        "peak of what the counting allocator charged to each stage in the two warm-up steps (the "
        "first allocates the parameters' gradients, which every later step holds throughout), "
        "with the stages as "
        "threads of one process and as processes (messages in shared memory); a message is the "
        "memory of the stage that took it. Error: predicted against the thread run; processes "
        "vs threads: the larger per-stage difference between the two runs.",
        "",
        "| model | schedule | checkpoint | balance | predicted MiB | untimed MiB | threads MiB "
        "| error | untimed error | processes MiB | processes vs threads |",
        "| --- | --- | --- | --- | --- | --- | --- | ---: | ---: | --- | ---: |",
    ]
    errors, untimed_errors, apart = [], [], []
    for c in raw["cases"]:
        pred, threads, procs = c["predicted_bytes"], c["threads_bytes"], c["processes_bytes"]
        untimed = c.get("untimed_bytes", pred)
        error = [p / t - 1 for p, t in zip(pred, threads)]
        untimed_error = [p / t - 1 for p, t in zip(untimed, threads)]
        gap = max(abs(p / t - 1) for p, t in zip(procs, threads))
        errors += error
        untimed_errors += untimed_error
        apart.append(gap)
        cells = [", ".join(f"{b / MIB:.1f}" for b in v) for v in (pred, untimed, threads, procs)]
        lines.append(
            f"| {c['model']} | {c['schedule']} | {c['checkpoint']} | {c['balance']} "
            f"| {cells[0]} | {cells[1]} | {cells[2]} | {', '.join(f'{e:+.0%}' for e in error)} "
            f"| {', '.join(f'{e:+.0%}' for e in untimed_error)} | {cells[3]} | {gap:.1%} |")

    def spread(values):
        return (f"{min(values):+.1%} to {max(values):+.1%} (median absolute "
                f"{sorted(abs(e) for e in values)[len(values) // 2]:.1%}")

    lines += [
        "",
        f"Over {len(errors)} stages the prediction was {spread(errors)}) of the thread run's "
        f"peak, untimed {spread(untimed_errors)}); the thread and process runs of one plan were "
        f"at most {max(apart):.1%} apart per stage.",
    ]
    return lines


if __name__ == "__main__":
    main()
