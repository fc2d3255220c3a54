#!/usr/bin/env python3
"""Does `pipebal launch --bind-cores` pay? The same plan trained as 2 processes sharing the
launcher's cores (the default, as under torchrun) and as 2 processes each pinned to its own share
(`--bind-cores`), in interleaved rounds whose order alternates, for a GPT and a U-Net at 1 and 4
micro-batches and 1 intra-op thread per stage; a ratio is per round (bound / shared), its median
reported.

Writes the raw measurements (JSON) and the markdown summary made from them.
Usage: bench/bind-cores.py [--build build] [--rounds 7] [--steps 10] [--from-raw]
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
    ("gpt:layers=6,dim=128,heads=4,seq=64,vocab=1000,dropout=0", "64,64"),
    ("unet:B=3,C=8", "32,3,64,64"),
]
CHUNKS = [1, 4]
WAYS = {"shared": [], "bound": ["--bind-cores"]}
RAW = "reports/bind-cores-raw.json"
MD = "reports/bind-cores.md"


def measure(pipebal, args, work):
    raw = {"cores": os.cpu_count(), "rounds": args.rounds, "steps": args.steps, "cases": []}
    for spec, shape in MODELS:
        for chunks in CHUNKS:
            print(f"{spec}, {chunks} micro-batches: profile and balance ...", file=sys.stderr)
            profile = os.path.join(work, "profile.json")
            run([pipebal, "profile", "--model", spec, "--input-shape", shape, "--chunks",
                 str(chunks), "--threads", "1", "-q", "-o", profile])
            plan = json.loads(run([pipebal, "balance", profile, "--stages", "2", "--json"]))
            balance = ",".join(map(str, plan["balance"]))
            case = {"model": spec, "input_shape": shape, "chunks": chunks, "balance": balance,
                    "shared_ms": [], "bound_ms": []}
            train = [pipebal, "train", "--model", spec, "--input-shape", shape, "--balance",
                     balance, "--chunks", str(chunks), "--threads", "1", "--steps",
                     str(args.steps), "--warmup-steps", "2", "-q"]
            for r in range(args.rounds):
                print(f"  round {r + 1}/{args.rounds}", file=sys.stderr)
                # Alternating the order: neither way always runs on a machine the other warmed.
                order = list(WAYS) if r % 2 == 0 else list(reversed(WAYS))
                for way in order:
                    out = os.path.join(work, "run.json")
                    run([pipebal, "launch", "--nproc-per-node", "2", "--master-port", "0"]
                        + WAYS[way] + ["--"] + train + ["-o", out])
                    case[f"{way}_ms"].append(json.load(open(out))["median_step_ms"])
            raw["cases"].append(case)
    return raw


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=10)
    bench_support.report_main(ap, RAW, MD, measure, summary)


def summary(raw):
    lines = [
        "# Cores of their own: launch --bind-cores",
        "",
        f"Made by `bench/bind-cores.py` at commit `{raw['commit']}` on {raw['machine']}, "
        f"{raw['date']}; raw data: `{os.path.basename(RAW)}`. Each case trains one plan (dp's "
        "balance for 2 stages, 1 intra-op thread each) as 2 processes of `pipebal launch`: "
        "sharing the launcher's cores (the default, as under torchrun) and with `--bind-cores` "
        f"(each pinned to its share), {raw['rounds']} rounds in alternating order, "
        f"{raw['steps']} measured steps each after 2 warm-up steps; times are the runs' median "
        "steps, a ratio is per round (bound / shared), its median and range reported. Apart: "
        "the slowest of a way's runs over its fastest, the same work at different moments.",
        "",
        "| model | micro-batches | balance | shared ms | apart | bound ms | apart "
        "| bound / shared (range) |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    medians = []
    for c in raw["cases"]:
        ratios = [b / s for b, s in zip(c["bound_ms"], c["shared_ms"])]
        medians.append(statistics.median(ratios))
        cells = [f"{statistics.median(c[f'{way}_ms']):.1f} "
                 f"| {max(c[f'{way}_ms']) / min(c[f'{way}_ms']):.2f}" for way in WAYS]
        lines.append(
            f"| `{c['model']}` [{c['input_shape']}] | {c['chunks']} | [{c['balance']}] "
            f"| {' | '.join(cells)} | {medians[-1]:.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |")
    faster = sum(m < 0.97 for m in medians)
    slower = sum(m > 1.03 for m in medians)
    lines += [
        "",
        f"Bound more than 3% faster in {faster} of {len(medians)} cases, more than 3% slower in "
        f"{slower} (runs of the same work are up to "
        f"{max(max(c[w + '_ms']) / min(c[w + '_ms']) for c in raw['cases'] for w in WAYS):.2f}x "
        "apart). With one thread per process and as many cores as processes there is little "
        "for pinning to prevent; where it may matter -- processes of several intra-op threads "
        "each, more processes than a socket's cores -- this 2-core machine cannot show.",
    ]
    return lines


if __name__ == "__main__":
    main()
