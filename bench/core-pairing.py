#!/usr/bin/env python3
"""Are this machine's cores independent? A pipeline of 2 CPU stages, and the plain model on 2
intra-op threads, assume that 2 cores give about twice the work of one. On a virtual machine
they need not at every moment, and a stretch of seconds in which they do not makes every
measurement that uses both cores slow, which no profile taken earlier can predict.

Each trial profiles the same compute-bound model (`pipebal profile`, 1 micro-batch) three ways,
in a rotating order: one single-thread process alone, two single-thread processes side by side,
and one process on 2 threads. It reports per trial the pair's throughput over the lone process's
(2.0: independent cores; 1.0: one core's worth) and the 2-thread speed-up, and how many trials
fell short of either.

Writes the raw totals (JSON) and the markdown summary made from them.
Usage: bench/core-pairing.py [--build build] [--trials 16] [--allow-dirty] [--from-raw]
Run it on an otherwise idle machine, from a clean checkout (the summary names the commit)."""
import argparse
import json
import os
import statistics
import subprocess
import sys

import bench_support

MODEL = "mlp:layers=16,width=512"
SHAPE = "256,512"
# Below this pair throughput (of 2.0) the two cores did not give two cores' work.
SHARED_BELOW = 1.3


def profile_cmd(pipebal, threads, out):
    return [pipebal, "profile", "--model", MODEL, "--input-shape", SHAPE, "--chunks", "1",
            "--threads", str(threads), "--repeat", "10", "-o", out]


def total_ms(path):
    """The whole forward and backward: the sum of the layers' median times."""
    with open(path) as f:
        layers = json.load(f)["layers"]
    return sum(layer["forward_ms"] + layer["backward_ms"] for layer in layers)


def pass_ms(path):
    """Each timed pass's whole forward and backward."""
    with open(path) as f:
        layers = json.load(f)["layers"]
    passes = len(layers[0]["forward_samples_ms"])
    return [sum(layer["forward_samples_ms"][k] + layer["backward_samples_ms"][k]
                for layer in layers) for k in range(passes)]


def run_together(cmds):
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    for p, c in zip(procs, cmds):
        _, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"failed ({p.returncode}): {' '.join(c)}\n{err}")


def trial(pipebal, work, order):
    paths = {name: os.path.join(work, name + ".json") for name in ("alone", "pair0", "pair1", "wide")}
    for what in order:
        if what == "alone":
            run_together([profile_cmd(pipebal, 1, paths["alone"])])
        elif what == "pair":
            run_together([profile_cmd(pipebal, 1, paths["pair0"]),
                          profile_cmd(pipebal, 1, paths["pair1"])])
        else:
            run_together([profile_cmd(pipebal, 2, paths["wide"])])
    return {"order": order,
            "alone_ms": total_ms(paths["alone"]),
            "pair_ms": [total_ms(paths["pair0"]), total_ms(paths["pair1"])],
            "two_threads_ms": total_ms(paths["wide"]),
            "passes_ms": {name: pass_ms(path) for name, path in paths.items()}}


def summarise(doc):
    rows, pair_throughputs, speedups = [], [], []
    for k, t in enumerate(doc["trials"]):
        pair_throughput = sum(t["alone_ms"] / ms for ms in t["pair_ms"])
        speedup = t["alone_ms"] / t["two_threads_ms"]
        pair_throughputs.append(pair_throughput)
        speedups.append(speedup)
        rows.append(f"| {k + 1} | {', '.join(t['order'])} | {t['alone_ms']:.1f} | "
                    f"{t['pair_ms'][0]:.1f}, {t['pair_ms'][1]:.1f} | {pair_throughput:.2f} | "
                    f"{t['two_threads_ms']:.1f} | {speedup:.2f} |")
    shared = sum(1 for x in pair_throughputs if x < SHARED_BELOW)
    slow_wide = sum(1 for x in speedups if x < SHARED_BELOW)
    pair_when_slow = ", ".join(f"{p:.2f}" for p, x in zip(pair_throughputs, speedups)
                               if x < SHARED_BELOW)
    # How much faster than its median the quickest pass of each short-falling run was.
    slow_runs = [t["passes_ms"][name] for t, p, x in zip(doc["trials"], pair_throughputs, speedups)
                 for name in (["pair0", "pair1"] if p < SHARED_BELOW else [])
                 + (["wide"] if x < SHARED_BELOW else [])]
    quickest = max((1 - min(r) / statistics.median(r) for r in slow_runs), default=0)
    wide_when_shared = ", ".join(f"{x:.2f}" for p, x in zip(pair_throughputs, speedups)
                                 if p < SHARED_BELOW)
    lines = [
        "# Are the cores independent?",
        "",
        f"Made by `bench/core-pairing.py` at commit `{doc['commit']}` on {doc['machine']}, "
        f"{doc['date']}; raw data: `core-pairing-raw.json`. Each trial profiled `{MODEL}` on "
        f"[{SHAPE}] (`pipebal profile --chunks 1 --repeat 10`: the sum of its layers' median "
        "forward and backward times) as one single-thread process alone, as two single-thread "
        "processes side by side, and as one process on 2 intra-op threads, in a rotating order. "
        "Pair throughput: the two side-by-side processes' work per second over the lone "
        "process's (2.0 when the cores are independent, 1.0 when they give one core's work); "
        "2-thread speed-up: the lone process's time over the 2-thread one's.",
        "",
        f"Over {len(pair_throughputs)} trials the pair throughput had median "
        f"{statistics.median(pair_throughputs):.2f} (from {min(pair_throughputs):.2f} to "
        f"{max(pair_throughputs):.2f}) and the 2-thread speed-up median "
        f"{statistics.median(speedups):.2f} (from {min(speedups):.2f} to {max(speedups):.2f}). "
        f"In {shared} of {len(pair_throughputs)} trials the two processes together did less than "
        f"{SHARED_BELOW} times one core's work, and in {slow_wide} the 2 threads were less than "
        f"{SHARED_BELOW} times as fast as one."
        + (" Each run that fell short did so through all its passes (a few seconds: the "
           f"quickest pass of any was at most {100 * quickest:.0f}% under its run's median), while the other way of using both cores "
           f"in the same trial did not necessarily (pair throughput beside the slow 2-thread "
           f"runs: {pair_when_slow or 'none'}; 2-thread speed-up beside the slow pairs: "
           f"{wide_when_shared or 'none'}): whatever the host does, a configuration that needs "
           "both cores measures (or profiles) up to about twice as slow whenever it falls into "
           "such a stretch, which no profile taken before can foresee." if shared + slow_wide
           else ""),
        "",
        "| trial | order | alone ms | side by side ms | pair throughput | 2 threads ms | "
        "2-thread speed-up |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ] + rows
    return lines


def measure(pipebal, args, work):
    doc = {"model": MODEL, "input_shape": SHAPE, "trials": []}
    orders = [["alone", "pair", "wide"], ["pair", "wide", "alone"], ["wide", "alone", "pair"]]
    for k in range(args.trials):
        doc["trials"].append(trial(pipebal, work, orders[k % len(orders)]))
        t = doc["trials"][-1]
        print(f"trial {k + 1}/{args.trials}: alone {t['alone_ms']:.1f} ms, side by side "
              f"{t['pair_ms'][0]:.1f}/{t['pair_ms'][1]:.1f} ms, 2 threads "
              f"{t['two_threads_ms']:.1f} ms", file=sys.stderr, flush=True)
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=16)
    bench_support.report_main(ap, "reports/core-pairing-raw.json", "reports/core-pairing.md",
                              measure, summarise)


if __name__ == "__main__":
    main()
