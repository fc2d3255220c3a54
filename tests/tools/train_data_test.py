#!/usr/bin/env python3
"""Training on the user's data and keeping the result, end to end with the real `pipebal`:
`pipebal train --data` on a small classification set made here, with a float64 TorchScript
model, gives every step the loss PyTorch itself gets training the same model the same way (to
1e-9), for both schedules and every checkpoint mode; `--save` writes a module whose outputs are
the trained model's; accuracy rises well above chance; `--shuffle` follows `--seed`; two inputs
work; a token language model with dropout goes from profile to --save; bad data, and targets
the loss cannot read, are one line and exit status 2, as is a model or data file whose tensor
records were cut short (LibTorch loads those and reads past their end); inputs and targets saved
as views of one tensor train as if saved apart.
Usage: train_data_test.py PIPEBAL_BINARY"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from typing import Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

pipebal = sys.argv[1]
work = tempfile.mkdtemp(prefix="pipebal-train-data-")
LR, BATCH, EPOCHS, CLASSES = 0.5, 16, 4, 4


def run(*args, status=0):
    result = subprocess.run([pipebal, *args], capture_output=True, text=True)
    assert result.returncode == status, f"pipebal {' '.join(args)}: {result.returncode}\n{result.stderr}"
    return result


def make_model():
    torch.manual_seed(1)
    return nn.Sequential(collections.OrderedDict([
        ("fc1", nn.Linear(8, 32)), ("act1", nn.Tanh()),
        ("fc2", nn.Linear(32, 32)), ("act2", nn.Tanh()),
        ("head", nn.Linear(32, CLASSES)),
    ])).double()


# A separable classification set: the class is the argmax of a fixed linear map.
torch.manual_seed(0)
x = torch.randn(64, 8, dtype=torch.float64)
y = (x @ torch.randn(8, CLASSES, dtype=torch.float64)).argmax(dim=1)
data = os.path.join(work, "data.pt")
torch.save({"inputs": x, "targets": y}, data)
model_path = os.path.join(work, "model.pt")
torch.jit.script(make_model()).save(model_path)

def pytorch_losses(model, epochs, targets=None):
    """The reference: PyTorch trains `model` on the same batches in file order."""
    targets = y if targets is None else targets
    sgd = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for epoch in range(epochs):
        for first in range(0, len(x), BATCH):
            if (targets[first:first + BATCH] == -100).all():
                losses.append(0.0)  # pipebal's step adds nothing; PyTorch's mean would be NaN
                continue
            sgd.zero_grad()
            loss = F.cross_entropy(model(x[first:first + BATCH]), targets[first:first + BATCH])
            loss.backward()
            sgd.step()
            losses.append(loss.item())
    return losses


reference = make_model()
expected = pytorch_losses(reference, EPOCHS)

common = ["--model", model_path, "--data", data, "--batch-size", str(BATCH), "--epochs",
          str(EPOCHS), "--balance", "2,3", "--chunks", "4", "--optimizer", "sgd", "--lr", str(LR),
          "--loss", "cross_entropy", "-q"]
os.makedirs(os.path.join(work, "trained.pt.partial"), exist_ok=True)
before = [f for f in os.listdir(work) if f not in ("run.json", "trained.pt")]
for schedule in ("gpipe", "1f1b"):
    for checkpoint in ("always", "except_last", "never"):
        out, saved = os.path.join(work, "run.json"), os.path.join(work, "trained.pt")
        result = run("train", *common, "--schedule", schedule, "--checkpoint", checkpoint, "-o",
                     out, "--save", saved)
        doc = json.load(open(out))
        # The data's inputs as a mini-batch takes them, dtype included, in run.json and the summary.
        assert doc["inputs"] == [f"float64[{BATCH},8]"], doc["inputs"]
        assert f"input float64[{BATCH},8], balance [2,3]" in result.stdout, result.stdout
        losses = [s["loss"] for s in doc["steps"]]
        assert len(losses) == len(expected), (len(losses), len(expected))
        for step, (got, want) in enumerate(zip(losses, expected)):
            assert abs(got - want) <= 1e-9 * abs(want), (schedule, checkpoint, step, got, want)
        assert doc["loss"] == "cross_entropy" and doc["data"] == data, doc
        trained = torch.jit.load(saved)
        assert torch.allclose(trained(x), reference(x), rtol=1e-9, atol=1e-12), (schedule, checkpoint)
        # Nothing of the save is left beside it, and a file named like its old temporary (the
        # user's, here a directory) is neither in its way nor touched.
        assert sorted(os.listdir(work)) == sorted(before + ["run.json", "trained.pt"]), os.listdir(work)
        assert os.path.isdir(saved + ".partial")

# A float32 model trained with --dtype float64 is the same float64 training.
float_path = os.path.join(work, "model-float32.pt")
torch.jit.script(make_model().float()).save(float_path)
out = os.path.join(work, "converted.json")
run("train", *[float_path if a == model_path else a for a in common], "--dtype", "float64", "-o",
    out)
doc = json.load(open(out))
assert doc["dtype"] == "float64", doc.get("dtype")
for step, (got, want) in enumerate(zip([s["loss"] for s in doc["steps"]], expected)):
    assert abs(got - want) <= 1e-9 * abs(want), ("--dtype float64", step, got, want)
# Without --dtype, float64 data for a float32 model is refused up front (it failed inside the
# first step's backward, naming a stage).
result = run("train", *[float_path if a == model_path else a for a in common], status=2)
assert result.stderr.count("\n") == 1 and f"--data {data}'s inputs are float64, the model's " \
    "first layer's parameters float32: give --dtype float32" in result.stderr, result.stderr
# Complex inputs for a real model: no --dtype makes them real, so the advice is to save them so
# (they met LibTorch's own message inside the first step).
complex_data = os.path.join(work, "complex.pt")
torch.save({"inputs": x.to(torch.complex128), "targets": y}, complex_data)
result = run("train", "--model", model_path, "--data", complex_data, "--balance", "2,3",
             status=2)
assert result.stderr.count("\n") == 1 and f"--data {complex_data}'s inputs are complex128, the " \
    "model's first layer's parameters float64: save them as float64 (x.real" in result.stderr, \
    result.stderr

# Synthetic inputs follow the model's dtype: a float64 model profiles at --input-shape (float32
# inputs met float64 weights in LibTorch's "mat1 and mat2 must have the same dtype").
profile64 = os.path.join(work, "profile64.json")
run("profile", "--model", model_path, "--input-shape", "16,8", "--repeat", "2", "-q", "-o",
    profile64)
assert json.load(open(profile64))["dtype"] == "float64"

# Class ids saved as int32 (or uint8) train as the int64 ones LibTorch's losses read.
narrow_ids = os.path.join(work, "int32-ids.pt")
torch.save({"inputs": x, "targets": y.int()}, narrow_ids)
out = os.path.join(work, "int32-ids.json")
run("train", *[narrow_ids if a == data else a for a in common], "-o", out)
for step, (got, want) in enumerate(zip([s["loss"] for s in json.load(open(out))["steps"]],
                                       expected)):
    assert abs(got - want) <= 1e-9 * abs(want), ("int32 class ids", step, got, want)

accuracy = (torch.jit.load(saved)(x).argmax(dim=1) == y).double().mean().item()
assert accuracy > 0.6, f"accuracy {accuracy} (chance: {1 / CLASSES})"

# Pipeline x data parallel on the data: 2 stages x 2 replicas as 4 processes, each replica on its
# half of every mini-batch, gradients averaged: the same training as one pipeline on the whole
# mini-batch (the loss reported is the mini-batch's, the mean of the replicas').
out = os.path.join(work, "replicas.json")
one_epoch = list(common)
one_epoch[one_epoch.index("--epochs") + 1] = "1"
run("launch", "--nproc-per-node", "4", "--master-port", "0", "--", pipebal, "train", *one_epoch,
    "--replicas", "2", "--timeout", "120", "-o", out)
replicated = [s["loss"] for s in json.load(open(out))["steps"]]
assert len(replicated) == len(x) // BATCH, replicated
for step, (got, want) in enumerate(zip(replicated, expected)):
    assert abs(got - want) <= 1e-9 * abs(want), ("replicas", step, got, want)
# --save across processes: rank 0 gathers every stage's weights; the saved module is the model
# PyTorch trains the same way for one epoch.
saved = os.path.join(work, "replicas-trained.pt")
run("launch", "--nproc-per-node", "2", "--master-port", "0", "--", pipebal, "train", *one_epoch,
    "--timeout", "120", "--save", saved)
one_epoch_model = make_model()
pytorch_losses(one_epoch_model, 1)
assert torch.allclose(torch.jit.load(saved)(x), one_epoch_model(x), rtol=1e-9, atol=1e-12)

# The interleaved schedule across processes: each of 2 ranks runs 2 of the 4 stages (rank r
# stages r and r + 2) and rank 0 gathers all four stages' weights.
interleaved = list(one_epoch)
interleaved[interleaved.index("--balance") + 1] = "1,1,2,1"
out, saved = os.path.join(work, "interleaved.json"), os.path.join(work, "interleaved-trained.pt")
run("launch", "--nproc-per-node", "2", "--master-port", "0", "--", pipebal, "train", *interleaved,
    "--schedule", "interleaved", "--virtual", "2", "--timeout", "120", "-o", out, "--save", saved)
doc = json.load(open(out))
assert len(doc["processes"]) == 2 and len(doc["stages"]) == 4, doc["processes"]
for step, (got, want) in enumerate(zip([s["loss"] for s in doc["steps"]], expected)):
    assert abs(got - want) <= 1e-9 * abs(want), ("interleaved", step, got, want)
assert torch.allclose(torch.jit.load(saved)(x), one_epoch_model(x), rtol=1e-9, atol=1e-12)

# Replicas whose micro-batches leave different parameters without a gradient: a layer that takes
# one of two branches by its input's sign, data whose first half of every mini-batch (replica 0's)
# is positive and second half (replica 1's) negative. Replica 0 has gradients for `pos` only,
# replica 1 for `neg` only; averaged, each is half of the one pipeline's on the whole mini-batch.
class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = nn.Linear(8, 8)
        self.neg = nn.Linear(8, 8)

    def forward(self, inputs):
        if bool(inputs[:, 0].sum() > 0):
            return torch.tanh(self.pos(inputs))
        return torch.tanh(self.neg(inputs))


def make_gated():
    torch.manual_seed(3)
    return nn.Sequential(collections.OrderedDict([
        ("gate", Gate()), ("fc", nn.Linear(8, 16)), ("act", nn.Tanh()),
        ("head", nn.Linear(16, CLASSES))])).double()


gated_x = x.clone()
gated_x[:, 0] = x[:, 0].abs() * torch.tensor([1.0 if i % BATCH < BATCH // 2 else -1.0
                                              for i in range(len(x))], dtype=torch.float64)
gated_data, gated_path = os.path.join(work, "gated.pt"), os.path.join(work, "gated-model.pt")
torch.save({"inputs": gated_x, "targets": y}, gated_data)
torch.jit.script(make_gated()).save(gated_path)
gated = make_gated()
sgd = torch.optim.SGD(gated.parameters(), lr=LR)
gated_expected = []
for first in range(0, len(x), BATCH):  # as 8 micro-batches of 2, each taking its own branch
    sgd.zero_grad()
    total = 0.0
    for mb in range(first, first + BATCH, 2):
        loss = F.cross_entropy(gated(gated_x[mb:mb + 2]), y[mb:mb + 2]) * (2 / BATCH)
        loss.backward()
        total += loss.item()
    sgd.step()
    gated_expected.append(total)
out = os.path.join(work, "gated.json")
run("launch", "--nproc-per-node", "4", "--master-port", "0", "--", pipebal, "train", "--model",
    gated_path, "--data", gated_data, "--batch-size", str(BATCH), "--balance", "1,3", "--chunks",
    "4", "--optimizer", "sgd", "--lr", str(LR), "--loss", "cross_entropy", "--replicas", "2",
    "--timeout", "120", "-q", "-o", out)
for step, (got, want) in enumerate(zip([s["loss"] for s in json.load(open(out))["steps"]],
                                       gated_expected)):
    assert abs(got - want) <= 1e-9 * abs(want), ("replicas, gated", step, got, want)

odd = run("train", "--model", model_path, "--data", data, "--batch-size", "15", "--balance", "2,3",
          "--replicas", "2", status=2)
assert "must be multiples of it" in odd.stderr, odd.stderr

# --shuffle: the same seed, the same losses; another seed, other losses.
def shuffled(seed):
    out = os.path.join(work, f"shuffled-{seed}.json")
    run("train", *common, "--shuffle", "--seed", str(seed), "-o", out)
    return [s["loss"] for s in json.load(open(out))["steps"]]

assert shuffled(3) == shuffled(3)
assert shuffled(3) != shuffled(4)
assert shuffled(3)[0] != expected[0] or shuffled(3)[1:] != expected[1:]

# Two inputs, scattered into micro-batches alike; the default loss for floating targets is MSE.
two = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                   "chain_two_inputs_scripted.pt")
module = torch.jit.load(two)  # two [N, 4] inputs, 2 outputs per sample
a, b = torch.randn(32, 4), torch.randn(32, 4)
target = module(a, b)
two_data = os.path.join(work, "two.pt")
torch.save({"inputs": [a, b], "targets": torch.randn_like(target)}, two_data)
layers = len(list(module.named_children()))
out = os.path.join(work, "two.json")
run("train", "--model", two, "--data", two_data, "--batch-size", "16", "--balance",
    f"1,{layers - 1}", "--chunks", "2", "-q", "-o", out)
assert json.load(open(out))["loss"] == "mse"
# A last mini-batch too small for the micro-batches is left out, and said so: 32 = 15 + 15 + 2.
short = run("train", "--model", two, "--data", two_data, "--batch-size", "15", "--balance",
            f"1,{layers - 1}", "--chunks", "4", "-q", "-o", out)
assert "the last mini-batch of each epoch (2 of the 32 samples) is left out: it needs 4 samples" \
    in short.stderr, short.stderr
assert len(json.load(open(out))["steps"]) == 2

# A token language model with dropout, as a user brings one: profiled on synthetic token ids,
# planned, trained on the user's tokens (next-token targets) and saved; PyTorch loads the saved
# module, whose dropout is PyTorch's again, with the trained weights.
torch.manual_seed(5)
lm = nn.Sequential(nn.Embedding(50, 16), nn.Linear(16, 16), nn.Dropout(0.1), nn.ReLU(),
                   nn.Linear(16, 50))
lm_path, lm_data = os.path.join(work, "lm.pt"), os.path.join(work, "tokens.pt")
torch.jit.script(lm).save(lm_path)
tokens = torch.randint(50, (64, 12))
torch.save({"inputs": tokens, "targets": tokens.roll(-1, dims=1)}, lm_data)
profile, plan = os.path.join(work, "lm-profile.json"), os.path.join(work, "lm-plan.json")
run("profile", "--model", lm_path, "--input", "int64[16,12]:50", "--chunks", "1,2,4", "--repeat",
    "2", "-q", "-o", profile)
run("plan", profile, "--devices", "2", "-o", plan)
out, saved_lm = os.path.join(work, "lm-run.json"), os.path.join(work, "lm-trained.pt")
# The plan's mini-batch (16) reads --data unless --batch-size says otherwise, which is warned of.
run("train", "--plan", plan, "--data", lm_data, "--epochs", "2", "--loss", "cross_entropy", "-q",
    "-o", out, "--save", saved_lm)
lm_run = json.load(open(out))
assert lm_run["loss"] == "cross_entropy" and len(lm_run["steps"]) == 8, lm_run["steps"]
other_out = os.path.join(work, "lm-run-32.json")
other = run("train", "--plan", plan, "--data", lm_data, "--batch-size", "32", "-q", "-o", other_out)
assert "--batch-size 32 (planned 16) differs from the plan" in other.stderr, other.stderr
assert len(json.load(open(other_out))["steps"]) == 2
trained_lm = torch.jit.load(saved_lm)
assert "pipebal::" not in str(trained_lm.graph) + "".join(
    str(m.graph) for m in trained_lm.modules())
assert not torch.equal(trained_lm.state_dict()["1.weight"], lm.state_dict()["1.weight"])
trained_lm.eval()
assert trained_lm(tokens).shape == (64, 12, 50)

# A model that is not a chain of its children, cut at its module calls: residual adds across
# them and a ModuleList, trained through 3 stages, gives every step PyTorch's loss too, and the
# saved module carries the trained weights.
class ResidualNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 16)
        self.blocks = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])
        self.head = nn.Linear(16, CLASSES)

    def forward(self, inputs):
        h = torch.tanh(self.stem(inputs))
        for block in self.blocks:
            h = h + torch.tanh(block(h))
        return self.head(h + inputs.sum(dim=1, keepdim=True))


def make_residual():
    torch.manual_seed(2)
    return ResidualNet().double()


residual_path = os.path.join(work, "residual.pt")
torch.jit.script(make_residual()).save(residual_path)
reference = make_residual()
expected_residual = pytorch_losses(reference, 1)
out, saved = os.path.join(work, "residual.json"), os.path.join(work, "residual-trained.pt")
run("train", "--model", residual_path, "--data", data, "--batch-size", str(BATCH), "--balance",
    "2,2,1", "--chunks", "4", "--schedule", "1f1b", "--optimizer", "sgd", "--lr", str(LR), "--loss",
    "cross_entropy", "-q", "-o", out, "--save", saved)
losses = [s["loss"] for s in json.load(open(out))["steps"]]
assert len(losses) == len(expected_residual), losses
for step, (got, want) in enumerate(zip(losses, expected_residual)):
    assert abs(got - want) <= 1e-9 * abs(want), ("residual", step, got, want)
assert torch.allclose(torch.jit.load(saved)(x), reference(x), rtol=1e-9, atol=1e-12)

# The checks pipebal runs on a sample before training leave the model as they found it: a buffer
# a forward updates on every call counts the training steps alone in the saved module (it counted
# the checks' three evaluation runs too), and a forward drawing random numbers in evaluation mode
# passes the check of its cut (its two runs drew different numbers).
class Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, CLASSES)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1.0)
        return self.fc(x)


class Noisy(nn.Module):
    def forward(self, x):
        return x + 0.01 * torch.rand_like(x)


counted_path = os.path.join(work, "counted.pt")
torch.jit.script(nn.Sequential(collections.OrderedDict([
    ("fc", nn.Linear(8, 8)), ("count", Counted())])).double()).save(counted_path)
saved = os.path.join(work, "counted-trained.pt")
run("train", "--model", counted_path, "--data", data, "--batch-size", str(BATCH), "--balance",
    "1,1", "--chunks", "1", "--checkpoint", "never", "-q", "--save", saved)
assert torch.jit.load(saved).count.calls.item() == len(x) // BATCH, \
    torch.jit.load(saved).count.calls.item()
noisy_path = os.path.join(work, "noisy.pt")
torch.jit.script(nn.Sequential(collections.OrderedDict([
    ("fc1", nn.Linear(8, 8)), ("noise", Noisy()), ("fc2", nn.Linear(8, CLASSES))])).double()
).save(noisy_path)
out = os.path.join(work, "noisy.json")
run("train", "--model", noisy_path, "--data", data, "--batch-size", str(BATCH), "--balance", "2,1",
    "-q", "-o", out)
assert len(json.load(open(out))["steps"]) == len(x) // BATCH

# A model of two outputs is refused: the loss reads one, and what only the other depends on would
# never train (it trained silently on the first).
class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 8)
        self.first = nn.Linear(8, CLASSES)
        self.second = nn.Linear(8, CLASSES)

    def forward(self, x) -> Tuple[torch.Tensor, torch.Tensor]:
        h = self.body(x)
        return self.first(h), self.second(h)


two_heads = os.path.join(work, "two-heads.pt")
torch.jit.script(TwoHeads().double()).save(two_heads)
result = run("train", "--model", two_heads, "--data", data, "--balance", "2,1", status=2)
assert result.stderr == f"pipebal: error: model '{two_heads}' returns 2 tensors, but pipebal " \
    "trains a loss on one output (what only the others depend on would get no gradient): return " \
    "the output the loss reads\n", result.stderr

# A result that is no tensor or flat tuple of tensors names the element that is not a tensor.
class NestedResult(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, CLASSES)

    def forward(self, x) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        h = self.fc(x)
        return h, (h, h)


nested = os.path.join(work, "nested-result.pt")
torch.jit.script(NestedResult().double()).save(nested)
result = run("train", "--model", nested, "--data", data, "--balance", "1", status=2)
assert result.stderr.count("\n") == 1 and "forward returns a tuple whose element 1 is a " \
    "Tuple[Tensor, Tensor], not a tensor" in result.stderr, result.stderr

# Bad data: one line, exit status 2.
not_torch = os.path.join(work, "bad.pt")
open(not_torch, "w").write("not a torch file")
no_targets = os.path.join(work, "no-targets.pt")
torch.save({"inputs": x, "labels": y}, no_targets)
mismatch = os.path.join(work, "mismatch.pt")
torch.save({"inputs": x, "targets": y[:10]}, mismatch)
legacy = os.path.join(work, "legacy.pt")
torch.save({"inputs": x, "targets": y}, legacy, _use_new_zipfile_serialization=False)
nan_input = os.path.join(work, "nan-input.pt")
x_nan = x.clone()
x_nan[37, 2] = float("nan")
torch.save({"inputs": x_nan, "targets": y}, nan_input)
nan_target = os.path.join(work, "nan-target.pt")
y_nan = torch.randn(len(y), dtype=torch.float64)
y_nan[5] = float("nan")
torch.save({"inputs": [x, x], "targets": y_nan}, nan_target)
# An infinity is no error of the data's: an additive attention mask holds -inf by design.
inf_input = os.path.join(work, "inf-input.pt")
x_inf = x.clone()
x_inf[3, 1] = float("-inf")
torch.save({"inputs": x_inf, "targets": y}, inf_input)
run("train", "--model", model_path, "--data", inf_input, "--balance", "2,3", "-q", "-o",
    os.path.join(work, "inf.json"))
one_list = os.path.join(work, "one-list.pt")
torch.save({"inputs": [x], "targets": y}, one_list)
one_key = os.path.join(work, "one-key.pt")
torch.save({"inputs": x}, one_key)
ordered = os.path.join(work, "ordered-dict.pt")
torch.save(collections.OrderedDict([("inputs", x), ("targets", y)]), ordered)
with_set = os.path.join(work, "with-set.pt")
torch.save({"inputs": x, "targets": y, "classes": set(range(CLASSES))}, with_set)
numpy_inputs = os.path.join(work, "numpy-inputs.pt")
torch.save({"inputs": x.numpy(), "targets": y}, numpy_inputs)
for path, fragment in ((not_torch, "is not a file written by torch.save"),
                       (ordered, "holds a collections.OrderedDict, which LibTorch cannot read"),
                       (with_set, "holds a __builtin__.set, which LibTorch cannot read"),
                       (numpy_inputs, "holds a NumPy array (numpy."),
                       (nan_input, "inputs holds NaN at sample 37"),
                       (one_list, "holds a list of one tensor or a dict of one key"),
                       (one_key, "holds a list of one tensor or a dict of one key"),
                       (nan_target, "targets holds NaN at sample 5"),
                       (legacy, "was written by torch.save in its legacy format"),
                       (no_targets, "has no 'targets'"),
                       (mismatch, "inputs[0] has 64 samples, targets 10")):
    result = run("train", "--model", model_path, "--data", path, "--balance", "2,3", status=2)
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr
# An archive whose first tensor record was cut to `keep` bytes: LibTorch loads it with the sizes
# its pickle declares, and would read past the record's end.
def cut_short(path, name, keep, folder="/data/"):
    out = os.path.join(work, name)
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(out, "w") as target:
        cut = False
        for info in source.infolist():
            content = source.read(info.filename)
            if not cut and folder in info.filename:
                content, cut = content[:keep], True
            target.writestr(info, content)
    assert cut, path
    return out


for path, fragment in (
        (cut_short(data, "empty-record.pt", 0), "its tensor 'inputs' has no data in the file"),
        (cut_short(data, "short-record.pt", 16),
         f"its tensors need {x.numel() * 8 + y.numel() * 8} bytes, but the file holds "
         f"{y.numel() * 8 + 16} of them: the file is damaged")):
    result = run("train", "--model", model_path, "--data", path, "--balance", "2,3", status=2)
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr
# A layer that fails on one sample, mid-run: one line naming the step (samples 32-47 are the
# third mini-batch of 16), the stage and the layer, and nothing written.
class Picky(nn.Module):
    def forward(self, x):
        if bool((x.abs() > 100).any()):
            raise RuntimeError("a value above 100")
        return x


picky_model, picky_data = os.path.join(work, "picky.pt"), os.path.join(work, "picky-data.pt")
torch.jit.script(nn.Sequential(Picky(), nn.Linear(8, 8), nn.Linear(8, CLASSES)).double()).save(
    picky_model)
x_picky = x.clone()
x_picky[40] = 1000.0
torch.save({"inputs": x_picky, "targets": y}, picky_data)
picky_out = os.path.join(work, "picky.json")
result = run("train", "--model", picky_model, "--data", picky_data, "--batch-size", "16",
             "--balance", "1,2", "-q", "-o", picky_out, status=2)
assert result.stderr.count("\n") == 1 and result.stderr.startswith(
    "pipebal: error: step 3 of 4: stage 0") and "a value above 100" in result.stderr, result.stderr
assert not os.path.exists(picky_out)
# Inputs and targets saved as views of one tensor (next-token pairs cut from one table of
# sequences) share one record in the file: they train exactly as the same data saved apart, and
# that one record cut short is still refused as damaged.
sequences = torch.randint(50, (64, 13))
views, apart = os.path.join(work, "views.pt"), os.path.join(work, "apart.pt")
torch.save({"inputs": sequences[:, :-1], "targets": sequences[:, 1:]}, views)
torch.save({"inputs": sequences[:, :-1].clone(), "targets": sequences[:, 1:].clone()}, apart)
with zipfile.ZipFile(views) as archive:
    assert sum("/data/" in name for name in archive.namelist()) == 1, archive.namelist()
view_losses = []
for path in (views, apart):
    out = path + ".json"
    run("train", "--plan", plan, "--data", path, "--epochs", "2", "--loss", "cross_entropy",
        "--seed", "3", "-q", "-o", out)
    view_losses.append([step["loss"] for step in json.load(open(out))["steps"]])
assert view_losses[0] == view_losses[1] and len(view_losses[0]) == 8, view_losses
result = run("train", "--plan", plan, "--data", cut_short(views, "short-views.pt", 16), status=2)
assert result.stderr.count("\n") == 1 and f"its tensors need {sequences.numel() * 8} bytes, but " \
    "the file holds 16 of them: the file is damaged" in result.stderr, result.stderr
for name, keep, fragment in (("empty-model.pt", 0, "its tensor 'fc1.weight' has no data"),
                             ("short-model.pt", 8, "but the file holds")):
    for command in (("profile", "--input-shape", "4,8", "-q"),
                    ("train", "--data", data, "--balance", "2,3", "-q")):
        result = run(command[0], "--model", cut_short(model_path, name, keep), *command[1:],
                     status=2)
        assert result.stderr.count("\n") == 1 and "cannot load TorchScript model" in \
            result.stderr and fragment in result.stderr, result.stderr
# What torch.save wrote, given as a model (a pickled module, its state_dict, a data file): the
# line says to save it with torch.jit.
pickled_module, state_dict = os.path.join(work, "pickled.pt"), os.path.join(work, "state.pt")
torch.save(make_model(), pickled_module)
torch.save(make_model().state_dict(), state_dict)
for path in (pickled_module, state_dict, data):
    result = run("train", "--model", path, "--data", data, "--balance", "2,3", status=2)
    assert result.stderr.count("\n") == 1 and "torch.save wrote it (a pickled module, state_dict " \
        "or data), not torch.jit.save: save the model with torch.jit.script(model).save(path)" in \
        result.stderr, result.stderr


# A tensor the traced forward adds is one of the model's constants, kept in records of its own.
class WithConstant(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8).double(), nn.Linear(8, CLASSES).double()
        self.shift = torch.randn(8, dtype=torch.float64)

    def forward(self, x):
        return self.fc2(self.fc1(x) + self.shift)


with_constant = os.path.join(work, "with-constant.pt")
torch.jit.trace(WithConstant(), x[:4]).save(with_constant)
run("profile", "--model", with_constant, "--input-shape", "4,8", "-q")
result = run("profile", "--model", cut_short(with_constant, "short-constant.pt", 8, "/constants/"),
             "--input-shape", "4,8", status=2)
assert result.stderr.count("\n") == 1 and "its tensors need 64 bytes, but the file holds 8 of " \
    "them: the file is damaged" in result.stderr, result.stderr

# Valid files the check passes: weights shared between layers (one storage, counted once), a
# quantized model (its packed weights are objects of their own, which it reads its own way), and
# data whose lists repeat one list over and over (each walked once, not 2^40 times).
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8).double(), nn.Linear(8, 8).double()
        self.fc2.weight = self.fc1.weight

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


tied = os.path.join(work, "tied.pt")
torch.jit.script(Tied()).save(tied)
quantized = os.path.join(work, "quantized.pt")
torch.jit.script(torch.ao.quantization.quantize_dynamic(
    nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)), {nn.Linear},
    dtype=torch.qint8)).save(quantized)
for path in (tied, quantized):
    run("profile", "--model", path, "--input-shape", "4,8", "-q")
repeated = [x, x]
for _ in range(40):
    repeated = [repeated, repeated]
shared_lists = os.path.join(work, "shared-lists.pt")
torch.save({"inputs": x, "targets": y, "extra": repeated}, shared_lists)
run("train", "--model", model_path, "--data", shared_lists, "--balance", "2,3", "-q", "-o",
    os.path.join(work, "shared-lists.json"))

# Targets the loss cannot read are refused before the first step (they failed in the step whose
# micro-batch held them, after the others had trained); -100, the ignored class id, passes.
def with_targets(name, targets):
    path = os.path.join(work, name)
    torch.save({"inputs": x, "targets": targets}, path)
    return path


y_out_of_range = y.clone()
y_out_of_range[41] = CLASSES
# Ignored ids (-100) leave the mean, as in PyTorch: one here and there, and a whole micro-batch
# (samples 0-3 of the first step's 4 micro-batches), whose share of the step's loss is then none.
y_ignored = y.clone()
y_ignored[[0, 1, 2, 3, 18, 41]] = -100
y_ignored[48:64] = -100  # and a whole mini-batch (the fourth step of each epoch): nothing to add
ignored_out = os.path.join(work, "ignored.json")
run("train", *[with_targets("ignored.pt", y_ignored) if a == data else a for a in common], "-o",
    ignored_out)
ignored_expected = pytorch_losses(make_model(), EPOCHS, y_ignored)
ignored_losses = [s["loss"] for s in json.load(open(ignored_out))["steps"]]
assert len(ignored_losses) == len(ignored_expected), ignored_losses
assert ignored_losses[3] == 0.0, ignored_losses
for step, (got, want) in enumerate(zip(ignored_losses, ignored_expected)):
    assert abs(got - want) <= 1e-9 * abs(want), ("ignored ids", step, got, want)
every_ignored = run("train", "--model", model_path, "--data",
                    with_targets("all-ignored.pt", torch.full_like(y, -100)), "--balance", "2,3",
                    "-q", status=2)
assert "every target is -100, the ignored class id: there is no loss to train on" in \
    every_ignored.stderr, every_ignored.stderr
for targets, loss, fragment in (
        (y_out_of_range, "cross_entropy",
         f"sample 41 has class id {CLASSES}, the model's output has {CLASSES} classes"),
        (y.reshape(-1, 1).repeat(1, 2), "nll", "nll reads one class id per output row of scores; "
         "a sample's targets have shape [2], the model's output [4] per sample"),
        (y.double(), "cross_entropy", "cross_entropy reads class ids (integers), the targets are "
         "float64"),
        (y, "mse", "mse needs floating-point targets, these are int64"),
        (torch.randn(len(x), CLASSES + 1, dtype=torch.float64), "mse",
         "a sample's target has shape [5], the model's output [4]")):
    result = run("train", "--model", model_path, "--data", with_targets("targets.pt", targets),
                 "--balance", "2,3", "--loss", loss, "-o", os.path.join(work, "refused.json"),
                 status=2)
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, (fragment, result.stderr)
    assert not os.path.exists(os.path.join(work, "refused.json"))
result = run("train", "--model", "mlp:layers=2,width=8", "--balance", "1,2", "--save",
             os.path.join(work, "x.pt"), status=2)
assert "--save writes a TorchScript model" in result.stderr, result.stderr
# Epochs past any run are refused before a list of their mini-batches is made.
result = run("train", "--model", model_path, "--data", data, "--balance", "2,3", "--epochs",
             "2000000000", status=2)
assert result.stderr.count("\n") == 1 and "make more than 10000000 steps" in result.stderr, \
    result.stderr

# A model with nothing to train runs (its steps still measure the pipeline), and says so.
still = os.path.join(work, "still.pt")
torch.jit.script(nn.Sequential(nn.ReLU(), nn.Tanh())).save(still)
result = run("train", "--model", still, "--input-shape", "4,8", "--balance", "1,1", "--steps", "2")
assert "the model has no parameters to train" in result.stderr, result.stderr

shutil.rmtree(work)
print(f"ok: {len(expected)} steps equal PyTorch's, accuracy {accuracy:.2f}")
