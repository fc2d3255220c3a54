#!/usr/bin/env python3
"""The engine benchmark: `engine_bench` on an MLP and a GPT (every configuration a fresh copy of
the same model and data, one warm-up step, then the configurations interleaved for --repeats
rounds), its raw samples in reports/engine-bench-{mlp,gpt}.json and the summary made from them in
reports/engine-bench.md.

Usage: bench/engine-bench.py [--build build] [--repeats 15] [--allow-dirty]
Run it on an otherwise idle machine, from a clean checkout built with -DPIPEBAL_BUILD_BENCH=ON."""
import argparse
import json

from bench_support import binary, meta, run, write_json, write_text

MODELS = [
    ("mlp", "mlp:layers=8,width=1024", "256,1024"),
    ("gpt", "gpt:layers=6,dim=128,heads=4,seq=64", "32,64"),
]


def mib(n):
    return f"{n / 2**20:.1f} MiB"


def section(doc):
    r = doc["ratios"]
    lines = [f"## `{doc['model']}`, input {doc['input_shape']}", "",
             "| configuration | balance | median step ms | peak memory per stage |",
             "| --- | --- | ---: | --- |"]
    for c in doc["results"]:
        balance = str(c["balance"]) if c["balance"] else "-"
        lines.append(f"| {c['config']} | {balance} | {c['median_step_ms']:.1f} | "
                     f"{', '.join(mib(b) for b in c['peak_bytes_per_stage'])} |")
    lines += [
        "",
        f"- chunks 8 over chunks 1, same balance, 2 stages: "
        f"**{r['speedup_chunks8_over_chunks1_gpipe']:.2f}x** GPipe, "
        f"**{r['speedup_chunks8_over_chunks1_1f1b']:.2f}x** 1F1B (paired per round: "
        f"{r['paired_speedup_chunks8_over_chunks1_gpipe']:.2f}x, "
        f"{r['paired_speedup_chunks8_over_chunks1_1f1b']:.2f}x; fill-and-drain bound for 2 "
        f"stages and 8 micro-batches: {r['fill_drain_bound_chunks8']:.2f}x).",
        f"- engine, 1 stage, 1 chunk, no checkpointing, vs the plain model's forward + backward: "
        f"**{r['engine_efficiency_1stage_vs_plain']:.3f}x** (plain time / engine time; paired "
        f"per round: {r['paired_engine_efficiency_1stage_vs_plain']:.3f}x). The plain model on "
        f"a worker thread instead of the main one: {r['paired_worker_thread_vs_plain']:.3f}x of "
        f"its main-thread speed; the engine against that: "
        f"{r['paired_engine_efficiency_1stage_vs_plain_on_worker']:.3f}x (both paired).",
        f"- GPipe / 1F1B step time: {r['gpipe_over_1f1b_step']:.3f}; checkpoint always / never "
        f"step time: {r['checkpoint_always_over_never_step']:.3f}.",
        ""]
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--allow-dirty", action="store_true")
    args = ap.parse_args()
    made = meta(args.allow_dirty)
    bench = binary(args.build, "bench/engine_bench", args.allow_dirty)
    docs = []
    for name, spec, shape in MODELS:
        doc = json.loads(run([bench, "--model", spec, "--input-shape", shape,
                              "--repeats", str(args.repeats)]))
        doc["made"] = made
        write_json(f"reports/engine-bench-{name}.json", doc)
        docs.append(doc)
    env = docs[0]["environment"]
    lines = [
        "# Engine benchmark", "",
        "Made by `bench/engine-bench.py` (`bench/engine_bench.cpp`, which prints JSON; raw samples "
        "in `engine-bench-mlp.json` and `engine-bench-gpt.json`). Every configuration is a fresh "
        "copy of the same model and data; one warm-up step is discarded, then the configurations "
        f"run interleaved, {args.repeats} rounds; the tables give medians, and ratios are of "
        "medians from the same run, plus the median of the ratios of steps run in the same round "
        "(\"paired\"). Peak memory is measured in a separate step per configuration by the "
        "counting CPU allocator, per stage: what the step allocates at its peak above the "
        "parameters and gradient buffers.", "",
        f"- Machine: {made['machine']}, LibTorch {env['libtorch_version']}, "
        f"{env['build_type']}, commit {made['commit']}, allocator {env['allocator'].split('-')[0]}; "
        f"one intra-op thread per stage and for the plain model.",
        f"- Date: {made['date']}.", ""]
    for doc in docs:
        lines += section(doc)
    write_text("reports/engine-bench.md", lines)


if __name__ == "__main__":
    main()
