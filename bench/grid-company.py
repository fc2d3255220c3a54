#!/usr/bin/env python3
"""Does a configuration run slower in the planner grid's company than with a few others? In the
planner grid (`bench/planner-grid.py`) the plain model on 2 threads has measured up to 10% slower
than its profile on conv nets, while a run of it on its own matched the profile. This measures
the question directly: per model, rounds of two `pipebal validate --auto --bind-cores
--profile-in-turns` runs, their order alternating round by round --

  - "few": `--top 1`: the plan's pick, the plain model on one thread and on 2 threads (3 to 5
    configurations);
  - "grid": `--top 0` with the grid's search (stages 1-2, chunks 1-16, gpipe and 1f1b,
    checkpoint never and except_last): about 35 configurations, each with its model and its
    threads alive in the process, stepped in turns.

For the plain model on one thread and on 2 threads it reports, per company, the median over
rounds of the error of the prediction made from the profile taken in turns with the runs (the
machine's drift between the profile and the runs drops out of it), and of the ratio of the
2-thread step to the one-thread step measured round by round in the same process (which a slow
spell of the machine moves little). If the grid's company slowed the 2-thread run, its error
and its ratio would differ between the two companies.

Writes the raw plan-validation documents (JSON) and the markdown summary made from them.
Usage: bench/grid-company.py [--build build] [--rounds 3] [--steps 5] [--models resnet,amoebanetd]
       [--from-raw]
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
    ("resnet", "resnet:depth=18,width=16", "32,3,64,64"),
    ("amoebanetd", "amoebanetd:L=2,D=16", "32,3,64,64"),
    ("unet", "unet:B=3,C=8", "32,3,64,64"),
]
RAW = "reports/grid-company-raw.json"
MD = "reports/grid-company.md"
COMPANIES = {
    "few": ["--top", "1"],
    "grid": ["--top", "0", "--schedules", "gpipe,1f1b", "--checkpoints", "never,except_last"],
}


def validate(pipebal, spec, shape, company, steps, out):
    run([pipebal, "validate", "--model", spec, "--input-shape", shape, "--auto", "--devices", "2",
         "--bind-cores", "--steps", str(steps), "--warmup-steps", "2", "--profile-in-turns",
         "-o", out] + COMPANIES[company])
    return json.load(open(os.path.join(out, "plan-validation.json")))


def measure(pipebal, args, work, save):
    chosen = args.models.split(",")
    raw = {"pipebal": run([pipebal, "--version"]).strip(), "rounds": args.rounds,
           "steps": args.steps, "models": []}
    for name, spec, shape in MODELS:
        if name not in chosen:
            continue
        model = {"name": name, "spec": spec, "input_shape": shape, "rounds": []}
        raw["models"].append(model)
        for r in range(args.rounds):
            # Alternating which goes first: a machine slowing through the round hits both alike.
            order = ["few", "grid"] if r % 2 == 0 else ["grid", "few"]
            measured = {}
            for company in order:
                print(f"{name}, round {r + 1} of {args.rounds}: {company} ...", file=sys.stderr,
                      flush=True)
                measured[company] = validate(pipebal, spec, shape, company, args.steps,
                                             os.path.join(work, f"{name}-{r}-{company}"))
            model["rounds"].append({"order": order, **measured})
            save(raw)  # after every round: a long run keeps what it measured
    return raw


def plain_on(doc, threads):
    """The plain model on one device (threads 1) or on `threads` threads, by its label."""
    label = "plain" if threads == 1 else f"plain, {threads} threads"
    return next(c for c in doc["configurations"] if label in c["labels"])


def error_in_turns(c):
    return 100 * (c["predicted_in_turns_step_ms"] / c["measured_step_ms"] - 1)


def two_over_one(doc):
    """The 2-thread step over the one-thread step, the median over rounds of their steps' ratio
    in the same round."""
    two, one = plain_on(doc, 2)["measured_steps_ms"], plain_on(doc, 1)["measured_steps_ms"]
    return statistics.median(a / b for a, b in zip(two, one) if a > 0 and b > 0)


def median_of(rounds, company, value):
    return statistics.median(value(r[company]) for r in rounds)


def summary(raw):
    lines = [
        "# A run in the grid's company",
        "",
        f"Made by `bench/grid-company.py` at commit `{raw['commit']}` on {raw['machine']}, "
        f"{raw['date']}; raw data: `grid-company-raw.json`. Per model, {raw['rounds']} rounds of "
        "two `pipebal validate --auto --devices 2 --bind-cores --profile-in-turns` runs, "
        f"{raw['steps']} measured rounds each after 2 warm-up rounds, their order alternating: "
        "\"few\" (`--top 1`: the plan's pick and the plain model on one thread and on 2 threads) "
        "and \"grid\" (`--top 0`, the planner grid's search: every configuration of stages 1-2, "
        "chunks 1-16, gpipe and 1f1b, checkpoint never and except_last, each alive in the "
        "process and stepped in turns). Error in turns: the plain model's measured median step "
        "against its prediction from the profile taken in turns with the runs (for 2 threads, "
        "on the thread of its own run), the median over rounds. 2 threads / 1 thread: the 2-thread "
        "step over the one-thread step in the same measured round, the median over rounds, then "
        "over the bench's rounds. If the grid's company slowed a run, its columns would differ "
        "between \"few\" and \"grid\".",
        "",
        "| model | configurations (few / grid) | 1 thread: error in turns, few | grid "
        "| 2 threads: error in turns, few | grid | 2 threads / 1 thread, few | grid "
        "| 2-thread step ms, few | grid |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in raw["models"]:
        rounds = m["rounds"]
        counts = " / ".join(str(round(statistics.median(len(r[c]["configurations"])
                                                        for r in rounds))) for c in COMPANIES)

        def cells(value, fmt):
            return " | ".join(fmt.format(median_of(rounds, c, value)) for c in COMPANIES)

        lines.append(
            f"| {m['name']} (`{m['spec']}` [{m['input_shape']}]) | {counts} | "
            + cells(lambda d: error_in_turns(plain_on(d, 1)), "{:+.1f}%") + " | "
            + cells(lambda d: error_in_turns(plain_on(d, 2)), "{:+.1f}%") + " | "
            + cells(two_over_one, "{:.3f}") + " | "
            + cells(lambda d: plain_on(d, 2)["measured_step_ms"], "{:.1f}") + " |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--models", default="resnet,amoebanetd")
    bench_support.report_main(ap, RAW, MD, measure, summary, keep_partial=True)


if __name__ == "__main__":
    main()
