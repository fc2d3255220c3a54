#!/usr/bin/env python3
"""The balancer benchmark: `balance_bench` (Google Benchmark) times the exact partitioner at 1,000
and 10,000 layers and the planner's whole search, and measures how far the heuristics' bottleneck
is above the optimum on 2,000 random instances. Raw Google Benchmark JSON of both runs in
reports/balance-bench.json, the summary made from it in reports/balance-bench.md.

Usage: bench/balance-bench.py [--build build] [--allow-dirty]
Run it on an otherwise idle machine, from a clean checkout built with -DPIPEBAL_BUILD_BENCH=ON."""
import argparse
import json
import os
import tempfile

from bench_support import binary, meta, run, write_json, write_text

DISTRIBUTIONS = {0: "uniform(0, 1)", 1: "log-normal(0, 1)"}
ALGORITHMS = {1: "blockpartition", 2: "uniform", 3: "parameters"}


def google_benchmark(bench, arguments):
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "out.json")
        run([bench, *arguments, f"--benchmark_out={out}", "--benchmark_out_format=json"])
        with open(out) as f:
            return json.load(f)


def args_of(name):
    """'BM_X/layers:1000/stages:8/constrained:0_median' -> {'layers': 1000, ...}."""
    values = {}
    for part in name.split("/")[1:]:
        key, _, value = part.partition(":")
        values[key] = int(value.split("_")[0])
    return values


def ms(value):
    return f"{value:.2f} ms" if value < 10 else f"{value:.0f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--allow-dirty", action="store_true")
    args = ap.parse_args()
    made = meta(args.allow_dirty)
    bench = binary(args.build, "bench/balance_bench", args.allow_dirty)
    timing = google_benchmark(bench, ["--benchmark_filter=DpPartition|PlanSearch",
                                      "--benchmark_repetitions=5",
                                      "--benchmark_report_aggregates_only=true"])
    quality = google_benchmark(bench, ["--benchmark_filter=Quality"])
    write_json("reports/balance-bench.json", {"made": made, "timing": timing, "quality": quality})

    lines = [
        "# Balancer benchmark", "",
        "Made by `bench/balance-bench.py` (`bench/balance_bench.cpp`, Google Benchmark); raw "
        "output of both runs in [`balance-bench.json`](balance-bench.json).", "",
        f"- Machine: {made['machine']}, commit {made['commit']}, {made['date']}; Release build.",
        "- Timing: 5 repetitions, medians. Quality: one pass over 2,000 seeded instances (the "
        "ratios do not depend on the machine).", "",
        "## Exact partitioner (`dp`) and planner time", "",
        "`dp`: random per-layer costs (log-normal), GPipe, checkpoint `except_last`, 4 "
        "micro-batches; \"constrained\" adds a memory cap 10% above the tightest feasible one, "
        "every third device at half speed and a 10 GB/s link. Planner: 100 layers measured at "
        "micro-batch sizes 1-256, 8 devices, every configuration (`BM_PlanSearch`).", "",
        "| benchmark | layers | stages / devices | constraints | median wall time | "
        "median CPU time |",
        "| --- | ---: | ---: | --- | ---: | ---: |"]
    for b in timing["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        a = args_of(b["run_name"])
        if b["run_name"].startswith("BM_DpPartition"):
            kind, devices = "dp", a["stages"]
            constraints = "caps + speeds + bandwidth" if a["constrained"] else "none"
        else:
            kind, devices = "plan search", a["devices"]
            constraints = "with replicas" if a["data_parallel"] else "-"
        lines.append(f"| {kind} | {a['layers']:,} | {devices} | {constraints} | "
                     f"{ms(b['real_time'])} | {ms(b['cpu_time'])} |")
    lines += [
        "", "## Quality of the other partitioners: bottleneck / optimum", "",
        "2,000 random instances per row, the same instances for every algorithm: n uniform in "
        "[8, 128] layers, k uniform in [2, 8] stages, per-layer forward + backward time drawn "
        "from the given distribution (backward = 2 × forward), parameter bytes drawn "
        "independently of time, no recomputation. The optimum is `dp`'s bottleneck.", "",
        "| algorithm | layer costs | mean | median | p90 | max | optimal on |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    rows = []
    for b in quality["benchmarks"]:
        a = args_of(b["run_name"])
        rows.append((a["costs"], a["algorithm"], b))
    for costs, algorithm, b in sorted(rows, key=lambda r: (r[0], r[1])):
        lines.append(f"| {ALGORITHMS[algorithm]} | {DISTRIBUTIONS[costs]} | "
                     f"{b['ratio_mean']:.3f} | {b['ratio_median']:.3f} | {b['ratio_p90']:.3f} | "
                     f"{b['ratio_max']:.3f} | {100 * b['optimal_share']:.1f}% |")
    lines += ["", "`blockpartition` is torchgpipe's heuristic (`balance_by_time`); `parameters` "
              "balances parameter bytes like DeepSpeed's default `partition_balanced`, which here "
              "is unrelated to time by construction. On real profiles: "
              "[`zoo-balance.md`](zoo-balance.md)."]
    write_text("reports/balance-bench.md", lines)


if __name__ == "__main__":
    main()
