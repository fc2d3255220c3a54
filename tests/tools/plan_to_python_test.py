#!/usr/bin/env python3
"""A plan made by pipebal drives a Python pipeline: tools/plan_to_python.py turns plan.json into
torchgpipe's balance list and torch.distributed.pipelining's split points, `pipebal balance
--format torchgpipe|pippy` prints the same, and the model cut at those names computes what the
whole model computes. Runs the real `pipebal` on a TorchScript model made here.
Usage: plan_to_python_test.py PIPEBAL_BINARY REPO_ROOT"""
import ast
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn

pipebal, root = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(root, "tools"))
import plan_to_python  # noqa: E402

work = tempfile.mkdtemp(prefix="pipebal-plan-to-python-")


def run(*args):
    result = subprocess.run([pipebal, *args], capture_output=True, text=True)
    assert result.returncode == 0, f"pipebal {' '.join(args)}: {result.stderr}"
    return result.stdout


torch.manual_seed(0)
model = nn.Sequential(collections.OrderedDict([
    ("embed", nn.Linear(8, 64)), ("act0", nn.ReLU()),
    ("block1", nn.Linear(64, 64)), ("act1", nn.Tanh()),
    ("block2", nn.Linear(64, 64)), ("act2", nn.ReLU()),
    ("head", nn.Linear(64, 4)),
]))
torch.jit.script(model).save(os.path.join(work, "model.pt"))
profile, plan_path = os.path.join(work, "profile.json"), os.path.join(work, "plan.json")
run("profile", "--model", os.path.join(work, "model.pt"), "--input-shape", "32,8", "--repeat", "2",
    "--warmup", "1", "-q", "-o", profile)
run("balance", profile, "--stages", "3", "-o", plan_path)
plan = json.load(open(plan_path))

# The balance list, from the module and from the command.
balance = plan_to_python.torchgpipe_balance(plan)
assert sum(balance) == 7 and len(balance) == 3 and min(balance) >= 1, balance
printed = run("balance", profile, "--stages", "3", "--format", "torchgpipe")
assert ast.literal_eval(printed.split("=", 1)[1].strip()) == balance, printed

# The split points: children of the model, the first layer of stages 2 and 3.
names = [name for name, _ in model.named_children()]
points = plan_to_python.split_points(plan)
assert points == [names[balance[0]], names[balance[0] + balance[1]]], (points, balance)
printed = run("balance", profile, "--stages", "3", "--format", "pippy")
assert re.findall(r'"([^"]+)": SplitPoint.BEGINNING', printed) == points, printed

# Cut there, the stages compute what the model computes, and start at the split points.
stages = plan_to_python.split_sequential(model, plan)
assert [next(iter(stage.named_children()))[0] for stage in stages[1:]] == points
x = torch.randn(5, 8)
y = x
for stage in stages:
    y = stage(y)
assert torch.equal(y, model(x))

# A plan for another model is refused.
other = nn.Sequential(nn.Linear(8, 4), nn.ReLU())
try:
    plan_to_python.split_sequential(other, plan)
    raise AssertionError("a plan for another model was accepted")
except ValueError as error:
    assert "not this model's children" in str(error), error

# A split point must name one layer: a plan whose layers share the name it gives is refused.
shared = json.loads(json.dumps(plan))
shared["stages"][0]["layer_names"][0] = points[0]
try:
    plan_to_python.split_points(shared)
    raise AssertionError("an ambiguous split point was accepted")
except ValueError as error:
    assert f"2 layers are named {points[0]!r}" in str(error), error

# The script prints both.
out = subprocess.run([sys.executable, os.path.join(root, "tools", "plan_to_python.py"), plan_path],
                     capture_output=True, text=True, check=True).stdout
assert f"balance = {balance}" in out and points[0] in out, out
shutil.rmtree(work)
print(f"ok: balance {balance}, split points {points}")
