#!/usr/bin/env python3
"""How much other work on the machine slows what pipebal measures, and whether pipebal says so.

A profile measures the machine as it is: processes busy beside it slow its layers and, most, the
engine's hand-off between stages (a stage's thread waits for a core), and a plan from it fits that
busy machine. `profile` and `train` read what other processes took (common/machine_load.h) and
warn from a quarter of a core. This measures, on the machine it runs on:

- `profile` of a model (one thread, one co-runner as for 2 stages) idle and with every core kept
  busy by another process (a busy loop per core): the layers' forward + backward sum and the
  engine's hand-off per message, busy over idle;
- `train` of the same model on 2 stages: the median step, busy over idle;
- the step `balance` predicts for that training from each profile, against the idle run's: what
  a plan made on a busy machine promises an idle one;
- the load each run recorded (`environment.machine_load`) and whether it warned: every busy run
  should, no idle one.

Idle and busy alternate within each round, the first of them alternating between rounds; a ratio
is the median of the rounds' ratios.

Writes reports/busy-machine-raw.json and reports/busy-machine.md.
Usage: bench/busy-machine.py [--build build] [--rounds 9] [--allow-dirty] [--from-raw]"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import bench_support

MODEL = "mlp:layers=16,width=512"
INPUT_SHAPE = "256,512"
CHUNKS = 4
BALANCE = "9,8"
BUSY_WARNING = "the machine was busy"


class BusyLoops:
    """A process per core spinning while the `with` block runs."""

    def __init__(self, count):
        self.count = count
        self.processes = []

    def __enter__(self):
        self.processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                          for _ in range(self.count)]
        return self

    def __exit__(self, *exc):
        for p in self.processes:
            p.kill()
        for p in self.processes:
            p.wait()


def run_command(cmd):
    """Runs `cmd`; returns its stderr. Exits naming it when it fails."""
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr}")
    return done.stderr


def profile(pipebal, path):
    err = run_command([pipebal, "profile", "--model", MODEL, "--input-shape", INPUT_SHAPE,
                       "--chunks", str(CHUNKS), "--threads", "1", "--co-runners", "1", "-q",
                       "-o", path])
    doc = json.load(open(path))
    plan = json.loads(bench_support.run([pipebal, "balance", path, "--stages", "2", "--balance",
                                         BALANCE, "--json"]))
    return {"layers_ms": doc["totals"]["forward_ms"] + doc["totals"]["backward_ms"],
            "handoff_ms": doc["engine"]["handoff_ms"],
            "predicted_step_ms": plan["prediction"]["step_ms"],
            "machine_load": doc["environment"]["machine_load"],
            "warned": BUSY_WARNING in err}


def train(pipebal, path):
    err = run_command([pipebal, "train", "--model", MODEL, "--input-shape", INPUT_SHAPE,
                       "--chunks", str(CHUNKS), "--balance", BALANCE, "--steps", "12", "-q",
                       "-o", path])
    doc = json.load(open(path))
    return {"step_ms": doc["median_step_ms"],
            "machine_load": doc["environment"]["machine_load"],
            "warned": BUSY_WARNING in err}


def measure(pipebal, args, work):
    cores = len(os.sched_getaffinity(0))
    rounds = []
    for r in range(args.rounds):
        conditions = ["idle", "busy"] if r % 2 == 0 else ["busy", "idle"]
        result = {}
        for condition in conditions:
            print(f"round {r + 1}/{args.rounds}: {condition}", file=sys.stderr)
            with BusyLoops(cores if condition == "busy" else 0):
                result[condition] = {
                    "profile": profile(pipebal, os.path.join(work, "profile.json")),
                    "train": train(pipebal, os.path.join(work, "run.json")),
                }
        rounds.append(result)
    return {"model": MODEL, "input_shape": INPUT_SHAPE, "chunks": CHUNKS, "balance": BALANCE,
            "busy_loops": cores, "rounds": rounds}


MEASURES = [("profile", "layers_ms", "profile: the layers' forward + backward"),
            ("profile", "handoff_ms", "profile: the engine's hand-off per message"),
            ("train", "step_ms", "train on 2 stages: the median step")]


def summary(doc):
    rounds = doc["rounds"]
    lines = [
        "# A busy machine: how much slower, and whether pipebal says so",
        "",
        f"Made by `bench/busy-machine.py` at commit `{doc['commit']}` on {doc['machine']}, "
        f"{doc['date']}; raw data: `busy-machine-raw.json`. `{doc['model']}` at input "
        f"{doc['input_shape']}, {doc['chunks']} micro-batches: `pipebal profile` (one thread, one "
        f"co-runner, as for 2 stages) and `pipebal train --balance {doc['balance']}`, each idle "
        f"and beside {doc['busy_loops']} busy loops (a process spinning per core), "
        f"{len(rounds)} rounds with idle and busy alternating; a time is the median over rounds, "
        "a ratio the median of the rounds' busy / idle.",
        "",
        "| measure | idle | busy | busy / idle |",
        "| --- | ---: | ---: | ---: |",
    ]
    for command, key, label in MEASURES:
        idle = statistics.median(r["idle"][command][key] for r in rounds)
        busy = statistics.median(r["busy"][command][key] for r in rounds)
        ratio = statistics.median(r["busy"][command][key] / r["idle"][command][key]
                                  for r in rounds)
        lines.append(f"| {label} (ms) | {idle:.3f} | {busy:.3f} | {ratio:.2f}x |")
    lines += ["", f"The step `balance --balance {doc['balance']}` predicts from each profile, "
              "against the steps measured idle and busy in the same round (an error is the "
              "median of the rounds' errors):", "",
              "| profile taken | predicted ms | error against the idle run | against the busy run |",
              "| --- | ---: | ---: | ---: |"]
    for condition in ("idle", "busy"):
        predicted = [r[condition]["profile"]["predicted_step_ms"] for r in rounds]
        errors = [statistics.median(r[condition]["profile"]["predicted_step_ms"] /
                                    r[run]["train"]["step_ms"] - 1 for r in rounds)
                  for run in ("idle", "busy")]
        lines.append(f"| {condition} | {statistics.median(predicted):.3f} | {errors[0]:+.1%} | "
                     f"{errors[1]:+.1%} |")
    lines += ["", "What the runs recorded of the others (`environment.machine_load.others_cores`, "
              "median over rounds) and how many warned that the machine was busy:", "",
              "| command | condition | others took (cores) | warned |",
              "| --- | --- | ---: | ---: |"]
    for command in ("profile", "train"):
        for condition in ("idle", "busy"):
            others = statistics.median(r[condition][command]["machine_load"]["others_cores"]
                                       for r in rounds)
            warned = sum(r[condition][command]["warned"] for r in rounds)
            lines.append(f"| {command} | {condition} | {others:.2f} | {warned} of {len(rounds)} |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    bench_support.report_main(ap, "reports/busy-machine-raw.json", "reports/busy-machine.md",
                              measure, summary)


if __name__ == "__main__":
    main()
