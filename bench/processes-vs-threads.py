#!/usr/bin/env python3
"""Threads vs processes: the same plan trained as 2 threads of one process (`pipebal train`)
and as 2 processes over Gloo on loopback (`pipebal launch --nproc-per-node 2 -- pipebal
train`), in interleaved rounds, for a GPT and a U-Net at 1, 4 and 8 micro-batches; the link
between two processes measured by `pipebal link` for 64 KiB - 64 MiB; and the simulator's
prediction of the process run from the profile plus the measured link.

Writes the raw measurements (JSON) and the markdown summary made from them.
Usage: bench/processes-vs-threads.py [--build build] [--rounds 5]
       [--raw reports/processes-vs-threads-raw.json] [--md reports/processes-vs-threads.md]
Run it on an otherwise idle machine, from a clean checkout (the summary names the commit)."""
import argparse
import json
import os
import statistics
import sys
import tempfile

import bench_support
from bench_support import run

MODELS = [
    ("gpt", "gpt:layers=6,dim=128,heads=4,seq=64,vocab=1000,dropout=0", "64,64"),
    ("unet", "unet:B=3,C=8", "32,3,64,64"),
]
CHUNKS = [1, 4, 8]




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--raw", default="reports/processes-vs-threads-raw.json")
    ap.add_argument("--md", default="reports/processes-vs-threads.md")
    ap.add_argument("--allow-dirty", action="store_true")
    args = ap.parse_args()
    pipebal = os.path.abspath(os.path.join(args.build, "tools", "pipebal"))
    commit = bench_support.commit(args.allow_dirty)
    work = tempfile.mkdtemp()
    launch = [pipebal, "launch", "--nproc-per-node", "2", "--master-port", "0", "--"]

    print("measuring the link ...", file=sys.stderr)
    link_file = os.path.join(work, "link.json")
    run(launch + [pipebal, "link", "--sizes", "64K,256K,1M,4M,16M,64M", "--repeats", "20",
                  "-o", link_file])
    link = json.load(open(link_file))

    raw = {"commit": commit, "machine": bench_support.machine(), "date": bench_support.today(),
           "cores": os.cpu_count(), "rounds": args.rounds, "steps": args.steps, "link": link,
           "cases": []}
    for name, spec, shape in MODELS:
        for chunks in CHUNKS:
            print(f"{name}, {chunks} micro-batches: profile and balance ...", file=sys.stderr)
            profile = os.path.join(work, f"{name}-{chunks}.json")
            # One thread, as each stage trains; with several micro-batches the other stage
            # keeps the other core busy meanwhile, so a co-runner does while layers are timed.
            run([pipebal, "profile", "--model", spec, "--input-shape", shape, "--chunks",
                 str(chunks), "--threads", "1", "--co-runners", "1" if chunks > 1 else "0", "-q",
                 "-o", profile])
            plan_threads = json.loads(run([pipebal, "balance", profile, "--stages", "2",
                                           "--json"]))
            doc = json.load(open(profile))
            doc["link"] = link
            json.dump(doc, open(profile, "w"))
            plan_link = json.loads(run([pipebal, "balance", profile, "--stages", "2", "--json"]))
            balance = ",".join(map(str, plan_threads["balance"]))
            train = ["train", "--model", spec, "--input-shape", shape, "--balance", balance,
                     "--chunks", str(chunks), "--steps", str(args.steps), "--warmup-steps", "2",
                     "-q"]
            case = {"model": spec, "input_shape": shape, "chunks": chunks, "balance": balance,
                    "predicted_free_ms": plan_threads["prediction"]["step_ms"],
                    "predicted_link_ms": plan_link["prediction"]["step_ms"],
                    "threads_ms": [], "processes_ms": []}
            for r in range(args.rounds):
                print(f"  round {r + 1}/{args.rounds}", file=sys.stderr)
                out = os.path.join(work, "run.json")
                run([pipebal] + train + ["-o", out])
                case["threads_ms"].append(json.load(open(out))["median_step_ms"])
                run(launch + [pipebal] + train + ["-o", out])
                case["processes_ms"].append(json.load(open(out))["median_step_ms"])
            raw["cases"].append(case)
    json.dump(raw, open(args.raw, "w"), indent=2)
    open(args.md, "w").write(summary(raw, args.raw))
    print(f"wrote {args.raw} and {args.md}", file=sys.stderr)


def summary(raw, raw_path):
    lines = [
        "# Threads vs processes",
        "",
        f"Made by `bench/processes-vs-threads.py` at commit `{raw['commit']}` on "
        f"{raw['machine']}, {raw['date']}; raw data: `{os.path.basename(raw_path)}`. "
        f"Each case alternates a 2-thread run and a 2-process run (Gloo, loopback) "
        f"{raw['rounds']} times, {raw['steps']} measured steps each; the ratio is per round "
        "(processes / threads), its median reported. Predictions come from a one-thread profile "
        "(with a co-runner thread training the model alongside at more than one micro-batch, as "
        "the other stage does) by the "
        "simulator, with free transfers and with the link measured by `pipebal link`.",
        "",
        "| model | micro-batches | balance | threads ms | processes ms | processes / threads "
        "| predicted (free) ms | predicted (link) ms | link prediction error |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in raw["cases"]:
        ratios = [p / t for p, t in zip(c["processes_ms"], c["threads_ms"])]
        threads = statistics.median(c["threads_ms"])
        processes = statistics.median(c["processes_ms"])
        error = c["predicted_link_ms"] / processes - 1
        lines.append(
            f"| `{c['model']}` [{c['input_shape']}] | {c['chunks']} | [{c['balance']}] "
            f"| {threads:.1f} | {processes:.1f} | {statistics.median(ratios):.3f} "
            f"| {c['predicted_free_ms']:.1f} | {c['predicted_link_ms']:.1f} | {error:+.1%} |")
    link = raw["link"]
    lines += [
        "",
        f"Link between two processes (Gloo over loopback, median of 20 round trips): "
        f"latency {link['latency_ms'] * 1000:.0f} µs, bandwidth "
        f"{link['bandwidth_bytes_per_ms'] / 1e6:.2f} GB/s (fit).",
        "",
        "| message | one way ms | GB/s |",
        "| ---: | ---: | ---: |",
    ]
    for s in link["samples"]:
        lines.append(f"| {s['bytes'] // 1024} KiB | {s['one_way_ms']:.3f} "
                     f"| {s['bytes'] / s['one_way_ms'] / 1e6:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
