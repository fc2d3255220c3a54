#!/usr/bin/env python3
"""Use a pipebal plan in a Python pipeline.

pipebal balances a model and writes plan.json; Python pipeline libraries take the same cut in
their own terms. This module turns a plan into both:

    import json, plan_to_python
    plan = json.load(open("plan.json"))

    # torchgpipe: layers per stage, for an nn.Sequential
    from torchgpipe import GPipe
    model = GPipe(model, balance=plan_to_python.torchgpipe_balance(plan), chunks=plan["chunks"])

    # torch.distributed.pipelining (PyTorch >= 2.4): split points by module name
    from torch.distributed.pipelining import pipeline, SplitPoint
    spec = {name: SplitPoint.BEGINNING for name in plan_to_python.split_points(plan)}
    pipe = pipeline(model, mb_args=(example_micro_batch,), split_spec=spec)

    # any nn.Sequential, without a library: the stage modules themselves
    stages = plan_to_python.split_sequential(model, plan)

`python3 tools/plan_to_python.py plan.json` prints the balance list and the split points.
The layer names are those of the model's top-level children, which pipebal's layers are.
"""
import collections
import json
import sys


def torchgpipe_balance(plan):
    """Layers per stage: torchgpipe.GPipe's `balance`."""
    return list(plan["balance"])


def split_points(plan):
    """The name of the first layer of every stage after the first."""
    points = []
    every = [name for stage in plan["stages"] for name in stage.get("layer_names", [])]
    for stage in plan["stages"][1:]:
        names = stage.get("layer_names")
        if not names:
            raise ValueError("the plan names no layers (made from a profile without names)")
        if every.count(names[0]) > 1:
            raise ValueError(f"{every.count(names[0])} layers are named {names[0]!r}: "
                             "a split point must name one layer")
        points.append(names[0])
    return points


def split_sequential(model, plan):
    """The stages of an nn.Sequential as nn.Sequential modules, cut where the plan says.

    Checks that the plan was made for this model: the same number of children, with the
    names the plan lists."""
    import torch.nn as nn

    names = [name for name, _ in model.named_children()]
    planned = [name for stage in plan["stages"] for name in stage.get("layer_names", [])]
    if planned and planned != names:
        raise ValueError(f"the plan's layers {planned} are not this model's children {names}")
    if sum(plan["balance"]) != len(names):
        raise ValueError(f"the plan covers {sum(plan['balance'])} layers, the model has {len(names)}")
    children = list(model.named_children())
    stages, first = [], 0
    for count in plan["balance"]:
        stages.append(nn.Sequential(collections.OrderedDict(children[first:first + count])))
        first += count
    return stages


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plan_to_python.py plan.json")
    plan = json.load(open(sys.argv[1]))
    print(f"balance = {torchgpipe_balance(plan)}")
    print("split_spec = {" +
          ", ".join(f"{json.dumps(name)}: SplitPoint.BEGINNING" for name in split_points(plan)) +
          "}")


if __name__ == "__main__":
    main()
