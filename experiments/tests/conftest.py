"""The readers' tests run in memnet's suite (pyproject.toml's testpaths) with the plug-in loaded:
the repository root on the path, experiments.readers imported (it registers its model types), and
the package's fixtures for a reader's batch."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import experiments.readers  # noqa: E402,F401  (registers model.type pairs, words, items and mixture)
from tests.conftest import babi_fixtures, qa1, widened  # noqa: E402,F401

# what a subprocess needs to load the plug-in as this process has it
PLUGIN_ENV = {"MEMNET_PLUGINS": "experiments.readers", "PYTHONPATH": str(ROOT)}


def through_the_cli(tmp_path, capsys, task: int, flags: list[str], steps: int):
    """A reader trained one epoch on 60 generated stories of `task` by `memnet train --config none
    FLAGS`, then evaluated and inspected by the CLI, each command exiting 0, eval's and inspect's
    JSON showing `steps` steps: (its model, its config, inspect's text table)."""
    import json

    from memnet import checkpoint, generator
    from memnet.cli import main

    data, run = tmp_path / "data", tmp_path / "run"
    generator.write_dataset(data, task, train=60, test=20, seed=0)
    assert main(["train", "--data", str(data), "--task", str(task), "--out", str(run), "--quiet", "--config", "none",
                 "--train.epochs=1", *flags]) == 0
    capsys.readouterr()
    model, cfg, _, _ = checkpoint.load(run / "model.pt")
    assert main(["eval", "--checkpoint", str(run / "model.pt"), "--data", str(data), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["n"] == 20 and len(metrics["hop_accuracy"]) == steps
    assert main(["inspect", "--checkpoint", str(run / "model.pt"), "--data", str(data), "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert table["hops_used"] == steps and len(table["attention"]) == steps
    assert main(["inspect", "--checkpoint", str(run / "model.pt"), "--data", str(data)]) == 0
    return model, cfg, capsys.readouterr().out
