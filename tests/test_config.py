import pytest

from memnet import config
from memnet.config import ConfigError


def test_defaults_yaml_and_overrides_round_trip(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  hops: 4\ntrain:\n  lr: 0.005\n")
    cfg = config.load(path, ["--model.dim=30", "train.linear_start_epochs=0", "--model.temporal=false"])
    assert (cfg.model.hops, cfg.model.dim, cfg.train.lr, cfg.model.temporal) == (4, 30, 0.005, False)
    assert cfg.train.linear_start_epochs == 0
    again = tmp_path / "again.yaml"
    again.write_text(cfg.to_yaml())
    assert config.load(again) == cfg


@pytest.mark.parametrize("override,message", [
    ("--model.hopz=3", "unknown config key 'model.hopz'"),
    ("--model.hops=three", "model.hops: expected int, found 'three'"),
    ("--train.lr=fast", "train.lr: expected float"),
    ("--model.temporal=maybe", "model.temporal: expected bool"),
    ("model.hops", "expected --section.key=value"),
    ("--nothing.at_all=1", "unknown config key 'nothing'"),
    ("--model.masking=sometimes", "model.masking: expected one of off, hard, soft; found 'sometimes'"),
])
def test_bad_overrides_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        config.load(None, [override])


def test_bad_yaml_names_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        config.load(path)
    path.write_text("model:\n  hops: 2.5\n")
    with pytest.raises(ConfigError, match="model.hops: expected int"):
        config.load(path)
