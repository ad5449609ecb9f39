"""scripts/probe_answers.py: the answer by places, and the probe end to end on generated data."""
import importlib.util
import json
from pathlib import Path

import pytest
import torch

from memnet import generator

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("probe_answers", ROOT / "scripts" / "probe_answers.py")
probe_answers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe_answers)


def test_phrase_parts_places_each_word_and_pads_short_phrases():
    parts, words = probe_answers.phrase_parts(["e,n", "n", "n,e"])
    assert words == ["e", "n", probe_answers.NONE]
    assert parts.tolist() == [[0, 1], [1, 2], [1, 0]]


@pytest.mark.parametrize("answer", ["positions", "whole"])
def test_scores_by_place_add_up_and_whole_ones_do_not(answer):
    classes = ["n,e", "n,w", "s,e", "s,w"]
    parts = probe_answers.phrase_parts(classes)[0] if answer == "positions" else None
    torch.manual_seed(0)
    model = probe_answers.Probe(vocab_size=10, slots=3, dim=4, hidden=8, products=True, n_classes=4, parts=parts).eval()
    with torch.no_grad():
        model.mlp[-1].bias.normal_()  # scores that differ between places and words
        scores = model(torch.randint(1, 10, (5, 3, probe_answers.MAX_WORDS)))  # (5, 4)
    # n,e - n,w is the second place's e - w score, whatever the first word: true by places only
    gap = (scores[:, 0] - scores[:, 1]) - (scores[:, 2] - scores[:, 3])
    assert torch.allclose(gap, torch.zeros(5), atol=1e-5) == (answer == "positions")


def test_probe_learns_where_from_the_fact_given(tmp_path, capsys):
    # qa1's answer is a word of its one supporting fact: given the fact, the probe must find it
    generator.write_dataset(tmp_path, 1, train=300, valid=50, test=100, seed=0)
    results = tmp_path / "probe.jsonl"
    probe_answers.main(["--data", str(tmp_path), "--tasks", "1", "--epochs", "30", "--results", str(results)])
    line = capsys.readouterr().out
    assert line.startswith("qa1  answer whole | train") and "1 facts" in line
    record = json.loads(results.read_text())
    assert record["task"] == 1 and record["facts"] == 1 and record["epoch"] in range(10, 31, 10)
    assert record["test"] >= 95.0, record


def test_a_missing_split_file_is_an_error_that_names_it(tmp_path):
    generator.write_dataset(tmp_path, 1, train=20, valid=0, test=10, seed=0)
    with pytest.raises(SystemExit) as e:
        probe_answers.main(["--data", str(tmp_path), "--tasks", "1", "--epochs", "1"])
    assert "a valid file for task 1" in str(e.value) and str(tmp_path) in str(e.value)
