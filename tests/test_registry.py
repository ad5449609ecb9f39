"""The model registry, memnet's one extension point (docs/plugins.md): the package's own model
types alone without a plug-in, in the flags too; a plug-in loaded by MEMNET_PLUGINS; its config
checked as the package's; a checkpoint of a plug-in's type loaded without it names the way out;
and the worked example of docs/plugins.md trains, evaluates and is refused a bad value."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memnet import checkpoint, config, registry
from memnet.cli import main
from memnet.config import ConfigError
from memnet.errors import MemnetError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_TYPES = ["memn2n", "transformer", "universal"]


@pytest.fixture
def bag(tmp_path, monkeypatch):
    """docs/plugins.md's example plug-in, loaded through MEMNET_PLUGINS, and gone again after the test."""
    code = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8"), re.S)[1]
    (tmp_path / "bag_plugin.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(registry.ENV, "bag_plugin")
    monkeypatch.setattr(registry, "_TYPES", dict(registry._TYPES))
    monkeypatch.setattr(registry, "_loaded", set())
    yield
    sys.modules.pop("bag_plugin", None)


def test_the_package_registers_its_own_models_and_never_imports_experiments():
    code = ("import sys, memnet.cli, memnet.checkpoint, memnet.trainer; from memnet import registry; "
            "print(list(registry.types())); print(any(m.startswith('experiments') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PATH": "", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [str(PACKAGE_TYPES), "False"]


def test_help_shows_the_package_models_only(capsys, monkeypatch):
    monkeypatch.delenv(registry.ENV, raising=False)
    monkeypatch.setattr(registry, "_TYPES", {k: t for k, t in registry._TYPES.items() if not t.plugin})
    assert main(["train", "--help"]) == 0
    text = capsys.readouterr().out
    assert "the model: memn2n, transformer, universal (each" in " ".join(text.split())
    assert not re.search(r"\bwords\b|\bpairs\b|mixture|place_facts|list_order", text)
    assert main(["--help"]) == 0 and " mix " not in capsys.readouterr().out


def test_an_unknown_model_type_names_the_way_to_load_a_plugin():
    with pytest.raises(ConfigError, match=r"model.type: expected one of memn2n, transformer, universal(, \w+)*; "
                                          r"found 'lstm' \(a plug-in's model type loads with MEMNET_PLUGINS=MODULE"):
        config.load(None, {"model.type": "lstm"})


def test_a_plugin_that_does_not_import_is_one_line(capsys, monkeypatch):
    monkeypatch.setenv(registry.ENV, "no_such_plugin")
    monkeypatch.setattr(registry, "_loaded", set())
    assert main(["train", "--help"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memnet: error: MEMNET_PLUGINS: cannot import no_such_plugin") and "Traceback" not in err


def test_the_example_plugin_is_checked_trains_and_its_checkpoint_names_it(bag, tiny, tmp_path, capsys, monkeypatch):
    assert main(["train", "--help"]) == 0
    assert re.search(r"the model: memn2n, transformer, universal(, \w+)*, bag \(", " ".join(capsys.readouterr().out.split()))
    with pytest.raises(ConfigError, match="model.dim: expected >= 1, found 0"):  # the package's RANGES by name
        config.load(None, {"model.type": "bag", "model.dim": 0})
    with pytest.raises(ConfigError, match=r"unknown config key 'model.hops' \(known: model.type, model.dim, "
                                          r"model.init_std\)|model.hops: a setting of model.type memn2n, not of bag"):
        config.load(None, {"model.type": "bag", "model.hops": 2})
    run = tmp_path / "run"
    assert main(["train", "--data", str(tiny), "--task", "1", "--out", str(run), "--quiet", "--config", "none",
                 "--model.type=bag", "--train.epochs=2", "--train.eval_every=1"]) == 0
    assert "training on the reference model" in capsys.readouterr().out
    assert checkpoint.read(run / "model.pt")["plugin"] == "bag_plugin"
    assert main(["eval", "--checkpoint", str(run), "--json"]) == 0
    capsys.readouterr()
    del registry._TYPES["bag"]  # the plug-in not loaded
    monkeypatch.delenv(registry.ENV)
    with pytest.raises(MemnetError, match=r"model.type bag is a plug-in's: set MEMNET_PLUGINS=bag_plugin, the plug-in "
                                          r"that registers it"):
        checkpoint.load(run / "model.pt")
