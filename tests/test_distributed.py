"""Training under torchrun: two processes (gloo, on the CPU) take the steps one process takes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from memnet import checkpoint, distributed
from memnet.cli import main
from memnet.config import Config, ConfigError, apply_overrides
from memnet.data import Batch
from memnet.trainer import ReferenceTraining, training_path

FIXTURES = Path(__file__).parent / "fixtures" / "babi" / "en-valid"
TRAIN = ["train", "--data", str(FIXTURES), "--task", "1", "--config", "none", "--quiet", "--train.epochs=4",
         "--train.linear_start_epochs=2", "--train.restarts=2", "--train.eval_every=2", "--train.backend=torch",
         "--model.stopping=true", "--model.masking=hard"]


def records(run: Path) -> list[dict]:
    """metrics.jsonl without its timings."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if "seconds" not in k and k != "training_path"} for line in lines]


def test_two_processes_train_the_model_one_process_trains(tmp_path, capsys):
    assert main([*TRAIN, "--out", str(tmp_path / "one")]) == 0
    capsys.readouterr()
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           "-m", "memnet", *TRAIN, "--out", str(tmp_path / "two")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    # process 0 alone speaks and writes: each line once, one metrics line per evaluation
    assert out.count("wrote ") == 1 and out.count("test: accuracy") == 1
    assert "training on the reference model (torch autograd) in 2 processes (DistributedDataParallel, gloo)" in out
    one, two = records(tmp_path / "one"), records(tmp_path / "two")
    assert len(two) == 4 and two[-1]["final"]  # epochs 2 (linear start), 4 and 6, then the final line
    for a, b in zip(one, two):  # the same losses (to float rounding), accuracies, seed and epoch chosen
        for key in a:
            if key in ("loss", "lr"):
                assert b[key] == pytest.approx(a[key], rel=1e-5), key
            elif key not in ("valid", "test"):
                assert b[key] == a[key], key
    assert two[-1]["test"]["accuracy"] == one[-1]["test"]["accuracy"]
    m1, m2 = (checkpoint.load(tmp_path / run / "model.pt")[0].state_dict() for run in ("one", "two"))
    assert m1.keys() == m2.keys()
    for name in m1:  # the gradient summed in two halves, not in one sum: equal to float rounding
        torch.testing.assert_close(m2[name], m1[name], atol=1e-5, rtol=1e-4)


def batch(n: int) -> Batch:
    story = torch.arange(n)[:, None, None].expand(n, 2, 3).contiguous() + 1  # row r holds r + 1
    return Batch(story=story, query=story[:, 0], answer=torch.arange(n), length=torch.full((n,), 2),
                 time=torch.zeros(n, 2, dtype=torch.long), support=torch.zeros(n, 1, dtype=torch.long),
                 n_support=torch.ones(n, dtype=torch.long), task=torch.ones(n, dtype=torch.long))


@pytest.mark.parametrize("n", [7, 8, 2])
def test_the_processes_shares_of_a_batch_are_the_batch(n):
    shares = [ReferenceTraining([], batch(n), max_grad_norm=40.0, world=distributed.World(rank, 3)).share(batch(n))
              for rank in range(3)]
    rows = sorted(int(a) for share, weight in shares if weight for a in share.answer)
    assert rows == list(range(n))  # every question once, in one process
    assert [w for _, w in shares] == [3.0 if rank < n else 0.0 for rank in range(3)]  # DDP's mean times 3: the sum
    assert all(len(share) == 1 for share, w in shares if not w)  # a stand-in question, weighed 0


def test_one_process_takes_the_whole_batch():
    whole = batch(5)
    share, weight = ReferenceTraining([], whole, max_grad_norm=40.0).share(whole)
    assert share is whole and weight == 1.0


def test_the_kernel_is_refused_under_torchrun():
    cfg = apply_overrides(Config(), {"train.backend": "numba"})
    with pytest.raises(ConfigError, match="train.backend: the numba kernel runs in one process; under torchrun"):
        training_path(cfg, [], batch(2), print, distributed.World(rank=1, size=2))


def test_the_world_is_what_torchrun_says(monkeypatch):
    assert distributed.world() == distributed.World(0, 1, 0)
    monkeypatch.setenv("RANK", "3"), monkeypatch.setenv("WORLD_SIZE", "4"), monkeypatch.setenv("LOCAL_RANK", "1")
    here = distributed.world()
    assert (here.rank, here.size, here.local_rank, here.main, here.distributed) == (3, 4, 1, False, True)
    assert distributed.device_for(torch.device("cuda"), here) == torch.device("cuda", 1)  # its own GPU
    assert distributed.device_for(torch.device("cuda:0"), here) == torch.device("cuda", 0)  # as asked
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ConfigError, match="WORLD_SIZE: expected a whole number .torchrun sets it., found 'two'"):
        distributed.world()


FIXTURE_CFG = {"data.dir": str(FIXTURES), "data.task": "1", "train.restarts": 2, "train.backend": "torch"}


def fixture_run(overrides: dict):
    """(cfg, models, train Batch) for qa1 of the fixtures, as train() makes them."""
    from memnet.models import build_model
    from memnet.trainer import load_data
    cfg = apply_overrides(Config(), {**FIXTURE_CFG, **overrides})
    data, vocab = load_data(cfg)
    return cfg, [build_model(cfg, vocab, restarts=[s]) for s in range(2)], data["train"]


def with_spare(models: list, spare: bool) -> list:
    """The models, each with a parameter no step uses when `spare` (no model of memnet has one
    today: a switch that leaves a parameter out of some phase would)."""
    for m in models if spare else []:
        m.spare = torch.nn.Parameter(torch.zeros(1))
    return models


@pytest.mark.parametrize("spare", [False, True])
def test_the_probe_finds_the_parameters_a_step_leaves_unused(spare):
    from memnet.trainer import unused_parameters
    _, models, data = fixture_run({"model.stopping": True, "model.masking": "soft"})
    model = with_spare(models, spare)[0]
    for linear in (True, False):
        assert unused_parameters(model, data.index(slice(0, 8)), linear) == (["spare"] if spare else [])
        assert model.linear is False  # left as the trainer expects it
        assert all(p.grad is None for p in model.parameters())  # the probe's gradients are gone


@pytest.fixture
def one_process_group(tmp_path):
    """A gloo process group of this process alone, so DistributedDataParallel can be built here."""
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("spare", [False, True])
def test_under_torchrun_the_reference_model_trains_in_ddp(one_process_group, spare):
    from torch.nn.parallel import DistributedDataParallel
    cfg, models, data = fixture_run({})
    models = with_spare(models, spare)
    said = []
    path = training_path(cfg, models, data, said.append, distributed.World(rank=0, size=2))
    assert said == ["training on the reference model (torch autograd) in 2 processes (DistributedDataParallel, "
                    "gloo): the kernels run in one process only"]
    assert path.name == said[0].removeprefix("training on ").split(":")[0]
    assert [r.module for r in path.replicas] == models and all(type(r) is DistributedDataParallel for r in path.replicas)
    assert all(r.find_unused_parameters is spare for r in path.replicas)  # told only when there are some
    before = [m.tables.detach().clone() for m in models]
    order = np.stack([np.arange(len(data))] * 2)
    ages = np.broadcast_to(np.arange(data.story.shape[1]), (2, len(data), data.story.shape[1])).copy()
    losses = path.epoch(order, ages, lr=0.01, batch_size=32, linear=False)
    assert losses.shape == (2,) and (losses > 0).all()
    assert all(not torch.equal(b, m.tables) for b, m in zip(before, models))  # each restart stepped


def test_a_process_other_than_0_trains_silently_and_writes_nothing(one_process_group, tmp_path, capsys):
    from memnet.run import RunFolder
    from memnet.trainer import train_here
    cfg = apply_overrides(Config(), {**FIXTURE_CFG, "train.epochs": 2, "train.linear_start_epochs": 0,
                                     "train.eval_every": 1})
    result = train_here(cfg, RunFolder(tmp_path / "run"), distributed.World(rank=1, size=2), True, True)
    assert capsys.readouterr() == ("", "")  # process 0 speaks
    assert not (tmp_path / "run").exists() and result["saved"] is None  # and writes
    assert result["training_path"].endswith("in 2 processes (DistributedDataParallel, gloo)")
    assert result["train_questions"] == 500 and result["steps"] == 2 * 16  # it trained: 2 epochs of 16 batches of 32
    assert len(result["valid_accuracy_per_seed"]) == 2 and "test" in result
