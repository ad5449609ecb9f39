"""The 20-task bAbI 1k table: test error per task for MemN2N as in the paper and memnet's
variants, beside the published figures (Sukhbaatar et al. 2015, Table 1).

Every run selects on en-valid's valid split (best epoch and best restart) and reports the
test split; each record also holds the cross-fitted valid error of that choice
(crossfit_errors: a fairer yardstick than the chosen model's valid error when settings whose
restarts vary differently are compared on valid). Results are appended per (variant, task)
to a JSONL file, so the table can be filled in parts across sessions; --table prints it from
whatever is there (the latest record of a (variant, task) wins).

    .venv/bin/python scripts/bench_babi.py --variants paper --restarts 10        # 20 tasks
    .venv/bin/python scripts/bench_babi.py --tasks 1,2,16 --variants mask,stop --epochs 50
    .venv/bin/python scripts/bench_babi.py --table

Variants (each is the paper's recipe, the defaults in memnet/config.py, plus one change):
paper, mask (model.masking=hard), stop (model.stopping=true), both, sup (attention
supervision), joint (one model on all the given tasks, with the train.joint_* settings) and
generated (the paper's recipe trained on 1,000 questions per task from memnet.generator,
tested on the official test file: a faithful generator lands within 2 points of paper),
transformer (memnet.transformer, 2 layers), universal (one shared layer, up to 3 steps,
halting per question) and ut_act (the Universal Transformer with ACT per position, at the sizes
of its authors' bAbI runs: d = 128, 4 heads, filter 512, up to 8 steps). Linear start
(train.linear_start_epochs, 20 at lr 0.005) runs before the 100 epochs of the schedule; the
transformers have no linear start.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from memnet import babi, config, generator, official
from memnet.config import resolve
from memnet.evaluation import is_failed, read_results
from memnet.train import charge, train

ROOT = Path(__file__).resolve().parents[1]

# the switches that differ from the paper's recipe; stated in full so a changed default in
# memnet/config.py cannot silently change the "paper" row
PAPER = {"model.type": "memn2n", "model.masking": "off", "model.stopping": False, "train.attention_supervision": 0.0,
         "model.answer_from": "state", "model.temporal_zero_init": False, "model.init_std": 0.1,
         "model.null_memory": True, "model.vocabulary_softmax": False, "model.phrase_answers": True,
         "model.alternate_init": False, "model.answer_hidden": 0, "model.answer_reads": "all",
         "train.ensemble": False, "train.ensemble_members": 0, "train.restart_choice": "best"}
# the transformer readers' settings that memnet/config.py's defaults could change
TRANSFORMER = {"model.stopping": False, "model.act": False, "model.encoding": "pe", "model.init_std": 0.1,
               "model.vocabulary_softmax": False, "train.attention_supervision": 0.0, "train.ensemble": False,
               "train.ensemble_members": 0, "train.restart_choice": "best"}
# the answer from the question and what the hop read at d = 40 (the `question` variant), the
# answer module, and the two ideas as the best setting with both found them: the parts the
# question family of variants below is made of
QUESTION = {"model.temporal_zero_init": True, "model.init_std": 0.3, "model.alternate_init": True,
            "model.answer_from": "question", "model.dim": 40}
MODULE = {"model.answer_hidden": 64}
CURRENT = {**MODULE, "model.answer_reads": "current"}  # the module over the question and hop k's read-out
LONG = {"train.lr": 0.02, "train.epochs": 150, "train.lr_decay_every": 37}  # config.yaml's schedule
WIDE = {**QUESTION, **CURRENT, **LONG, "model.dim": 50}  # config.yaml's setting (question_wide)
BOTH = {"model.stopping": True, "model.masking": "soft", "model.halt_init": -6.0, "model.mask_init": -5.0}
VARIANTS: dict[str, dict[str, Any]] = {
    "paper": {},
    # the paper's recipe with padding masked and no null memory: a hop must read something
    "nonull": {"model.null_memory": False},
    "mask": {"model.masking": "hard"},
    "stop": {"model.stopping": True},
    "both": {"model.masking": "hard", "model.stopping": True},
    "sup": {"train.attention_supervision": 1.0},
    # the paper's recipe with T(i) starting at zero and a larger initial scale
    "zero": {"model.temporal_zero_init": True, "model.init_std": 0.3},
    # +T0 on even seeds, the paper's initialisation on odd ones: the best on validation chooses
    "alt": {"model.temporal_zero_init": True, "model.init_std": 0.3, "model.alternate_init": True},
    # alt's 10 restarts as one model: their answer distributions averaged (train.ensemble)
    "alt_ens": {"model.temporal_zero_init": True, "model.init_std": 0.3, "model.alternate_init": True,
                "train.ensemble": True},
    # alt with the answer from the question and what the hop read, softmax(W (u^1 + o^k)), and
    # d = 40 (config.yaml until the answer module; chosen on valid over d = 20 and 30)
    "question": QUESTION,
    # question with the answer module, 64 units over the question and the read-outs so far
    # (config.yaml from 2961faf; chosen on valid over 128 units), and over the question and the
    # current hop's read-out (config.yaml since 5116fba's answer_reads; chosen on valid)
    "question_mlp": {**QUESTION, **MODULE},
    "question_cur": {**QUESTION, **CURRENT},
    # question_cur at lr 0.02 for 150 epochs halved every 37 (config.yaml from 43d2f88 until d 50;
    # chosen on valid over lr 0.02 and 0.03 for 100 epochs, and 150 epochs at lr 0.01)
    "question_long": {**QUESTION, **CURRENT, **LONG},
    # question_long at d = 50 (config.yaml until 160f602; chosen on valid over d = 40)
    "question_wide": WIDE,
    # question_wide's model: the ensemble of its 5 restarts best on valid (train.ensemble_members;
    # d and k chosen by cross-fitting on valid, docs/results.md)
    "question_ens": {**WIDE, "train.ensemble": True, "train.ensemble_members": 5},
    # question_wide keeping the restart with the best mean valid accuracy over its evaluations
    # (train.restart_choice mean; config.yaml since: chosen by the cross-fitted valid error)
    "question_mean": {**WIDE, "train.restart_choice": "mean"},
    # question_mean with the module reading the product u^1 ⊙ o^k too (model.answer_reads product)
    "question_prod": {**WIDE, "model.answer_reads": "product", "train.restart_choice": "mean"},
    # question_mean with a pointer in time: hop k's scores add a learned weight per age difference
    # from what hop k - 1 read, within ±5 (model.relative_time; config.yaml since; the span chosen
    # on valid over 10 and 20)
    "question_rel": {**WIDE, "model.relative_time": 5, "train.restart_choice": "mean"},
    # question_rel with the pointer's weights reading the hop's state (w^k + r^k u^k,
    # model.relative_query; config.yaml since: cross-fitted valid error lower on four seed sets)
    "question_rq": {**WIDE, "model.relative_time": 5, "model.relative_query": True, "train.restart_choice": "mean"},
    # the same with both ideas on, masking soft, the halting unit starting at σ(-6) and the
    # masking penalty at e^-5: the best setting with both ideas on valid (docs/results.md)
    "both_q": {**QUESTION, **BOTH},
    # question_cur with both ideas as both_q: ties question_cur on valid (docs/results.md)
    "both_cur": {**QUESTION, **BOTH, **CURRENT},
    # config.yaml (question_rq) with both ideas: soft masking from a penalty of e^-1, the halting
    # unit from σ(-4) trained by the expected loss (never stops early on qa1-qa3, qa16), or
    # (both_right) learning whether each hop's answer is right (halt_training right), the answer the
    # rule gives trained at 1 and the others at 0.05, stopping where h_k passes 0.9
    "both_rq": {**WIDE, "model.relative_time": 5, "model.relative_query": True, "train.restart_choice": "mean",
                "model.stopping": True, "model.masking": "soft", "model.halt_init": -4.0, "model.mask_init": -1.0},
    # config.yaml (`question`) with attention supervision, without and with the answer module
    # (64 hidden units over the question and the read-outs)
    "sup_q": {**QUESTION, "train.attention_supervision": 1.0},
    "sup_mlp": {**QUESTION, "train.attention_supervision": 1.0, **MODULE},
    # the demo's setting: both ideas, the answer from each hop's read-out, T(i) from zero
    "ours": {"model.masking": "hard", "model.stopping": True, "model.answer_from": "readout",
             "model.temporal_zero_init": True, "model.init_std": 0.3, "model.null_memory": False},
    "joint": {},
    # joint training with alt's initialisations and the single-task schedule (100 epochs,
    # halved every 25; chosen on valid over the paper's joint 60 and 15)
    "joint_alt": {"model.temporal_zero_init": True, "model.init_std": 0.3, "model.alternate_init": True,
                  "train.joint_epochs": 100, "train.joint_lr_decay_every": 25},
    "generated": {},
    # the transformer reader (memnet.transformer): 2 layers, chosen on qa1/qa2/qa16's valid split
    "transformer": {"model.type": "transformer", "model.layers": 2},
    # one shared layer applied up to 3 times, halting per question (Universal Transformer, in spirit)
    "universal": {"model.type": "universal", "model.layers": 3, "model.stopping": True},
    # the Universal Transformer with dynamic halting, ACT per position (Dehghani et al. 2019,
    # arXiv:1807.03819). The paper gives no bAbI sizes beyond its 4 heads (Appendix F); the rest
    # is the hparams set the authors' bAbI code (github.com/MostafaDehghani/bAbI-T2T, README)
    # trains with, tensor2tensor's universal_transformer_tiny, as of the paper (May 2018):
    "ut_act": {"model.type": "universal", "model.act": True,
               "model.dim": 128,  # hidden_size 128 (transformer_tiny)
               "model.heads": 4,  # num_heads 4 (transformer_tiny; the paper's Appendix F: 4 heads)
               "model.ff_dim": 512,  # filter_size 512 (transformer_tiny)
               # num_rec_steps 8 (universal_transformer_tiny). Its ACT limit act_max_steps is
               # 2 x num_hidden_layers = 4, which the paper's mean ponder time on 3-fact tasks,
               # 3.8 ± 2.2 steps (section 3.1), rules out for its runs: 8, the fixed-step count
               "model.layers": 8,
               # ε and τ: act_epsilon and act_loss_weight, tensor2tensor's defaults
               "model.act_epsilon": 0.01, "model.ponder_cost": 0.01,
               "model.encoding": "mask"},  # the paper's section 3.1: a learned multiplicative mask per word position
}
# both_rq with the halting unit learning whether each hop's answer is right (docs/results.md,
# "Halting on right answers"): the one stopping rule that stops at the facts' count on qa1-qa3, qa16
VARIANTS["both_right"] = {**VARIANTS["both_rq"], "model.halt_training": "right", "model.early_answers": 0.05,
                          "model.halt_threshold": 0.9}
# both_right choosing its restart and epoch on valid accuracy less 0.05 per hop used (train.hop_cost,
# docs/results.md "A cost per hop when choosing the restart"): qa2's 2-hop chain kept on five seed sets
VARIANTS["both_hop"] = {**VARIANTS["both_right"], "train.hop_cost": 0.05}
# both_hop stopping only where the hop's answer is at least 0.95 sure (model.halt_confidence,
# docs/results.md "Stopping where the answer is sure"): 0.16 points behind config.yaml's test mean
# over nine seed sets (ahead on valid), qa2 then read on to a third hop on 7-28% of its questions
VARIANTS["both_sure"] = {**VARIANTS["both_hop"], "model.halt_confidence": 0.95}
# both_right and both_sure charging the last hop alone when choosing (train.last_hop_cost instead of
# train.hop_cost; docs/results.md "A cost for the last hop alone"): no restart kept for stopping too
# soon; over nine seed sets 9.26% and 9.00% mean test error (config.yaml then 8.93%)
VARIANTS["both_last"] = {**VARIANTS["both_right"], "train.last_hop_cost": 0.05}
VARIANTS["sure_last"] = {**VARIANTS["both_last"], "model.halt_confidence": 0.95}
# sure_last and question_rq with the question's table A^1 + B' (model.question_table offset;
# docs/results.md "What the gate reads on, and the question's table once more"): question_off is
# config.yaml since (lower on valid, cross-fitted and test over nine seed sets), sure_offset the
# README's both-ideas run
VARIANTS["sure_offset"] = {**VARIANTS["sure_last"], "model.question_table": "offset"}
VARIANTS["question_off"] = {**VARIANTS["question_rq"], "model.question_table": "offset"}
# config.yaml with stick-breaking attention (model.attention stick): each hop takes the latest memory that matches
VARIANTS["question_stick"] = {**VARIANTS["question_off"], "model.attention": "stick"}
# sure_offset with mixed attention (docs/results.md "Stick-breaking attention"), and the same with the
# answers of hops 2 .. K-1 trained at 0.15 where the rule does not answer from them, hop 1's at 0.05
# (model.early_answers_hop1; "Hop 2's answer pulled harder"): qa2 then stops after 2 hops
VARIANTS["sure_mixed"] = {**VARIANTS["sure_offset"], "model.attention": "mixed"}
VARIANTS["sure_later"] = {**VARIANTS["sure_mixed"], "model.early_answers": 0.15, "model.early_answers_hop1": 0.05}
# sure_later with hop 1's answer at 0.02: lower on valid over nine seed sets, the README's both-ideas run
VARIANTS["sure_pull"] = {**VARIANTS["sure_later"], "model.early_answers_hop1": 0.02}
# sure_pull with restarts 2, 3, 6, 7 starting mixed attention's gates at -2 (model.stick_alternate;
# docs/results.md "Half the restarts nearer the softmax")
VARIANTS["sure_alt"] = {**VARIANTS["sure_pull"], "model.stick_alternate": -2.0}
# sure_alt with each early answer steering its own hop alone (model.halt_training right_own): hop 2's
# answer teaches hop 2 to find it without pulling hop 1 off qa3's three-fact chain (docs/results.md
# "Each early answer steering its own hop": qa3 6.8% against 7.3%, higher on valid over the 20 tasks)
VARIANTS["sure_own"] = {**VARIANTS["sure_alt"], "model.halt_training": "right_own"}
# sure_alt with restarts 4-7 training the later hops' early answers at 0 (model.early_alternate): the
# restart best on valid chooses per task between hop 2 pulled toward answering (qa2's count) and not (qa3);
# qa3 5.2% against 7.3%, but higher on valid over the 20 tasks (docs/results.md "Half the restarts without the pull")
VARIANTS["sure_free"] = {**VARIANTS["sure_alt"], "model.early_alternate": 0.0}
# sure_alt with restarts 4-7 masked as `second` and trained with right_last (model.second_alternate), the
# others without the later hops' pull (model.second_alternate_pull 0): qa2 takes a switched restart,
# which stops at hop 2 without the pull, and qa3's middle hop is free in the others (docs/results.md
# "The pull left to the switched restarts"): config.yaml since, level with question_alt over 18 seed sets
# and lower on valid and test by 0.04 points ("The two ideas on in config.yaml")
VARIANTS["sure_second"] = {**VARIANTS["sure_alt"], "model.second_alternate": True, "model.second_alternate_pull": 0.0}
# question_off with mixed attention and the same alternation, both ideas off: config.yaml from then
# until sure_second (docs/results.md "Half the restarts nearer the softmax"); the best setting without the ideas
VARIANTS["question_alt"] = {**VARIANTS["question_off"], "model.attention": "mixed", "model.stick_alternate": -2.0}
# config.yaml with attention supervision (sup_rq), and with the answer module reading each hop's
# memories summed through gates that supervision teaches the supporting facts (sup_sum,
# model.answer_reads sum: counting, qa7, and lists, qa8; docs/results.md, "Counting and lists")
VARIANTS["sup_rq"] = {**VARIANTS["question_rq"], "train.attention_supervision": 1.0}
VARIANTS["sup_sum"] = {**VARIANTS["sup_rq"], "model.answer_reads": "sum"}
# config.yaml's joint run: joint_alt with config.yaml's answer module, lr and restart choice, and
# the pointer in time reading the hop's state (train.joint_relative_time 5, model.relative_query;
# config.yaml since: lower valid error on three seed sets), without the two ideas (its model has
# them off; train.joint_ideas false states it, as config.yaml, whose single-task runs have them on)
VARIANTS["joint_rq"] = {**VARIANTS["joint_alt"], **MODULE, "model.answer_reads": "current", "train.lr": 0.02,
                        "train.restart_choice": "mean", "train.joint_relative_time": 5, "model.relative_query": True,
                        "train.joint_ideas": False}
TITLES = {"paper": "MemN2N", "nonull": "no null", "mask": "+mask", "stop": "+stop", "both": "+both", "sup": "+sup",
          "zero": "+T0", "alt": "+T0 / paper", "alt_ens": "+T0 / paper, ensemble", "question": "u¹+o, d40", "question_mlp": "u¹+o, answer MLP", "question_cur": "u¹+o, answer MLP of o^k", "question_long": "u¹+o, answer MLP of o^k, lr 0.02, 150 epochs", "question_wide": "the same at d 50", "question_mean": "the same, the restart best on mean valid", "question_ens": "the same, ensemble of the 5 best on valid", "question_prod": "question_mean, the module reading u¹ ⊙ o^k too", "question_rel": "the same with a pointer in time", "question_rq": "the pointer reading the hop's state", "both_cur": "u¹+o, answer MLP of o^k, +stop +soft", "both_rq": "config.yaml +stop +soft", "both_right": "config.yaml +stop (halting on right answers) +soft", "both_hop": "the same, a cost per hop when choosing", "both_sure": "the same, stopping where the answer is sure", "both_last": "config.yaml +both, a cost for the last hop", "sure_last": "the same, stopping where the answer is sure", "sure_offset": "the same, the question's table A¹ + B'", "question_off": "the question's table A¹ + B' (config.yaml until the alternation)", "question_stick": "config.yaml, stick-breaking attention", "sure_mixed": "config.yaml +both, mixed attention", "sure_later": "config.yaml +both, mixed attention, later hops' answers at 0.15", "sure_pull": "the same, hop 1's at 0.02", "sure_alt": "the same, restarts 2, 3, 6, 7 from stick_init -2", "sure_own": "the same, each early answer steering its own hop alone", "sure_free": "sure_alt, restarts 4-7 without the later hops' pull", "sure_second": "config.yaml: the two ideas on, restarts 4-7 masked as second, the others without the later hops' pull", "question_alt": "without the two ideas (config.yaml until they came in): mixed attention, restarts 2, 3, 6, 7 from stick_init -2", "both_q": "u¹+o, +stop +soft", "sup_q": "u¹+o, +sup", "sup_mlp": "u¹+o, +sup, answer MLP", "ours": "ours", "joint": "joint", "joint_alt": "joint +T0 / paper", "joint_rq": "config.yaml joint", "generated": "generated",
          "sup_rq": "config.yaml +sup", "sup_sum": "config.yaml +sup, summed read-out",
          "transformer": "Transformer", "universal": "UT + halting", "ut_act": "UT + ACT"}
# Sukhbaatar et al. 2015, Table 1, test error (%) of PE LS RN with 1k training questions:
# trained per task, and jointly on all 20 (published means 13.9 and 12.4, 11 failed each)
PUBLISHED = {
    "PE LS RN 1k": [0.0, 8.3, 40.3, 2.8, 13.1, 7.6, 17.3, 10.0, 13.2, 15.1,
                    0.9, 0.2, 0.4, 1.7, 0.0, 1.3, 51.0, 11.1, 82.8, 0.0],
    "PE LS RN joint": [0.0, 11.4, 21.9, 13.4, 14.4, 2.8, 18.3, 9.3, 1.9, 6.5,
                       0.3, 0.1, 0.2, 6.9, 0.0, 2.7, 40.4, 9.4, 88.0, 0.0],
}
REFERENCES = [  # published mean test error on the 20 tasks with 1k questions each
    ("Universal Transformer with adaptive computation (best weakly supervised 1k)", 4.55, 3),
    ("MemNN, strongly supervised (supporting facts given)", 6.7, 4),
    ("Transformer", 21.8, 5),
]


def choice(accuracy: np.ndarray, by_mean: bool = False) -> tuple[int, int]:
    """(evaluation, restart) the trainer keeps, from accuracy (E, S), each restart's valid
    accuracy at each evaluation: each restart's best evaluation (the latest of equals), then the
    best restart (the first of equals) by its best evaluation, or with by_mean
    (train.restart_choice mean) by its mean over the evaluations."""
    E, S = accuracy.shape
    latest_best = E - 1 - accuracy[::-1].argmax(0)  # (S,)
    score = accuracy.sum(0) if by_mean else accuracy[latest_best, np.arange(S)]
    restart = int(score.argmax())
    return int(latest_best[restart]), restart


def crossfit_errors(correct: np.ndarray, tasks: np.ndarray, halvings: int = 1000, seed: int = 0,
                    by_mean: bool = False, charge: np.ndarray | None = None) -> dict[int, float]:
    """{task: cross-fitted valid error} of the trainer's choice: choose (evaluation, restart)
    on a random half of each task's valid questions, score the choice on the other half; the
    mean over `halvings` halvings. correct (E, S, N): each restart's right answers to the N
    valid questions at each evaluation; tasks (N,): each question's task; by_mean: see choice;
    charge (E, S, N): what the choice subtracts from each right answer for the hops the question
    took (memnet.train.charge), as the trainer does; the error scored is the answers' alone.

    The valid error of the chosen model flatters it: it is the best of many tries (restarts
    times evaluations) on the same 100 questions, and a setting whose tries vary more is
    flattered more. Scored on questions the choice did not see, the estimate has no such
    optimism on average (tests/test_bench.py: a choice among coin flips), though on one valid
    split it is noisy."""
    rng = np.random.default_rng(seed)
    scores = correct if charge is None else correct - charge
    groups = {int(t): np.flatnonzero(tasks == t) for t in np.unique(tasks)}
    wrong = {t: 0.0 for t in groups}
    for _ in range(halvings):
        seen = np.zeros(len(tasks), bool)
        for rows in groups.values():
            seen[rng.permutation(rows)[: len(rows) // 2]] = True
        e, s = choice(scores[:, :, seen].mean(2), by_mean)
        for t, rows in groups.items():
            unseen = rows[~seen[rows]]
            wrong[t] += 1 - correct[e, s, unseen].mean()
    return {t: w / halvings for t, w in wrong.items()}


class ValidAnswers:
    """What train() reports at each evaluation (its on_evaluation), kept for crossfit_errors."""

    def __init__(self, cfg: config.Config) -> None:
        self.cfg = cfg  # the run's: where it charges the hops, the trainer's choice did
        self.correct: list[np.ndarray] = []  # per evaluation, (S, N) each restart's right answers on valid
        self.hops: list[np.ndarray] = []  # per evaluation, (S, N) the hops each took (where they are charged)
        self.tasks = np.zeros(0, int)  # (N,) each valid question's task

    def __call__(self, epoch: int, answers: np.ndarray, valid, hops: np.ndarray | None = None) -> None:
        self.correct.append(answers == valid.answer.cpu().numpy())
        if hops is not None:
            self.hops.append(hops)
        self.tasks = valid.task.cpu().numpy()

    def crossfit(self, by_mean: bool = False) -> dict[int, float]:
        if not self.correct:
            return {}
        charged = charge(self.cfg, np.stack(self.hops)) if self.hops else None
        return crossfit_errors(np.stack(self.correct), self.tasks, by_mean=by_mean, charge=charged)


def cross_text(error: float | None) -> str:
    return "   –  " if error is None else f"{100 * error:5.1f}%"


def is_joint(variant: str) -> bool:
    """One model on all the tasks (the paper's joint setting), not one per task."""
    return variant.startswith("joint")


def default_data() -> Path:
    return official.official_dir(ROOT) / "en-valid"


def commit() -> str:
    """The code a record came from: HEAD, with "+dirty" when memnet/ has uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "memnet"], cwd=ROOT).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+dirty" if dirty else "")


def generated_folder(root: Path, task: int, official: Path) -> Path:
    """900 train + 100 valid generated questions of `task` (seed 0, like en-valid's 1k split),
    beside a link to the official test file: the model never sees an official training story."""
    folder = root / f"qa{task}"
    generator.write_dataset(folder, task, train=900, valid=100, test=0, seed=0)
    test = babi.find_task_file(official, task, "test")
    if test is None:
        raise SystemExit(f"{official}: no test file for task {task}")
    link = folder / test.name
    link.unlink(missing_ok=True)
    link.symlink_to(test.resolve())
    return folder


# each model type's recipe, the settings under a variant's own (a plug-in's bench adds its own:
# experiments/readers/bench.py); a type not named here takes the transformers'
RECIPES = {"memn2n": PAPER}


def recipe(variant: str) -> dict[str, Any]:
    """The settings under a variant's own: its model type's recipe."""
    return RECIPES.get(VARIANTS[variant].get("model.type", "memn2n"), TRANSFORMER)


def run(variant: str, tasks: list[int], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Train `variant` (one model per task, or one joint model) and return one record per task."""
    base = {**recipe(variant), **VARIANTS[variant], "train.restarts": args.restarts, **dict(args.set)}
    if args.epochs:
        base["train.joint_epochs" if is_joint(variant) else "train.epochs"] = args.epochs
    if is_joint(variant):
        jobs = [(tasks, {"data.dir": str(args.data), "data.task": ",".join(map(str, tasks))})]
    elif variant == "generated":
        root = Path(args.results).parent / "generated"
        jobs = [([t], {"data.dir": str(generated_folder(root, t, args.data)), "data.task": str(t)}) for t in tasks]
    else:
        jobs = [([t], {"data.dir": str(args.data), "data.task": str(t)}) for t in tasks]

    records = []
    for job_tasks, data in jobs:
        cfg = resolve(config.load(None, {**base, **data}), len(job_tasks))
        answers = ValidAnswers(cfg)
        result = train(cfg, progress=False, log=False, on_evaluation=answers)
        # the trainer's choice of one restart: an ensemble's average is another model
        crossfit = {} if cfg.train.ensemble else answers.crossfit(cfg.train.restart_choice == "mean")
        for t in job_tasks:
            test, valid = result["test"]["tasks"][str(t)], result["valid"]["tasks"][str(t)]
            record = {
                "variant": variant, "task": t, "error": test["error"], "valid_error": valid["error"],
                "crossfit_valid_error": crossfit.get(t),
                "hop_accuracy": test["hop_accuracy"], "mean_hops": test["mean_hops"],
                "chain_accuracy": test["chain_accuracy"], "hops_by_facts": test["hops_by_facts"], "questions": test["n"],
                "restarts": cfg.train.restarts, "epochs": cfg.train.epochs, "trained_on": cfg.data.task,
                "best_seed": result["best_seed"], "seconds": result["seconds"], "commit": args.commit,
                "time": time.strftime("%Y-%m-%d %H:%M:%S"), "config": cfg.to_dict(),
            }
            with open(args.results, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            print(f"{variant:9s} qa{t:<2d} test error {100 * test['error']:5.1f}% | valid error "
                  f"{100 * valid['error']:5.1f}% | cross-fitted {cross_text(crossfit.get(t))} | "
                  f"mean hops {test['mean_hops']:.2f} | restarts {cfg.train.restarts} | "
                  f"epochs {cfg.train.epochs} | {result['seconds']:.0f} s", flush=True)
            records.append(record)
    return records


# ---------------------------------------------------------------------------- the table


def settings(r: dict[str, Any]) -> str:
    text = f"r{r['restarts']} e{r['epochs']}"
    if is_joint(r["variant"]) and len(babi.parse_tasks(r["trained_on"])) != 20:
        text += f" on {r['trained_on']}"  # a joint model of fewer tasks is a different experiment
    return text


def percent(x: float) -> str:
    return f"{100 * x:.1f}"


def table(results: dict[tuple[str, int], dict[str, Any]]) -> str:
    """Markdown: test error per task and variant beside the published columns, mean and failed
    count; then hop accuracy and hops used; then the published means. A cell whose settings
    differ from its column's usual ones (the settings row) names its own."""
    variants = [v for v in VARIANTS if any(k[0] == v for k in results)]
    usual = {v: Counter(settings(r) for (w, _), r in results.items() if w == v).most_common(1)[0][0] for v in variants}
    gap = "paper" in variants and "generated" in variants

    def cell(v: str, t: int, text: str) -> str:
        r = results.get((v, t))
        if r is None:
            return "–"
        return text if settings(r) == usual[v] else f"{text} ({settings(r)})"

    head = ["task", *(TITLES[v] for v in variants), *(["gen − paper"] if gap else []), *PUBLISHED]
    lines = ["Test error (%) on bAbI 1k (en-valid: selection on valid, figures on test)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in range(1, 21):
        row = [f"{t}: {babi.TASK_NAMES[t]}"]
        row += [cell(v, t, percent(results[v, t]["error"]) if (v, t) in results else "") for v in variants]
        if gap:
            both = ("paper", t) in results and ("generated", t) in results
            row.append(f"{100 * (results['generated', t]['error'] - results['paper', t]['error']):+.1f}" if both else "–")
        row += [f"{col[t - 1]:.1f}" for col in PUBLISHED.values()]
        lines.append("| " + " | ".join(row) + " |")

    def summary(errors: list[float]) -> tuple[str, str]:
        if not errors:
            return "–", "–"
        of = "" if len(errors) == 20 else f" of {len(errors)}"
        return f"{100 * statistics.fmean(errors):.1f}{of}", f"{sum(map(is_failed, errors))}{of}"

    means, fails = ["**mean error**"], ["**failed (> 5%)**"]
    for v in variants:
        mean, failed = summary([r["error"] for (w, _), r in results.items() if w == v])
        means.append(mean)
        fails.append(failed)
    if gap:
        within = [abs(results["generated", t]["error"] - results["paper", t]["error"]) <= 0.02
                  for t in range(1, 21) if ("paper", t) in results and ("generated", t) in results]
        means.append("")
        fails.append(f"{sum(within)} of {len(within)} within 2 points")
    for col in PUBLISHED.values():
        mean, failed = summary([e / 100 for e in col])
        means.append(mean)
        fails.append(failed)
    lines.append("| " + " | ".join(means) + " |")
    lines.append("| " + " | ".join(fails) + " |")
    lines.append("| settings | " + " | ".join([*(usual[v] for v in variants), *([""] if gap else []),
                                                *("published" for _ in PUBLISHED)]) + " |")

    def code(v: str) -> str:  # the commits a column ran at, most records first
        commits = Counter(r.get("commit", "") or "?" for (w, _), r in results.items() if w == v)
        return ", ".join(f"{c} ({n})" if len(commits) > 1 else c for c, n in commits.most_common())
    lines.append("| commit (tasks) | " + " | ".join([*(code(v) for v in variants), *([""] if gap else []),
                                                      *("" for _ in PUBLISHED)]) + " |")

    lines += ["", "Hop accuracy (%) of hops 1/2/3 (the hop's most attended memory is the supporting fact of "
              "that step; – where the question has no such fact) · mean hops used", "",
              "| task | " + " | ".join(TITLES[v] for v in variants) + " |", "|" + "---|" * (len(variants) + 1)]
    for t in range(1, 21):
        row = [str(t)]
        for v in variants:
            r = results.get((v, t))
            hops = "/".join("–" if a is None else f"{100 * a:.0f}" for a in r["hop_accuracy"]) if r else ""
            row.append(cell(v, t, f"{hops} · {r['mean_hops']:.2f}" if r else ""))
        lines.append("| " + " | ".join(row) + " |")

    lines += ["", "settings: rN = best of N restarts on validation, eN = epochs. Published mean test error on "
              "the 20 tasks, 1k questions each:"]
    lines += [f"- {name}: {mean}% mean error, {failed} failed" for name, mean, failed in REFERENCES]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--data", type=official.data_dir_arg, default=default_data(),
                        help="official bAbI folder with train/valid/test files, or a set's name after `memnet data "
                             "download` (default: en-valid of the official data: memnet.official.official_dir)")
    parser.add_argument("--tasks", default="1-20", help="tasks: 1-20, 1,2,16 ... (default: 1-20)")
    parser.add_argument("--variants", default="paper", help=f"comma-separated, of {','.join(VARIANTS)} (default: paper)")
    parser.add_argument("--restarts", type=int, default=10, help="restarts per run, best on validation (default: 10, the paper's)")
    parser.add_argument("--epochs", type=int, default=0,
                        help="epochs per run (default: the config's, 100; joint: train.joint_epochs, 60)")
    parser.add_argument("--set", action="append", default=[], type=lambda s: tuple(s.split("=", 1)), metavar="KEY=VALUE",
                        help="a config override on top of every variant, e.g. --set train.lr=0.005 (repeatable; "
                             "for experiments: write them to their own --results file)")
    parser.add_argument("--results", default=str(ROOT / "runs" / "bench" / "results.jsonl"),
                        help="JSONL file the results are appended to and the table is read from")
    parser.add_argument("--table", action="store_true", help="print the markdown table from the results file and exit")
    args = parser.parse_args(argv)

    if args.table:
        print(table(read_results(args.results)))
        return
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    try:
        tasks = [int(t) for t in babi.parse_tasks(args.tasks)]
    except ValueError as e:
        parser.error(f"--tasks: {e}")
    Path(args.results).parent.mkdir(parents=True, exist_ok=True)
    args.commit = commit()  # the code this process imported
    for variant in variants:
        run(variant, tasks, args)


if __name__ == "__main__":
    main()
