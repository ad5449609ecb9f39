"""The experiments' presets (experiments/configs/*.yaml) load as `memnet bench --config` loads
them, and pairs10-narrow.yaml is pairs10.yaml with the two changes its header names."""
from pathlib import Path

import pytest

from memnet.config import load

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_each_preset_loads_with_the_plugin(path):
    cfg = load(path)  # unknown keys, wrong types and out-of-range values raise ConfigError
    assert cfg.model.type in ("memn2n", "pairs", "words", "items")


def test_pairs10_narrow_is_pairs10_started_narrow_and_trained_a_third_as_long():
    wide, narrow = (load(CONFIGS / name).to_dict() for name in ("pairs10.yaml", "pairs10-narrow.yaml"))
    changed = {(section, key): (wide[section][key], narrow[section][key])
               for section in wide if isinstance(wide[section], dict)
               for key in wide[section] if wide[section][key] != narrow[section][key]}
    assert changed == {("model", "init_std"): (1.0, 0.1), ("train", "epochs"): (300, 100)}
