"""The readers' columns of the bench (experiments/readers/bench.py: scripts/bench_babi.py with their
variants): a pair reader's run end to end, every variant a valid config with its recipe, and the
recipes of experiments/README.md the variants docs/results.md reports."""
import json
from pathlib import Path

import pytest

from experiments.readers import bench

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "experiments" / "README.md"
READERS = ["sup_pairs", "pairs", "words", "words_drop", "words_sum", "words_out", "words_sup", "words_list",
           "words_order", "words_out_order"]


@pytest.mark.parametrize("variant", READERS)
def test_every_readers_variant_is_a_valid_config_with_its_recipe(variant):
    from memnet import config
    cfg = config.load(None, {**bench.recipe(variant), **bench.VARIANTS[variant], "train.restarts": 10})
    assert cfg.model.type == bench.VARIANTS[variant]["model.type"]


def test_the_pair_reader_runs_on_the_bench(babi_fixtures, tmp_path):
    path = tmp_path / "pairs.jsonl"
    bench.main(["--data", str(babi_fixtures / "en-valid"), "--tasks", "1", "--variants", "sup_pairs", "--restarts", "1",
                "--epochs", "2", "--results", str(path)])
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["variant"] == "sup_pairs" and record["config"]["model"]["type"] == "pairs"
    assert len(record["hop_accuracy"]) == 2 and record["epochs"] == 2


def test_the_recipes_pair_reader_run_is_sup_pairs():
    # experiments/README.md trains the pair reader with these flags; docs/results.md reports them as
    # `sup_pairs` (which also states linear start off: the reader has none, the trainer skips it)
    from memnet import config
    from experiments.readers.pairs import PairReader
    flags = {"train.attention_supervision": 1.0, "train.lr": 0.0016, "train.max_grad_norm": 100000,
             "train.random_noise": 0, "train.epochs": 800, "train.lr_decay_every": 200}
    readme = config.load(None, {"model.type": "pairs", **flags, "train.linear_start_epochs": 0})
    assert readme == config.load(None, {**bench.recipe("sup_pairs"), **bench.VARIANTS["sup_pairs"], "train.restarts": 1})
    assert not PairReader.has_linear_start
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "--model.type=pairs" in text and " ".join(f"--{k}={v}" for k, v in flags.items()) in text


def test_the_recipes_unsupervised_pair_reader_run_is_pairs():
    # experiments/README.md trains the pair reader on answers alone with these flags; docs/results.md
    # reports them as `pairs`
    from memnet import config
    flags = {"model.place_facts": "true", "train.lr": 0.02, "train.max_grad_norm": 40, "train.random_noise": 0,
             "train.epochs": 300, "train.lr_decay_every": 75}
    readme = config.load(None, {"model.type": "pairs", **flags, "train.linear_start_epochs": 0})
    assert readme == config.load(None, {**bench.recipe("pairs"), **bench.VARIANTS["pairs"], "train.restarts": 1})
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert " ".join(f"--{k}={v}" for k, v in flags.items()) in text


def test_the_recipes_word_reader_runs_are_the_benchs_words_variants():
    # experiments/README.md trains the word reader with these flags, then adds dropout, the summed read, the
    # sum to the answer and the facts; docs/results.md reports them as `words`, `words_drop`,
    # `words_sum`, `words_out` and `words_sup`
    from memnet import config
    flags = {"train.lr": 0.02, "train.random_noise": 0, "train.epochs": 150, "train.lr_decay_every": 37}
    runs = {"words": {"model.type": "words", **flags, "train.linear_start_epochs": 0}}
    runs["words_drop"] = {**runs["words"], "model.dropout": 0.2}
    runs["words_sum"] = {**runs["words_drop"], "model.summed": "true"}
    runs["words_out"] = {**runs["words_sum"], "model.summed_out": "true"}
    runs["words_sup"] = {**runs["words_out"], "train.attention_supervision": 1.0}
    for variant, run in runs.items():
        assert config.load(None, {**run, "train.restarts": 1}) == config.load(
            None, {**bench.recipe(variant), **bench.VARIANTS[variant], "train.restarts": 1}), variant
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "--model.type=words" in text and " ".join(f"--{k}={v}" for k, v in flags.items()) in text
    assert "--model.dropout=0.2" in text and "--model.summed=true" in text and "--model.summed_out=true" in text
    assert "--train.attention_supervision=1.0" in text
