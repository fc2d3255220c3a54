#!/usr/bin/env python3
"""The profiler benchmark: `profiler_bench` makes five independent profiles of a small CPU
configuration of every zoo family and measures each model's whole forward + backward; the raw
numbers go to reports/profiler-bench.json and the summary made from them to
reports/profiler-bench.md: repeatability (per layer, the coefficient of variation of its median
over the profiles) and additivity (the per-layer sum against the whole pass).

Usage: bench/profiler-bench.py [--build build] [--profiles 5] [--repeat 10] [--allow-dirty]
Run it on an otherwise idle machine, from a clean checkout built with -DPIPEBAL_BUILD_BENCH=ON."""
import argparse
import json

from bench_support import binary, meta, run, write_json, write_text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--profiles", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--allow-dirty", action="store_true")
    args = ap.parse_args()
    made = meta(args.allow_dirty)
    command = [binary(args.build, "bench/profiler_bench", args.allow_dirty),
               "--profiles", str(args.profiles),
               "--threads", "1", "--repeat", str(args.repeat), "--warmup", "2"]
    doc = json.loads(run(command))
    doc["made"] = made
    doc["command"] = " ".join(["profiler_bench"] + command[1:])
    write_json("reports/profiler-bench.json", doc)

    env = doc["environment"]
    lines = [
        "# Profiler benchmark", "",
        f"Made by `bench/profiler-bench.py` (`bench/profiler_bench.cpp`): {args.profiles} "
        "independent profiles of a small CPU configuration of every zoo family; raw numbers "
        "(per-layer medians and CVs, every profile's wall time) in `profiler-bench.json`.", "",
        f"- Machine: {made['machine']}, LibTorch {env['libtorch_version']}, commit "
        f"{made['commit']}, allocator {env['allocator'].split('-')[0]}, {made['date']}. One "
        f"intra-op thread, 2 warm-up and {args.repeat} timed passes per profile, wall-clock "
        f"backend. The whole run took {doc['total_wall_s']:.1f} s.",
        "- Repeatability: per layer, the coefficient of variation of its median over the "
        "profiles; the median layer and the worst layer.",
        "- Additivity: the sum of the per-layer forward and backward times of one profile "
        "(each layer's median, scaled so that the layers of a pass add up to the median pass) "
        "against a measured whole-model forward + backward (autograd from the output with a "
        "gradient of ones, as the profiler does) on a training-mode clone, measured after the "
        "profiles.", "",
        "| model | input | layers | profile s | fwd CV med / max | bwd CV med / max | sum ms | "
        "whole ms | sum / whole |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for m in doc["models"]:
        lines.append(
            f"| `{m['model']}` | {m['input_shape']} | {m['layers']} | "
            f"{m['profile_wall_s_median']:.2f} | {m['forward_cv_median']:.3f} / "
            f"{m['forward_cv_max']:.3f} | {m['backward_cv_median']:.3f} / "
            f"{m['backward_cv_max']:.3f} | {m['sum_of_layers_ms']:.2f} | "
            f"{m['whole_model_ms']:.2f} | {m['sum_over_whole']:.2f} |")
    lines += ["", "The GPU check (CUPTI, events and wall clock on an H200) is in "
              "[`gpu-check.md`](gpu-check.md)."]
    write_text("reports/profiler-bench.md", lines)


if __name__ == "__main__":
    main()
