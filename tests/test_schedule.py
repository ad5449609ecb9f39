"""The training schedule and model selection, read back from what a run writes: the learning
rate per epoch, linear start, which seed and epoch are chosen (on valid accuracy, never during
linear start), the train/valid split carved from a training file, and the joint run's schedule."""
import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import memnet.train as train_module
from memnet import checkpoint, config, generator
from memnet.data import read_splits
from memnet.errors import MemnetError
from memnet.run import RunFolder
from memnet.train import device_of, diverged, log_line, random_noise_time, schedule, train


def lines_of(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_learning_rate_per_epoch_follows_linear_start_then_halving(tiny, tmp_path):
    cfg = config.load(None, {"data.dir": str(tiny), "data.task": "1", "train.epochs": 5, "train.eval_every": 1,
                             "train.linear_start_epochs": 2, "train.linear_start_lr": 0.003, "train.lr": 0.02,
                             "train.lr_decay_every": 2})
    result = train(cfg, RunFolder(tmp_path / "run"), progress=False, log=False)
    lines = lines_of(tmp_path / "run")
    epochs = [line for line in lines if "epoch" in line]
    assert [line["epoch"] for line in epochs] == [1, 2, 3, 4, 5, 6, 7]
    assert [line["lr"] for line in epochs] == pytest.approx([0.003, 0.003, 0.02, 0.02, 0.01, 0.01, 0.005])
    # nothing is chosen during linear start: no best yet after epochs 1 and 2
    assert [line["best_valid_accuracy"] for line in epochs[:2]] == [-1.0, -1.0]
    after = [line["valid_accuracy"][0] for line in epochs[2:]]  # epochs 3..7
    running = [max(after[:i + 1]) for i in range(len(after))]
    assert [line["best_valid_accuracy"] for line in epochs[2:]] == pytest.approx(running)
    assert result["best_epoch"] == 3 + after.index(max(after))  # the first epoch of the best accuracy
    assert lines[-1]["final"] and lines[-1]["best_epoch"] == result["best_epoch"]
    # steps: 500 questions in batches of 32 -> 16 steps an epoch, 7 epochs
    assert [line["step"] for line in epochs] == [16 * e for e in range(1, 8)] and result["steps"] == 16 * 7


def test_schedule_function():
    cfg = config.load(None, {"train.lr": 0.04, "train.lr_decay_every": 3, "train.linear_start_lr": 0.001})
    got = [schedule(cfg, e, 2) for e in range(9)]
    assert got == [(0.001, True), (0.001, True), (0.04, False), (0.04, False), (0.04, False),
                   (0.02, False), (0.02, False), (0.02, False), (0.01, False)]
    assert schedule(cfg, 0, 0) == (0.04, False)  # no linear start: the first epoch at lr


# valid and train accuracy per evaluation (epochs 1..4, epoch 1 in linear start) and seed: the
# linear-start epoch has the best valid accuracy of all, and train would choose another epoch
VALID = [[0.9, 0.9], [0.3, 0.5], [0.6, 0.4], [0.6, 0.55]]  # seed 0 ties its best at epoch 4: epoch 3 stays
TRAIN = [[0.1, 0.1], [0.9, 0.2], [0.1, 0.3], [0.99, 0.3]]


def scripted_accuracy(monkeypatch, n_valid: int, snapshots: list):
    """The training path's accuracy replaced by VALID and TRAIN (valid has n_valid questions);
    each evaluation's weights of seed 0 are kept in `snapshots`."""
    real = train_module.training_path

    def path_with_scripted_accuracy(cfg, models, data, say):
        path = real(cfg, models, data, say)
        calls = {"valid": 0, "train": 0}

        def accuracy(batch, linear=False):
            split = "valid" if len(batch) == n_valid else "train"
            i = calls[split]
            calls[split] += 1
            assert linear == (i == 0)  # epoch 1 is the linear start: both splits scored without the softmax
            if split == "valid":
                snapshots.append({k: v.clone() for k, v in path.state_dict(0).items()})
            return np.array(VALID[i] if split == "valid" else TRAIN[i])

        path.accuracy = accuracy
        return path

    monkeypatch.setattr(train_module, "training_path", path_with_scripted_accuracy)


def test_best_seed_and_epoch_are_chosen_on_valid_accuracy_never_in_linear_start(tiny, tmp_path, monkeypatch, capsys):
    snapshots: list = []
    scripted_accuracy(monkeypatch, n_valid=100, snapshots=snapshots)
    cfg = config.load(None, {"data.dir": str(tiny), "data.task": "1", "train.epochs": 3, "train.eval_every": 1,
                             "train.linear_start_epochs": 1, "train.restarts": 2})
    result = train(cfg, RunFolder(tmp_path / "run"), progress=False)
    assert len(snapshots) == 4
    log = [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch")]
    shown = [re.sub(r"loss +[\d.]+| *[\d.]+s$", "", line) for line in log]  # loss and time vary
    assert shown == ["epoch    1/4 | lr 0.00500 |  | train  10.0% | valid  90.0% | best     - (seed 0) |",
                     "epoch    2/4 | lr 0.01000 |  | train  20.0% | valid  50.0% | best  50.0% (seed 1) |",
                     "epoch    3/4 | lr 0.01000 |  | train  10.0% | valid  60.0% | best  60.0% (seed 0) |",
                     "epoch    4/4 | lr 0.01000 |  | train  99.0% | valid  60.0% | best  60.0% (seed 0) |"]
    # valid: seed 0's best is 0.6 at epoch 3, seed 1's 0.55 at epoch 4 (epoch 1's 0.9 does not count)
    assert result["best_seed"] == 0 and result["best_epoch"] == 3
    assert result["valid_accuracy_per_seed"] == pytest.approx([0.6, 0.55])
    epochs = [line for line in lines_of(tmp_path / "run") if "epoch" in line]
    assert [line["best_seed"] for line in epochs] == [0, 1, 0, 0]
    assert [line["best_valid_accuracy"] for line in epochs] == pytest.approx([-1.0, 0.5, 0.6, 0.6])
    assert [line["train_accuracy"] for line in epochs] == TRAIN and [line["valid_accuracy"] for line in epochs] == VALID
    assert all(set(line) == {"epoch", "step", "lr", "loss", "train_accuracy", "valid_accuracy", "best_valid_accuracy",
                             "best_seed", "seconds"} for line in epochs)
    assert all(isinstance(line["loss"], float) and line["loss"] > 0 for line in epochs)
    seconds = [line["seconds"] for line in epochs]  # since the start, in ms steps
    assert seconds == sorted(seconds) and seconds[-1] <= result["seconds"]
    assert all(isinstance(t, float) and t == round(t, 3) for t in seconds)
    # the chosen model is seed 0's weights after epoch 3, in the result and in model.pt
    model, _, _, payload = checkpoint.load(tmp_path / "run" / "model.pt")
    assert payload["best_metric"] == pytest.approx(0.6) and payload["step"] == 3 * 16  # saved after epoch 3
    for name, value in snapshots[2].items():
        assert torch.equal(result["model"].state_dict()[name], value)
        assert torch.equal(model.state_dict()[name], value)
    assert not torch.equal(snapshots[2]["tables"], snapshots[3]["tables"])  # epoch 4 trained on


def test_carved_train_and_valid_splits_are_disjoint_by_story(tmp_path):
    # ten hand-written stories of two questions each; story i is the one with place<i>
    stories = "".join(f"1 Mary went to the place{i}.\n2 Where is Mary? \tplace{i}\t1\n"
                      f"3 John went to the hall.\n4 Where is John? \thall\t3\n" for i in range(10))
    (tmp_path / "qa1_train.txt").write_text(stories)
    (tmp_path / "qa1_test.txt").write_text(stories[:stories.index("1 Mary", 1)])
    splits = read_splits(tmp_path, [1], valid_fraction=0.2)

    def story_ids(samples):
        return [s.facts[0].text.split("place")[1].rstrip(".") for s in samples]

    train_ids, valid_ids = story_ids(splits["train"][1]), story_ids(splits["valid"][1])
    assert len(valid_ids) == 4 and len(train_ids) == 16  # 2 of 10 stories, both questions of each
    assert not set(train_ids) & set(valid_ids)
    assert set(train_ids) | set(valid_ids) == {str(i) for i in range(10)}
    assert all(valid_ids.count(i) == 2 for i in valid_ids)
    assert story_ids(read_splits(tmp_path, [1], valid_fraction=0.2)["valid"][1]) == valid_ids  # fixed
    assert len(splits["test"][1]) == 2


def test_a_joint_run_takes_the_joint_schedule(tmp_path):
    cfg = config.load(None, {"data.task": "1,2", "model.dim": 12, "train.epochs": 100, "train.lr_decay_every": 25,
                             "train.joint_dim": 8, "train.joint_epochs": 3, "train.joint_lr_decay_every": 1})
    joint, single = config.resolve(cfg, 2), config.resolve(cfg, 1)
    assert (joint.model.dim, joint.train.epochs, joint.train.lr_decay_every) == (8, 3, 1)
    assert (single.model.dim, single.train.epochs, single.train.lr_decay_every) == (12, 100, 25)
    assert (cfg.model.dim, cfg.train.epochs) == (12, 100)  # resolve returns a copy
    # a joint run through the trainer: the schedule in metrics.jsonl, the dimension in config.yaml
    for task in (1, 2):
        generator.write_dataset(tmp_path / "data", task, train=20, test=5, seed=0, valid=5)
    cfg = config.apply_overrides(cfg, {"data.dir": str(tmp_path / "data"), "train.eval_every": 1,
                                       "train.linear_start_epochs": 0, "train.lr": 0.02})
    result = train(cfg, RunFolder(tmp_path / "run"), progress=False, log=False)
    epochs = [line for line in lines_of(tmp_path / "run") if "epoch" in line]
    assert [line["lr"] for line in epochs] == pytest.approx([0.02, 0.01, 0.005])
    assert config.load(tmp_path / "run" / "config.yaml").model.dim == 8
    assert result["model"].dim == 8 and set(result["valid"]["tasks"]) == {"1", "2"}


def test_log_line_and_the_divergence_message(tmp_path):
    assert log_line(3, 10, 0.005, 1.23456, 0.5, 0.25, 0.0, 1, 12.34) == (
        "epoch    3/10 | lr 0.00500 | loss  1.2346 | train  50.0% | valid  25.0% | best   0.0% (seed 1) |   12.3s")
    assert "| best     - (seed 0) |" in log_line(1, 2, 0.01, 0.0, 0.0, 0.0, -1.0, 0, 0.0)  # none chosen yet
    loop = SimpleNamespace(epoch=3, run=None)
    with pytest.raises(MemnetError) as error:
        diverged(loop, np.array([1.0, np.nan, 2.0, np.inf]))
    assert str(error.value) == ("training stopped at epoch 3: the loss of seed 1, 3 is not finite "
                                "(try a smaller train.lr or model.init_std); no model was saved")
    loop.run = RunFolder(tmp_path / "run")
    with pytest.raises(MemnetError, match=r"seed 0 is not finite .*; no model was saved$"):
        diverged(loop, np.array([np.nan]))
    checkpoint.write(loop.run.model_path, {"state_dict": {}, "config": {}, "vocab": {}})
    with pytest.raises(MemnetError, match=r"; \S+model\.pt keeps the best weights before it$"):
        diverged(loop, np.array([np.nan]))


def test_resume_restores_every_seed(tiny, tmp_path, monkeypatch):
    values = {"data.dir": str(tiny), "data.task": "1", "train.epochs": 4, "train.eval_every": 2,
              "train.linear_start_epochs": 0, "train.restarts": 2}
    whole = train(config.load(None, values), RunFolder(tmp_path / "whole"), progress=False, log=False)
    real, calls = train_module.random_noise_time, []

    def interrupting(*args, **kwargs):  # Ctrl-C as epoch 3 starts
        calls.append(1)
        if len(calls) == 3 * 2:  # called once per seed and epoch
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(train_module, "random_noise_time", interrupting)
        assert train(config.load(None, values), RunFolder(tmp_path / "run"), progress=False, log=False)["interrupted"]
    resumed = train(config.Config(), RunFolder(tmp_path / "run", resume=True), progress=False, log=False)
    assert resumed["valid_accuracy_per_seed"] == whole["valid_accuracy_per_seed"]
    assert resumed["steps"] == whole["steps"] and resumed["best_epoch"] == whole["best_epoch"]
    a, b = (checkpoint.read(tmp_path / name / "last.pt", keys=("states",)) for name in ("whole", "run"))
    for seed in range(2):
        for name, value in a["states"][seed].items():
            assert torch.allclose(value, b["states"][seed][name])
    assert not torch.equal(a["states"][0]["tables"], a["states"][1]["tables"])  # two different seeds


def test_random_noise_ages_memories_by_the_blanks_before_them():
    g = torch.Generator().manual_seed(0)
    assert torch.equal(random_noise_time(3, 5, 0.0, g), torch.arange(5).expand(3, 5))  # no noise: age = slot
    times = random_noise_time(200, 6, 0.3, g)
    steps = times.diff(dim=1)  # each memory is one older than the one before it, plus a blank or not
    assert set(steps.unique().tolist()) == {1, 2} and set((times[:, 0]).unique().tolist()) == {0, 1}
    blanks = (times[:, 0] + steps.sum(1) - 5).float()  # blanks inserted in the row
    assert blanks.mean().item() == pytest.approx(6 * 0.3, abs=0.3)


@pytest.mark.parametrize("device, message", [
    ("cuda", "train.device: cuda is not available here (no CUDA device); use cpu"),
    ("mps", "train.device: mps is not available here; use cpu"),
])
def test_a_device_that_is_not_there_is_named(device, message):
    available = torch.cuda.is_available() if device == "cuda" else torch.backends.mps.is_available()
    cfg = config.load(None, {"train.device": device})
    if available:
        assert device_of(cfg).type == device
    else:
        with pytest.raises(config.ConfigError) as error:
            device_of(cfg)
        assert str(error.value) == message
    assert device_of(config.load(None, {})) == torch.device("cpu")
