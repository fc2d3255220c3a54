#!/usr/bin/env python3
"""The planner's promise, measured: for each model, `pipebal validate --auto --top 0` profiles it
at micro-batch counts 1, 2, 4, 8, 16 (and the plain model on 2 threads), plans it for 2 CPU
devices, then trains the whole grid the planner searched -- stages 1-2, chunks 1-16, gpipe and
1f1b, checkpoint never and except_last, plus the plain model on 2 threads -- side by side, step by
step in turns (every configuration's median over the same rounds). The summary says where the
planner's pick falls in the measured grid and how far its prediction was, beside pipebal's
default configuration (2 stages, 4 micro-batches, gpipe, except_last) and the user-chosen
"chunks 8" (2 stages, 8 micro-batches, same schedule).

Writes the raw plan-validation documents (JSON) and the markdown summary made from them.
Since 2026-12-07 it passes `--bind-cores` (each device's stage on a core of its own, planned
with the cores' measured speeds); `--unpinned` leaves the threads to the scheduler, as before.
Usage: bench/planner-grid.py [--build build] [--steps 5] [--models unet,gpt] [--unpinned]
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
    ("mlp-narrow", "mlp:layers=16,width=64", "256,64"),
    ("mlp-wide", "mlp:layers=16,width=512", "256,512"),
    ("gpt", "gpt:layers=6,dim=128,heads=4,seq=64,vocab=1000,dropout=0", "32,64"),
    ("unet", "unet:B=3,C=8", "32,3,64,64"),
    ("resnet", "resnet:depth=18,width=16", "32,3,64,64"),
    ("amoebanetd", "amoebanetd:L=2,D=16", "32,3,64,64"),
]




def find(configs, label=None, **shape):
    for c in configs:
        if label is not None and label in c["labels"]:
            return c
        if label is None and all(c[k] == v for k, v in shape.items()):
            return c
    return None


def describe(c):
    if c["stages"] == 1 and c["chunks"] == 1:
        threads = c.get("threads_per_stage", 0)
        return f"plain, {threads} threads" if threads > 1 else "plain"
    return f"{c['stages']} st, {c['chunks']} mb, {c['schedule']}, {c['checkpoint']}"


def same_work(c):
    """Configurations that run the same actions: with one micro-batch, gpipe and 1f1b run the
    same order and except_last checkpoints nothing, as never."""
    schedule, checkpoint = c["schedule"], c["checkpoint"]
    if c["chunks"] == 1 and schedule in ("gpipe", "1f1b"):
        schedule = "gpipe/1f1b"
        if checkpoint == "except_last":
            checkpoint = "never"
    return (c["stages"], c["chunks"], schedule, checkpoint, c.get("threads_per_stage", 0),
            tuple(c["balance"]))


def median_ratio_by_round(a, b):
    """How much slower a stepped than b, round by round: the median over rounds of a's step over
    b's in the same round (reports::median_ratio_by_round). A slow spell of the machine slows
    both steps of a round alike, so this moves far less than the ratio of their medians. Rounds
    where either step is not positive are left out; NaN when none is left."""
    ratios = [x / y for x, y in zip(a, b) if x > 0 and y > 0]
    return statistics.median(ratios) if ratios else float("nan")


def summary_row(name, spec, shape, doc):
    configs = doc["configurations"]
    # Runs of the same work are samples of one thing: each is measured as their median, and round
    # by round as the median of their steps in each round.
    groups, group_steps = {}, {}
    for c in configs:
        groups.setdefault(same_work(c), []).append(c["measured_step_ms"])
        group_steps.setdefault(same_work(c), []).append(c.get("measured_steps_ms"))
    measured = {k: statistics.median(v) for k, v in groups.items()}
    by_round = all(all(s) for s in group_steps.values())  # raw data from before 2026-12-07: no
    rounds = {k: [statistics.median(steps) for steps in zip(*v)]
              for k, v in group_steps.items()} if by_round else {}

    def measured_ms(c):
        return measured[same_work(c)]

    def ms(c):
        return f"{measured_ms(c):.1f}" if c else "-"

    pick = find(configs, label="recommended") or configs[0]  # older data: "plan 1" came first
    fastest_predicted = min(configs, key=lambda c: c["predicted_rank"])
    passed_over = ("-" if fastest_predicted is pick else
                   f"{describe(fastest_predicted)} ({fastest_predicted['predicted_step_ms']:.1f} "
                   f"predicted, {ms(fastest_predicted)} measured)")
    best = min(configs, key=measured_ms)
    default = find(configs, label="yours")
    chunks8 = find(configs, stages=2, chunks=8, schedule="gpipe", checkpoint="except_last")
    plain = find(configs, label="plain")

    def error(predicted):
        return f"{100 * (predicted / measured_ms(pick) - 1):+.1f}%"

    # The configurations predicted again in turns (raw data from before 9fa4747: all but the plain
    # model on several threads).
    in_turns = [c for c in configs if "step_error_in_turns" in c]

    def median_abs(key):
        return f"{100 * statistics.median(abs(c[key]) for c in in_turns):.1f}%"

    def in_turns_of(c):
        if "predicted_in_turns_step_ms" not in c:
            return "- | -"
        return f"{c['predicted_in_turns_step_ms']:.1f} | {error(c['predicted_in_turns_step_ms'])}"

    # How far apart runs of the same work measured: the noise the comparisons sit in.
    slow, fast = max(((max(v), min(v)) for v in groups.values() if len(v) > 1),
                     key=lambda pair: pair[0] / pair[1], default=(0, 0))
    apart = f"{slow / fast:.2f} ({fast:.1f}-{slow:.1f})" if fast else "-"
    speeds = (", ".join(f"CPU {','.join(map(str, cpus))}: {speed:.2f}"
                        for cpus, speed in zip(doc["device_cpus"], doc["device_speeds"]))
              if doc.get("device_speeds") else "-")
    if doc.get("device_speeds_in_turns"):
        speeds += " (in turns " + ", ".join(
            f"{speed:.2f}" for speed in doc["device_speeds_in_turns"]) + ")"
    # What the machine changed between the profile and the runs: each configuration's prediction
    # up front over its prediction in turns, the median over configurations.
    drifts = [c["predicted_step_ms"] / c["predicted_in_turns_step_ms"] for c in in_turns
              if c.get("predicted_in_turns_step_ms")]
    drift = f"{statistics.median(drifts):.2f}" if drifts else "-"
    if by_round:
        # The pick against each configuration, round by round, and the one it lost most to; and
        # the largest such ratio between two runs of the same work.
        pick_steps = rounds[same_work(pick)]
        lost_to = max(rounds, key=lambda k: median_ratio_by_round(pick_steps, rounds[k]))
        behind = median_ratio_by_round(pick_steps, rounds[lost_to])
        lost_to_config = next(c for c in configs if same_work(c) == lost_to)
        pick_vs_best = f"{100 * (behind - 1):.1f}% ({describe(lost_to_config)})"
        apart_by_round = max((median_ratio_by_round(a, b) for v in group_steps.values()
                              for a in v for b in v if a is not b), default=None)
        apart += f" / {apart_by_round:.2f}" if apart_by_round else " / -"
    else:
        pick_vs_best = "-"
        apart += " / -"

    return (f"| {name} | {len(groups)} | {describe(pick)} | {passed_over} | "
            f"{pick['predicted_step_ms']:.1f} | "
            f"{ms(pick)} | {error(pick['predicted_step_ms'])} | "
            f"{in_turns_of(pick)} | "
            f"{median_abs('step_error')} / {median_abs('step_error_in_turns')} | {drift} | "
            f"{describe(best)} | {ms(best)} | "
            f"{100 * (measured_ms(pick) / measured_ms(best) - 1):.1f}% | {pick_vs_best} | "
            f"{ms(default)} | {ms(chunks8)} | {ms(plain)} | {apart} | {speeds} |")


def measure(pipebal, args, work, save):
    version = run([pipebal, "--version"]).strip()
    chosen = args.models.split(",")
    raw = {"pipebal": version, "steps": args.steps, "bind_cores": not args.unpinned,
           "models": []}
    for name, spec, shape in MODELS:
        if name not in chosen:
            continue
        print(f"{name}: profile, plan and train the grid ...", file=sys.stderr, flush=True)
        out = os.path.join(work, name)
        run([pipebal, "validate", "--model", spec, "--input-shape", shape, "--auto",
             "--devices", "2", "--top", "0", "--schedules", "gpipe,1f1b",
             "--checkpoints", "never,except_last", "--stages", "2", "--chunks", "4",
             "--steps", str(args.steps), "--warmup-steps", "2", "--profile-in-turns", "-o", out]
            + ([] if args.unpinned else ["--bind-cores"]))
        doc = json.load(open(os.path.join(out, "plan-validation.json")))
        raw["models"].append({"name": name, "spec": spec, "input_shape": shape, "result": doc})
        save(raw)  # after every model: a long run keeps what it measured
    return raw


def summary(raw):
    commit = raw["commit"]
    timed_twice = any(m["result"].get("device_times_ms") for m in raw["models"])
    lines = [
        "# The planner against the grid it searched",
        "",
        f"Made by `bench/planner-grid.py` at commit `{commit}` on {raw['machine']}, "
        f"{raw['date']}; raw data: `planner-grid-raw.json` (every configuration's "
        "`pipebal.plan-validation/1` entry). For each model `pipebal validate --auto --top 0` "
        "profiled micro-batch counts 1-16 at one thread (and the plain model at two; 3 rounds, "
        "pooled), planned for "
        "2 devices, and trained every configuration searched -- stages 1-2, chunks 1-16, gpipe and "
        "1f1b, checkpoint never and except_last, and the plain model on 2 threads -- side by side, "
        f"one step of each in turn, {raw['steps']} measured rounds after 2 warm-up rounds; times are "
        "each configuration's median step, and configurations that run the same work (with one "
        "micro-batch, gpipe and 1f1b with checkpoint never or except_last on the same balance) "
        "count once, as the median of their runs. After each measured round the model was profiled once "
        "more (`--profile-in-turns`), and every configuration predicted again from that profile "
        "with its balance kept (the plain model on 2 threads, since 9fa4747, from a profile "
        "taken on the thread of its own run, with that run's pool): \"in turns\" below, and the median absolute error of "
        "those configurations both ways; the difference between the two predictions is what the "
        "machine changed between the profile and the runs (\"up front over in turns\": the "
        "median over configurations of the ratio of the two; with pinned cores \"device "
        "speeds\" shows the speeds timed in turns in brackets). \"Same work apart\": the "
        "largest ratio "
        "between runs of one such group (and their ms), the noise the comparisons sit in, and the same "
        "round by round. \"Round by round\" (raw data since 2026-12-07, which has every "
        "measured step): the median over rounds of the ratio of two steps of the same round, "
        "which a slow spell of the machine moves far less than the ratio of medians from "
        "different rounds; the pick is set against every configuration so and the one it lost "
        "most to is named (a group of the same work steps as the median of its runs' steps in "
        "each round). The "
        "pick is the plan's recommendation: the fastest prediction, unless one that asks less of "
        "the machine is predicted within 5% of it (`--min-gain`; since 2026-12-04 also the plain "
        "model on one device over it on 2 threads, before only one that does not pipeline over "
        "one that does), which is then picked; the fastest prediction passed over is shown "
        "beside it." + (
            " Pinned (`--bind-cores`, since da62e0e): each device's stage ran on a core of its "
            "own, the plain model on one device on the fastest; the plan used the cores' speeds, "
            + ("timed on the plain model in 3 rounds before profiling (which ordered them) and 3 "
               "after it, each device's speed 1 over the mean of its time's ratio to the first "
               "device's in the same round (\"device speeds\"; since f57b70b, before from the "
               "rounds before profiling alone, as the ratio of medians)"
               if timed_twice else
               "timed on the plain model before profiling (\"device speeds\", relative to the "
               "fastest)")
            + ", and the in-turns predictions the speeds timed again after each round. "
            "Unpinned (raw data before da62e0e), the scheduler decided which runs landed on "
            "the slower core."
            if raw.get("bind_cores") else ""),
        "",
        "| model | distinct configurations | planner's pick | fastest predicted, passed over "
        "(--min-gain 5%) | predicted ms | measured ms | prediction error "
        "| predicted in turns ms | its error | median abs error (up front / in turns) "
        "| up front over in turns (median) | fastest measured | its ms | pick vs fastest | pick vs fastest, round by round "
        "| default (2 st, 4 mb) ms | chunks 8 ms "
        "| plain (1 thread) ms | same work apart (medians / round by round) | device speeds |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: "
        "| ---: "
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for entry in raw["models"]:
        lines.append(summary_row(entry["name"], entry["spec"], entry["input_shape"],
                                 entry["result"]))
    lines += ["", "Models: " + "; ".join(
        f"{e['name']} = `{e['spec']}` on [{e['input_shape']}]" for e in raw["models"]) + "."]
    return lines


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--models", default=",".join(m[0] for m in MODELS))
    ap.add_argument("--unpinned", action="store_true",
                    help="leave the stage threads to the scheduler (no --bind-cores)")
    bench_support.report_main(ap, "reports/planner-grid-raw.json", "reports/planner-grid.md",
                              measure, summary, keep_partial=True)
