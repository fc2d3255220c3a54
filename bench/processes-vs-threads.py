#!/usr/bin/env python3
"""Threads vs processes: the same plan trained as 2 threads of one process (`pipebal train`)
and as 2 processes (`pipebal launch --nproc-per-node 2 -- pipebal train`), their messages in
shared memory and, with PIPEBAL_SHM_DISABLE=1, through Gloo on loopback, in interleaved
rounds, for a GPT and a U-Net at 1, 4 and 8 micro-batches; the link between two processes
measured by `pipebal link` both ways for 64 KiB - 64 MiB; and the simulator's prediction of
each process run from the profile plus its measured link.

Writes the raw measurements (JSON) and the markdown summary made from them.
Usage: bench/processes-vs-threads.py [--build build] [--rounds 5]
       [--raw reports/processes-vs-threads-raw.json] [--md reports/processes-vs-threads.md]
       [--from-raw]
(--from-raw writes the summary again from the committed raw data, measuring nothing.)
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
# How the two processes' messages travel, and the environment that makes them.
WAYS = {"shared": {}, "gloo": {"PIPEBAL_SHM_DISABLE": "1"}}


def with_env(extra):
    env = dict(os.environ)
    env.update(extra)
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--raw", default="reports/processes-vs-threads-raw.json")
    ap.add_argument("--md", default="reports/processes-vs-threads.md")
    ap.add_argument("--allow-dirty", action="store_true")
    ap.add_argument("--from-raw", action="store_true",
                    help="write the summary from the raw file, measuring nothing")
    args = ap.parse_args()
    if args.from_raw:
        open(args.md, "w").write(summary(json.load(open(args.raw)), args.raw))
        print(f"wrote {args.md}", file=sys.stderr)
        return
    pipebal = os.path.abspath(os.path.join(args.build, "tools", "pipebal"))
    commit = bench_support.commit(args.allow_dirty)
    work = tempfile.mkdtemp()
    launch = [pipebal, "launch", "--nproc-per-node", "2", "--master-port", "0", "--"]

    links = {}
    for way, env in WAYS.items():
        print(f"measuring the link ({way}) ...", file=sys.stderr)
        link_file = os.path.join(work, "link.json")
        run(launch + [pipebal, "link", "--sizes", "64K,256K,1M,4M,16M,64M", "--repeats", "20",
                      "-o", link_file], env=with_env(env))
        links[way] = json.load(open(link_file))

    raw = {"commit": commit, "machine": bench_support.machine(), "date": bench_support.today(),
           "cores": os.cpu_count(), "rounds": args.rounds, "steps": args.steps, "links": links,
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
            balance = ",".join(map(str, plan_threads["balance"]))
            case = {"model": spec, "input_shape": shape, "chunks": chunks, "balance": balance,
                    "predicted_free_ms": plan_threads["prediction"]["step_ms"],
                    "threads_ms": []}
            doc = json.load(open(profile))
            for way in WAYS:
                doc["link"] = links[way]
                json.dump(doc, open(profile, "w"))
                plan_link = json.loads(run([pipebal, "balance", profile, "--stages", "2",
                                            "--balance", balance, "--json"]))
                case[f"predicted_{way}_ms"] = plan_link["prediction"]["step_ms"]
                case[f"{way}_ms"] = []
            train = ["train", "--model", spec, "--input-shape", shape, "--balance", balance,
                     "--chunks", str(chunks), "--steps", str(args.steps), "--warmup-steps", "2",
                     "-q"]
            for r in range(args.rounds):
                print(f"  round {r + 1}/{args.rounds}", file=sys.stderr)
                out = os.path.join(work, "run.json")
                run([pipebal] + train + ["-o", out])
                case["threads_ms"].append(json.load(open(out))["median_step_ms"])
                for way, env in WAYS.items():
                    run(launch + [pipebal] + train + ["-o", out], env=with_env(env))
                    doc = json.load(open(out))
                    shared = all(p["shared_memory_peers"] for p in doc["processes"])
                    if shared != (way == "shared"):
                        sys.exit(f"the {way} run's messages went the other way: "
                                 f"{doc['processes']}")
                    case[f"{way}_ms"].append(doc["median_step_ms"])
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
        f"Each case alternates a 2-thread run, a 2-process run with the messages in shared "
        f"memory and one with them through Gloo on loopback (`PIPEBAL_SHM_DISABLE=1`), "
        f"{raw['rounds']} times, {raw['steps']} measured steps each; a ratio is per round "
        "(processes / threads), its median reported. Predictions come from a one-thread profile "
        "(with a co-runner thread training the model alongside at more than one micro-batch, as "
        "the other stage does) by the simulator, with free transfers and with the link "
        "measured by `pipebal link` the same way; the error is the prediction's against the "
        "median process step. Threads apart: the slowest of the case's 2-thread runs over its "
        "fastest, the same work measured at different moments.",
        "",
        "| model | micro-batches | balance | threads ms | threads apart | shared memory ms "
        "| shared / threads | Gloo ms | Gloo / threads | predicted (free) ms "
        "| predicted shared ms (error) | predicted Gloo ms (error) |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in raw["cases"]:
        threads = statistics.median(c["threads_ms"])
        cells = []
        for way in WAYS:
            ratios = [p / t for p, t in zip(c[f"{way}_ms"], c["threads_ms"])]
            cells.append(f"{statistics.median(c[f'{way}_ms']):.1f} "
                         f"| {statistics.median(ratios):.3f}")
        predicted = []
        for way in WAYS:
            error = c[f"predicted_{way}_ms"] / statistics.median(c[f"{way}_ms"]) - 1
            predicted.append(f"{c[f'predicted_{way}_ms']:.1f} ({error:+.1%})")
        lines.append(
            f"| `{c['model']}` [{c['input_shape']}] | {c['chunks']} | [{c['balance']}] "
            f"| {threads:.1f} | {max(c['threads_ms']) / min(c['threads_ms']):.2f} "
            f"| {' | '.join(cells)} | {c['predicted_free_ms']:.1f} "
            f"| {' | '.join(predicted)} |")
    shared, gloo = raw["links"]["shared"], raw["links"]["gloo"]
    lines += [
        "",
        "Link between two processes (`pipebal link`, median of 20 round trips through the "
        f"engine's channels): in shared memory {shared['latency_ms'] * 1000:.0f} µs latency, "
        f"{shared['bandwidth_bytes_per_ms'] / 1e6:.2f} GB/s; through Gloo on loopback "
        f"{gloo['latency_ms'] * 1000:.0f} µs, {gloo['bandwidth_bytes_per_ms'] / 1e6:.2f} GB/s "
        "(fits).",
        "",
        "| message | shared one way ms | shared GB/s | Gloo one way ms | Gloo GB/s |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for s, g in zip(shared["samples"], gloo["samples"]):
        lines.append(f"| {s['bytes'] // 1024} KiB | {s['one_way_ms']:.3f} "
                     f"| {s['bytes'] / s['one_way_ms'] / 1e6:.2f} | {g['one_way_ms']:.3f} "
                     f"| {g['bytes'] / g['one_way_ms'] / 1e6:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
