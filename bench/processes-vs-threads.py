#!/usr/bin/env python3
"""Threads vs processes: the same plan trained as 2 threads of one process (`pipebal train`)
and as 2 processes (`pipebal launch --nproc-per-node 2 -- pipebal train`), their messages in
shared memory and, with PIPEBAL_SHM_DISABLE=1, through Gloo on loopback, in interleaved
rounds, for a GPT and a U-Net at 1, 4 and 8 micro-batches; the link between two processes
measured by `pipebal link` both ways for 64 KiB - 64 MiB; and the simulator's prediction of
each process run from the profile plus its measured link.

A shared VM's speed drifts by tens of percent within minutes, which a profile taken up front
cannot follow: after each round the model is profiled again, and each run is predicted once more
from those profiles pooled (each layer's time the median over the rounds' profiles: "in turns"),
which the machine's drift between profile and runs does not move. The up-front prediction, what a
user gets, is shown beside it.

Writes the raw measurements (JSON) and the markdown summary made from them.
Usage: bench/processes-vs-threads.py [--build build] [--rounds 5] [--steps 10] [--from-raw]
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
    ("gpt", "gpt:layers=6,dim=128,heads=4,seq=64,vocab=1000,dropout=0", "64,64"),
    ("unet", "unet:B=3,C=8", "32,3,64,64"),
]
CHUNKS = [1, 4, 8]
# How the two processes' messages travel, and the environment that makes them.
WAYS = {"shared": {}, "gloo": {"PIPEBAL_SHM_DISABLE": "1"}}
RAW = "reports/processes-vs-threads-raw.json"
MD = "reports/processes-vs-threads.md"


def with_env(extra):
    env = dict(os.environ)
    env.update(extra)
    return env


def measure(pipebal, args, work):
    launch = [pipebal, "launch", "--nproc-per-node", "2", "--master-port", "0", "--"]

    links = {}
    for way, env in WAYS.items():
        print(f"measuring the link ({way}) ...", file=sys.stderr)
        link_file = os.path.join(work, "link.json")
        run(launch + [pipebal, "link", "--sizes", "64K,256K,1M,4M,16M,64M", "--repeats", "20",
                      "-o", link_file], env=with_env(env))
        links[way] = json.load(open(link_file))

    raw = {"cores": os.cpu_count(), "rounds": args.rounds, "steps": args.steps, "links": links,
           "cases": []}
    for name, spec, shape in MODELS:
        for chunks in CHUNKS:
            print(f"{name}, {chunks} micro-batches: profile and balance ...", file=sys.stderr)
            profile = os.path.join(work, f"{name}-{chunks}.json")
            # One thread, as each stage trains; with several micro-batches the other stage
            # keeps the other core busy meanwhile, so a co-runner does while layers are timed.
            profile_command = [pipebal, "profile", "--model", spec, "--input-shape", shape,
                               "--chunks", str(chunks), "--threads", "1", "--co-runners",
                               "1" if chunks > 1 else "0", "-q"]
            run(profile_command + ["-o", profile])
            plan_threads = json.loads(run([pipebal, "balance", profile, "--stages", "2",
                                           "--json"]))
            balance = ",".join(map(str, plan_threads["balance"]))
            case = {"model": spec, "input_shape": shape, "chunks": chunks, "balance": balance,
                    "predicted_free_ms": plan_threads["prediction"]["step_ms"],
                    "threads_ms": []}
            doc = json.load(open(profile))
            for way in WAYS:
                case[f"predicted_{way}_ms"] = predict(pipebal, doc, links[way], balance, profile)
                case[f"{way}_ms"] = []
            rounds_profiles = []
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
                run(profile_command + ["-o", profile])
                rounds_profiles.append(json.load(open(profile)))
            pooled = pooled_profile(rounds_profiles)
            case["predicted_in_turns_free_ms"] = predict(pipebal, pooled, None, balance, profile)
            for way in WAYS:
                case[f"predicted_in_turns_{way}_ms"] = predict(pipebal, pooled, links[way],
                                                               balance, profile)
            raw["cases"].append(case)
    return raw


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    bench_support.report_main(ap, RAW, MD, measure, summary)


# Layer and engine times of profiles taken in turns with the runs: each the median over rounds.
TIMES = ("forward_ms", "backward_ms", "weight_ms", "input_grad_ms")


def pooled_profile(rounds):
    pooled = json.loads(json.dumps(rounds[0]))
    for i, layer in enumerate(pooled["layers"]):
        for key in TIMES:
            if key in layer:
                layer[key] = statistics.median(r["layers"][i][key] for r in rounds)
    if "engine" in pooled:
        for key in pooled["engine"]:
            pooled["engine"][key] = statistics.median(r["engine"][key] for r in rounds)
    return pooled


# The simulated step of `balance` on 2 stages from the profile document `doc`, with `link` as
# its measured link (None: free transfers); `path` is scratch space for the document.
def predict(pipebal, doc, link, balance, path):
    doc = dict(doc)
    doc.pop("link", None)
    if link is not None:
        doc["link"] = link
    json.dump(doc, open(path, "w"))
    plan = json.loads(run([pipebal, "balance", path, "--stages", "2", "--balance", balance,
                           "--json"]))
    return plan["prediction"]["step_ms"]


def summary(raw):
    lines = [
        "# Threads vs processes",
        "",
        f"Made by `bench/processes-vs-threads.py` at commit `{raw['commit']}` on "
        f"{raw['machine']}, {raw['date']}; raw data: `{os.path.basename(RAW)}`. "
        f"Each case alternates a 2-thread run, a 2-process run with the messages in shared "
        f"memory and one with them through Gloo on loopback (`PIPEBAL_SHM_DISABLE=1`), "
        f"{raw['rounds']} times, {raw['steps']} measured steps each; a ratio is per round "
        "(processes / threads), its median reported. Predictions come from a one-thread profile "
        "(with a co-runner thread training the model alongside at more than one micro-batch, as "
        "the other stage does) by the simulator, with free transfers and with the link "
        "measured by `pipebal link` the same way; the error is the prediction's against the "
        "median process step. Up front: from the profile taken before the runs, what a user "
        "gets. In turns: from the same profile taken again after each round, pooled (each "
        "layer's time the median over rounds), which the machine's drift between profile and "
        "runs does not move. Threads apart: the slowest of the case's 2-thread runs over its "
        "fastest, the same work measured at different moments.",
        "",
        "| model | micro-batches | balance | threads ms | threads apart | shared memory ms "
        "| shared / threads | Gloo ms | Gloo / threads | predicted (free) ms, up front "
        "| shared: predicted ms (error) up front | in turns | Gloo: predicted ms (error) up front "
        "| in turns |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: |",
    ]
    errors = {"up front": [], "in turns": []}
    for c in raw["cases"]:
        threads = statistics.median(c["threads_ms"])
        cells = []
        for way in WAYS:
            ratios = [p / t for p, t in zip(c[f"{way}_ms"], c["threads_ms"])]
            cells.append(f"{statistics.median(c[f'{way}_ms']):.1f} "
                         f"| {statistics.median(ratios):.3f}")
        predicted = []
        for way in WAYS:
            measured = statistics.median(c[f"{way}_ms"])
            for when, key in (("up front", f"predicted_{way}_ms"),
                              ("in turns", f"predicted_in_turns_{way}_ms")):
                if key not in c:  # raw data from before the profiles in turns
                    predicted.append("-")
                    continue
                error = c[key] / measured - 1
                errors[when].append(abs(error))
                predicted.append(f"{c[key]:.1f} ({error:+.1%})")
        lines.append(
            f"| `{c['model']}` [{c['input_shape']}] | {c['chunks']} | [{c['balance']}] "
            f"| {threads:.1f} | {max(c['threads_ms']) / min(c['threads_ms']):.2f} "
            f"| {' | '.join(cells)} | {c['predicted_free_ms']:.1f} "
            f"| {' | '.join(predicted)} |")
    lines.append("")
    for way, name in (("shared", "in shared memory"), ("gloo", "through Gloo")):
        ratios = [statistics.median(p / t for p, t in zip(c[f"{way}_ms"], c["threads_ms"]))
                  for c in raw["cases"]]
        within = sum(abs(r - 1) <= 0.05 for r in ratios)
        lines.append(f"Processes {name} within 5% of threads: {within} of {len(ratios)} cases.")
    for when, errs in errors.items():
        if not errs:
            continue
        within = sum(e <= 0.10 for e in errs)
        lines.append(f"Predicted {when}: {within} of {len(errs)} process runs within 10% "
                     f"(largest error {max(errs):.1%}).")
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
    return lines


if __name__ == "__main__":
    main()
