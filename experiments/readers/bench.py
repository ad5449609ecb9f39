"""The readers' columns of the 20-task table: scripts/bench_babi.py with the pair and word readers'
variants added (its flags, its results file and its table), from the repository root:

    .venv/bin/python -m experiments.readers.bench --tasks 19 --variants sup_pairs --restarts 10
    .venv/bin/python -m experiments.readers.bench --table

Each variant states the reader's settings in full, so a changed default cannot change its column.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import experiments.readers  # noqa: F401  (registers model.type pairs and words)

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    """scripts/bench_babi.py, imported as a module."""
    spec = importlib.util.spec_from_file_location("bench_babi", ROOT / "scripts" / "bench_babi.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _bench()
VARIANTS = bench.VARIANTS
# the readers' recipe: the run's choices that memnet/config.py's defaults could change
READERS = {"train.ensemble": False, "train.ensemble_members": 0, "train.restart_choice": "best"}
bench.RECIPES.update({"pairs": READERS, "words": READERS})

# the pair reader (pairs.py) with attention supervision on the pair of supporting
# facts: its settings in full, so a changed default cannot change the row; lr for the summed
# loss, the gradient norm unclipped in effect (40 slows it several-fold), no random noise; 800
# epochs chosen on qa19's valid split over 300, 400 and 600 (docs/results.md, "Two facts at once")
VARIANTS["sup_pairs"] = {"model.type": "pairs", "model.dim": 32, "model.hidden": 128, "model.max_words": 20,
                         "model.temporal": True, "model.places": True, "model.dropout": 0.1, "model.init_std": 1.0,
                         "train.attention_supervision": 1.0, "train.lr": 0.0016, "train.epochs": 800,
                         "train.lr_decay_every": 200, "train.max_grad_norm": 1e5, "train.random_noise": 0.0,
                         "train.linear_start_epochs": 0}
# the pair reader without supervision: each place of the answer read from one fact of the pair
# (model.place_facts), SGD at lr 0.02 with the gradient clipped at 40, 300 epochs
VARIANTS["pairs"] = {**{k: v for k, v in VARIANTS["sup_pairs"].items() if k != "train.attention_supervision"},
                     "model.place_facts": True, "train.lr": 0.02, "train.max_grad_norm": 40.0, "train.epochs": 300,
                     "train.lr_decay_every": 75}
# the word reader (words.py): every question word reads the story's words; SGD at
# lr 0.02 on the summed loss with the gradient clipped at 40, no random noise, 150 epochs
VARIANTS["words"] = {"model.type": "words", "model.dim": 32, "model.hidden": 64, "model.temporal": True,
                     "model.init_std": 1.0, "train.attention_supervision": 0.0, "train.lr": 0.02,
                     "train.max_grad_norm": 40.0, "train.epochs": 150, "train.lr_decay_every": 37,
                     "train.random_noise": 0.0, "train.linear_start_epochs": 0, "model.dropout": 0.0,
                     "model.summed": False, "model.summed_out": False}
# the same with dropout 0.2 in training on the embedded words, the compared words and the pooled vector
VARIANTS["words_drop"] = {**VARIANTS["words"], "model.dropout": 0.2}
# and each question word reading the story's words summed through a gate each, beside the mean
VARIANTS["words_sum"] = {**VARIANTS["words_drop"], "model.summed": True}
# and the summed read also straight to the answer's layer, past the comparing GRU
VARIANTS["words_out"] = {**VARIANTS["words_sum"], "model.summed_out": True}
# and taught the supporting facts: each sentence's gate of the summed read toward [it is one]
VARIANTS["words_sup"] = {**VARIANTS["words_out"], "train.attention_supervision": 1.0}
# and a list's items' outputs added to its own (model.list_answers): qa8's pairs scored from what
# says each item is carried
VARIANTS["words_list"] = {**VARIANTS["words_sup"], "model.list_answers": True}
# and at inference a list's items in the order the open sentences first name them (model.list_order)
VARIANTS["words_order"] = {**VARIANTS["words_list"], "model.list_order": True}
# the same from answers alone: words_out's lists scored by their items and ordered by the open sentences
VARIANTS["words_out_order"] = {**VARIANTS["words_out"], "model.list_answers": True, "model.list_order": True}
bench.TITLES.update({
    "sup_pairs": "pair reader +sup", "pairs": "pair reader, places from facts", "words": "word reader",
    "words_drop": "word reader, dropout 0.2", "words_sum": "word reader, dropout 0.2, summed read",
    "words_out": "word reader, dropout 0.2, summed read to the answer too",
    "words_sup": "the same +sup (the summed read's gates)", "words_list": "the same, a list scored by its items too",
    "words_order": "the same, its items in the order the facts name them",
    "words_out_order": "word reader, answers alone, lists scored by items, in the order the open sentences give"})
recipe, main = bench.recipe, bench.main

if __name__ == "__main__":
    main()
