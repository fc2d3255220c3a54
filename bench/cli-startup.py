#!/usr/bin/env python3
"""How long a pipebal command takes to start. `pipebal` runs balance, plan and report itself,
without LibTorch, and hands every other command to `pipebal-torch` (tools/front_main.cpp); this
measures what that saves and what the hand-off costs, as wall time of whole processes:

- `balance` of the demo's profile (reports/examples/demo/profile.json) by `pipebal` and by
  `pipebal-torch` (the same command through the executable that loads LibTorch);
- `models` (a command that needs LibTorch, doing little) by `pipebal`, handed over, and by
  `pipebal-torch` directly.

The four commands run one after another in a rotating order, --rounds rounds; each time is the
median over rounds, each ratio the median of the rounds' ratios.

Writes reports/cli-startup-raw.json and reports/cli-startup.md.
Usage: bench/cli-startup.py [--build build] [--rounds 30] [--allow-dirty] [--from-raw]"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import bench_support

PROFILE = "reports/examples/demo/profile.json"
COMMANDS = [("balance", "pipebal"), ("balance", "pipebal-torch"),
            ("models", "pipebal"), ("models", "pipebal-torch")]


def args_of(command):
    return ["balance", PROFILE, "--stages", "2"] if command == "balance" else ["models"]


def wall_ms(cmd):
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ms = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr}")
    return ms


def measure(pipebal, args, work):
    del work
    directory = os.path.dirname(pipebal)
    rounds = []
    for r in range(args.rounds):
        order = COMMANDS[r % len(COMMANDS):] + COMMANDS[:r % len(COMMANDS)]
        times = {}
        for command, executable in order:
            ms = wall_ms([os.path.join(directory, executable), *args_of(command)])
            times[f"{command} {executable}"] = ms
        rounds.append(times)
    return {"rounds": rounds}


def summary(doc):
    rounds = doc["rounds"]
    keys = [f"{c} {e}" for c, e in COMMANDS]
    median = {k: statistics.median(r[k] for r in rounds) for k in keys}
    spread = {k: (min(r[k] for r in rounds), max(r[k] for r in rounds)) for k in keys}
    saved = statistics.median(r["balance pipebal-torch"] / r["balance pipebal"] for r in rounds)
    handoff = statistics.median(r["models pipebal"] - r["models pipebal-torch"] for r in rounds)
    lines = [
        "# How long a command takes to start",
        "",
        f"Made by `bench/cli-startup.py` at commit `{doc['commit']}` on {doc['machine']}, "
        f"{doc['date']}; raw data: `cli-startup-raw.json`. Wall time of whole processes, "
        f"{len(rounds)} rounds of the four commands in a rotating order: `balance {PROFILE} "
        "--stages 2` run by `pipebal` (which balances without loading LibTorch) and by "
        "`pipebal-torch` (every command, with LibTorch); `models`, which needs LibTorch, run by "
        "`pipebal` (which hands it to `pipebal-torch`, replacing its process) and by "
        "`pipebal-torch` directly.",
        "",
        "| command | executable | median ms | fastest | slowest |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for c, e in COMMANDS:
        k = f"{c} {e}"
        lines.append(f"| {c} | {e} | {median[k]:.1f} | {spread[k][0]:.1f} | "
                     f"{spread[k][1]:.1f} |")
    lines += [
        "",
        f"`balance` through `pipebal` took 1/{saved:.0f} of its time through `pipebal-torch` "
        "(median of the rounds' ratios); handing `models` over cost "
        f"{handoff:+.1f} ms (median of the rounds' differences).",
    ]
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    bench_support.report_main(ap, "reports/cli-startup-raw.json", "reports/cli-startup.md",
                              measure, summary)


if __name__ == "__main__":
    main()
