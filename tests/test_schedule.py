"""The training schedule and model selection, read back from what a run writes: the learning
rate per epoch, linear start, which seed and epoch are chosen (on valid accuracy, never during
linear start), the train/valid split carved from a training file, and the joint run's schedule."""
import json
import time
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import memnet.trainer as train_module
from memnet import checkpoint, config, generator, kernels
from memnet.data import read_splits
from memnet.errors import MemnetError
from memnet.run import RunFolder
from memnet.trainer import device_of, diverged, load_data, log_line, random_noise_time, schedule, train


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
    assert "model" not in lines[-1] and "saved" not in lines[-1]  # the result's objects stay out of the log
    assert result["training_seconds"] == round(result["training_seconds"], 3)
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
VALID = [[0.9, 0.9], [0.3, 0.5], [0.6, 0.4], [0.6, 0.55]]  # seed 0 ties its best at epoch 4: epoch 4 is kept
TRAIN = [[0.1, 0.1], [0.9, 0.2], [0.1, 0.3], [0.99, 0.3]]


def scripted_accuracy(monkeypatch, n_valid: int, snapshots: list, epochs: list):
    """The training path's accuracy replaced by VALID and TRAIN (valid has n_valid questions);
    each evaluation's weights of seed 0 are kept in `snapshots`, each epoch's (lr, linear,
    losses) in `epochs`; an epoch takes at least 0.05 s."""
    real = train_module.training_path

    def path_with_scripted_accuracy(cfg, models, data, say, here):
        path = real(cfg, models, data, say, here)
        calls = {"valid": 0, "train": 0}

        def accuracy(batch, linear=False):
            split = "valid" if len(batch) == n_valid else "train"
            i = calls[split]
            calls[split] += 1
            assert linear == (i == 0)  # epoch 1 is the linear start: both splits scored without the softmax
            if split == "valid":
                snapshots.append({k: v.clone() for k, v in path.state_dict(0).items()})
            return np.array(VALID[i] if split == "valid" else TRAIN[i])

        real_epoch = path.epoch

        def epoch(order, ages, lr, batch_size, linear):
            time.sleep(0.05)
            losses = real_epoch(order, ages, lr, batch_size, linear)
            epochs.append((lr, linear, losses.copy()))
            return losses

        path.accuracy, path.epoch = accuracy, epoch
        return path

    monkeypatch.setattr(train_module, "training_path", path_with_scripted_accuracy)


def test_best_seed_and_epoch_are_chosen_on_valid_accuracy_never_in_linear_start(tiny, tmp_path, monkeypatch, capsys):
    snapshots, steps = [], []
    scripted_accuracy(monkeypatch, n_valid=100, snapshots=snapshots, epochs=steps)
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
    # valid: seed 0's best is 0.6 at epochs 3 and 4 (the later kept), seed 1's 0.55 at epoch 4
    # (epoch 1's 0.9 does not count)
    assert result["best_seed"] == 0 and result["best_epoch"] == 4
    assert result["valid_accuracy_per_seed"] == pytest.approx([0.6, 0.55])
    epochs = [line for line in lines_of(tmp_path / "run") if "epoch" in line]
    assert [line["best_seed"] for line in epochs] == [0, 1, 0, 0]
    assert [line["best_valid_accuracy"] for line in epochs] == pytest.approx([-1.0, 0.5, 0.6, 0.6])
    assert [line["train_accuracy"] for line in epochs] == TRAIN and [line["valid_accuracy"] for line in epochs] == VALID
    assert all(set(line) == {"epoch", "step", "lr", "loss", "train_accuracy", "valid_accuracy", "best_valid_accuracy",
                             "best_seed", "seconds"} for line in epochs)
    assert [(lr, linear) for lr, linear, _ in steps] == [(0.005, True), (0.01, False), (0.01, False), (0.01, False)]
    # the loss logged: per question (500) and seed (2)
    assert [line["loss"] for line in epochs] == pytest.approx([float(losses.sum()) / 500 / 2 for *_, losses in steps])
    assert result["train_questions"] == 500 and result["interrupted"] is False
    assert result["training_path"] == kernels.numba_memn2n.NAME  # the default run: the kernel covers it
    # the training steps' time adds up over the epochs (each slept 0.05 s), within the whole
    assert 4 * 0.05 <= result["training_seconds"] <= result["seconds"] == round(result["seconds"], 3)
    seconds = [line["seconds"] for line in epochs]  # since the start, in ms steps
    assert seconds == sorted(seconds) and seconds[-1] <= result["seconds"]
    assert all(isinstance(t, float) and t == round(t, 3) for t in seconds)
    # the chosen model is seed 0's weights after epoch 4, in the result and in model.pt
    model, _, _, payload = checkpoint.load(tmp_path / "run" / "model.pt")
    assert payload["best_metric"] == pytest.approx(0.6) and payload["step"] == 4 * 16  # saved after epoch 4
    for name, value in snapshots[3].items():
        assert torch.equal(result["model"].state_dict()[name], value)
        assert torch.equal(model.state_dict()[name], value)
    assert not torch.equal(snapshots[2]["tables"], snapshots[3]["tables"])  # not epoch 3's, as good on valid


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


def test_a_joint_run_trains_one_model_on_every_task(tmp_path):
    # a joint run through the trainer: the schedule in metrics.jsonl, every task in its metrics
    for task in (1, 2):
        generator.write_dataset(tmp_path / "data", task, train=20, test=5, seed=0, valid=5)
    cfg = config.load(None, {"data.dir": str(tmp_path / "data"), "data.task": "1,2", "model.dim": 8, "train.epochs": 3,
                             "train.lr_decay_every": 1, "train.eval_every": 1, "train.linear_start_epochs": 0,
                             "train.lr": 0.02})
    result = train(cfg, RunFolder(tmp_path / "run"), progress=False, log=False)
    epochs = [line for line in lines_of(tmp_path / "run") if "epoch" in line]
    assert [line["lr"] for line in epochs] == pytest.approx([0.02, 0.01, 0.005])
    assert config.load(tmp_path / "run" / "config.yaml").model.dim == 8
    assert result["model"].dim == 8 and set(result["valid"]["tasks"]) == {"1", "2"}


def test_log_line_and_the_divergence_message(tmp_path):
    assert log_line(3, 10, 0.005, 1.23456, 0.5, 0.25, 0.0, 1, 12.34) == (
        "epoch    3/10 | lr 0.00500 | loss  1.2346 | train  50.0% | valid  25.0% | best   0.0% (seed 1) |   12.3s")
    assert "| best     - (seed 0) |" in log_line(1, 2, 0.01, 0.0, 0.0, 0.0, -1.0, 0, 0.0)  # none chosen yet
    # train.restart_choice mean: the mean that chose the seed beside its best
    assert "| best  90.0% (seed 2, mean 82.5%) |" in log_line(5, 9, 0.01, 0.0, 0.0, 0.0, 0.9, 2, 0.0, 0.825)
    assert "| best     - (seed 0) |" in log_line(1, 2, 0.01, 0.0, 0.0, 0.0, -1.0, 0, 0.0, 0.0)
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


@pytest.mark.parametrize("choice", ["best", "mean"])
def test_resume_restores_every_seed(tiny, tmp_path, monkeypatch, choice):
    values = {"data.dir": str(tiny), "data.task": "1", "train.epochs": 4, "train.eval_every": 2,
              "train.linear_start_epochs": 0, "train.restarts": 2, "train.restart_choice": choice}
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
    assert resumed["mean_valid_accuracy_per_seed"] == whole["mean_valid_accuracy_per_seed"]
    assert resumed["best_seed"] == whole["best_seed"]
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


def test_load_data_names_what_is_missing_and_builds_the_vocabulary_as_configured(tmp_path):
    with pytest.raises(config.ConfigError) as error:
        load_data(config.load(None, {"data.task": "1"}))
    assert str(error.value) == "data.dir: no data folder given (--data DIR)"
    with pytest.raises(config.ConfigError, match=r"^data\.task: "):
        load_data(config.load(None, {"data.dir": str(tmp_path), "data.task": "x"}))
    # two-word answers ('n,e'), and a train file without a valid one: valid_fraction carves it
    story = "1 Mary went to the hallway.\n2 Where is Mary? \tn,e\t1\n3 Mary went to the {}.\n4 Where is Mary? \t{}\t3\n"
    (tmp_path / "qa1_train.txt").write_text("".join(story.format(w, w) for w in ["kitchen", "garden", "office", "bath"]))
    cfg = config.load(None, {"data.dir": str(tmp_path), "data.task": "1", "data.valid_fraction": 0.5})
    data, vocab = load_data(cfg)
    assert (len(data["train"]), len(data["valid"]), data["test"]) == (4, 4, None)
    assert "n,e" in vocab.answers and "n,e" in vocab.stoi  # a phrase is a word of its own: its own row of W
    assert "n,e" not in load_data(config.apply_overrides(cfg, {"model.phrase_answers": False}))[1].stoi
    assert "went" in load_data(config.apply_overrides(cfg, {"model.vocabulary_softmax": True}))[1].answers
    assert "went" not in vocab.answers
    transformer = config.load(None, {"data.dir": str(tmp_path), "data.task": "1", "data.valid_fraction": 0.5,
                                     "model.type": "transformer"})  # it has no phrase_answers: no phrases
    assert "n,e" in load_data(transformer)[1].answers and "n,e" not in load_data(transformer)[1].stoi
    # a train file without a single question: named, even when a valid file has some
    (tmp_path / "qa1_train.txt").write_text("1 Mary went to the hallway.\n")
    (tmp_path / "qa1_valid.txt").write_text(story.format("bath", "bath"))
    with pytest.raises(MemnetError, match=r"qa1_train.txt: expected the train questions of task 1, found no question in it; a run needs them"):
        load_data(cfg)


def test_a_model_without_linear_start_skips_it_and_says_so(tiny, tmp_path, capsys):
    values = {"data.dir": str(tiny), "data.task": "1", "train.epochs": 1, "train.eval_every": 1,
              "train.linear_start_epochs": 2, "model.type": "transformer", "model.dim": 8, "model.ff_dim": 8}
    result = train(config.load(None, values), RunFolder(tmp_path / "t"), progress=False)
    assert [line["lr"] for line in lines_of(tmp_path / "t") if "epoch" in line] == [0.01]  # one epoch, at lr
    assert result["best_epoch"] == 1
    out, err = capsys.readouterr()
    assert "linear start: skipped (transformer has no softmax-free phase)" in out
    assert err == ""  # progress=False: no progress bar
    train(config.load(None, {**values, "train.linear_start_epochs": 0}), progress=False)
    assert "linear start" not in capsys.readouterr().out
    memn2n = {k: v for k, v in values.items() if k != "model.ff_dim"}
    train(config.load(None, {**memn2n, "model.type": "memn2n", "model.dim": 4, "train.linear_start_epochs": 1}),
          progress=False, log=False)
    assert capsys.readouterr().out == ""  # log=False: nothing printed


def test_an_interrupt_in_the_first_epoch_logs_that_epochs_schedule(tiny, tmp_path, monkeypatch, capsys):
    real = train_module.random_noise_time
    calls = []

    def interrupting(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # Ctrl-C as epoch 2 starts: epoch 1 done, with no evaluation yet
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(train_module, "random_noise_time", interrupting)
    values = {"data.dir": str(tiny), "data.task": "1", "train.epochs": 4, "train.eval_every": 4, "train.lr": 0.02,
              "train.lr_decay_every": 1, "train.linear_start_epochs": 0}
    result = train(config.load(None, values), RunFolder(tmp_path / "run"), progress=False)
    assert result["interrupted"] is True and result["best_epoch"] == 1
    said = capsys.readouterr().out.splitlines()
    assert "interrupted: evaluating the weights of now (--resume continues from the last evaluation)" in said
    line = lines_of(tmp_path / "run")[0]
    assert (line["epoch"], line["lr"], line["loss"]) == (1, 0.02, None)  # epoch 1's rate; no loss measured


@pytest.mark.parametrize("ctrl_c", [True, False])
def test_ctrl_c_inside_a_numba_function_is_an_interrupt(tiny, tmp_path, monkeypatch, ctrl_c):
    # Numba turns a KeyboardInterrupt raised inside a compiled function into a SystemError ("returned
    # a result with an exception set") whose cause it is: the run still keeps its model and evaluates
    def interrupting(*args, **kwargs):
        try:
            raise KeyboardInterrupt if ctrl_c else RuntimeError("a bug")
        except BaseException as e:
            raise SystemError("CPUDispatcher(<function _seed_predict>) returned a result with an exception set") from e

    monkeypatch.setattr(train_module, "random_noise_time", interrupting)
    values = {"data.dir": str(tiny), "data.task": "1", "train.epochs": 2, "train.linear_start_epochs": 0}
    if not ctrl_c:  # any other SystemError is a bug, and stays one
        with pytest.raises(SystemError):
            train(config.load(None, values), RunFolder(tmp_path / "run"), progress=False, log=False)
    else:
        assert train(config.load(None, values), RunFolder(tmp_path / "run"), progress=False, log=False)["interrupted"]
        assert (tmp_path / "run" / "model.pt").is_file()
    assert not (tmp_path / "run" / "lock").exists()  # released either way


def test_a_resumed_run_keeps_its_vocabulary_when_the_data_grows(tiny, tmp_path, monkeypatch):
    import shutil
    shutil.copytree(tiny, tmp_path / "data")
    values = {"data.dir": str(tmp_path / "data"), "data.task": "1", "train.epochs": 2, "train.eval_every": 1,
              "train.linear_start_epochs": 0}
    real, calls = train_module.random_noise_time, []

    def interrupting(*args, **kwargs):  # Ctrl-C as epoch 2 starts
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(train_module, "random_noise_time", interrupting)
        first = train(config.load(None, values), RunFolder(tmp_path / "run"), progress=False, log=False)
    with open(tmp_path / "data" / "qa1_train.txt", "a") as f:  # a new word and a new answer
        f.write("1 Zorba journeyed to the observatory.\n2 Where is Zorba? \tobservatory\t1\n")
    resumed = train(config.Config(), RunFolder(tmp_path / "run", resume=True), progress=False, log=False)
    assert resumed["model"].tables.shape == first["model"].tables.shape  # the checkpoint's vocabulary
    assert resumed["train_questions"] == first["train_questions"] + 1


def test_the_reference_path_scores_linear_start_and_sums_the_epochs_loss(tiny):
    from memnet.models import build_model, init_weights
    from memnet.trainer import ReferenceTraining, epoch_order
    cfg = config.load(None, {"data.dir": str(tiny), "data.task": "1", "model.dim": 6})
    data, vocab = load_data(cfg)
    models = [init_weights(build_model(cfg, vocab), cfg, s) for s in range(2)]
    path = ReferenceTraining(models, data["train"], max_grad_norm=40.0)
    plain, linear = path.accuracy(data["valid"]), path.accuracy(data["valid"], linear=True)
    assert not np.array_equal(plain, linear) and models[0].linear is False  # scored without the softmax, then reset
    models[0].linear = True
    from memnet.evaluation import accuracy
    assert linear[0] == pytest.approx(accuracy(models[0], data["valid"]))
    models[0].linear = False
    order, ages = epoch_order([torch.Generator().manual_seed(s) for s in range(2)], data["train"], 0.0)
    before = [path.state_dict(s) for s in range(2)]
    losses = path.epoch(order, ages, 0.0, 500, False)  # lr 0: one batch of every question, nothing changes
    assert losses == pytest.approx([float(m(data["train"]).loss.detach()) for m in models], rel=1e-5)
    path.epoch(order, ages, 0.01, 32, False)
    path.load_state_dict(1, before[1])
    assert all(torch.equal(v, path.state_dict(1)[k]) for k, v in before[1].items())
    assert not torch.equal(before[0]["tables"], path.state_dict(0)["tables"])
