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
    ("--model.masking=sometimes", "model.masking: expected one of off, hard, soft, second; found 'sometimes'"),
])
def test_bad_overrides_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        config.load(None, [override])


def test_bad_yaml_names_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model: [1, 2\n")
    with pytest.raises(ConfigError) as error:
        config.load(path)
    assert str(error.value) == (f"{path}:2:1: not valid YAML: expected ',' or ']', but got '<stream end>' "
                                "(while parsing a flow sequence)")
    path.write_text("model:\n  dim: 3\n   hops: 2\n")
    with pytest.raises(ConfigError) as error:
        config.load(path)
    assert str(error.value) == f"{path}:3:8: not valid YAML: mapping values are not allowed here"
    path.write_text("model:\n  hops: 2.5\n")
    with pytest.raises(ConfigError, match="model.hops: expected int"):
        config.load(path)


@pytest.mark.parametrize("override,message", [
    ("model.hops=0", "model.hops: expected between 1 and 20, found 0"),
    ("model.dim=-3", "model.dim: expected >= 1, found -3"),
    ("train.batch_size=0", "train.batch_size: expected >= 1, found 0"),
    ("train.restarts=0", "train.restarts: expected between 1 and 1000, found 0"),
    ("data.memory_size=0", "data.memory_size: expected >= 1, found 0"),
    ("train.lr=nan", "train.lr: expected a finite number > 0, found nan"),
    ("train.lr=inf", "train.lr: expected a finite number > 0, found inf"),
    ("train.lr=-0.1", "train.lr: expected a finite number > 0, found -0.1"),
    ("model.init_std=0", "model.init_std: expected a finite number > 0, found 0.0"),
    ("train.eval_every=0", "train.eval_every: expected >= 1, found 0"),
    ("train.lr_decay_every=-1", "train.lr_decay_every: expected >= 1, found -1"),
    ("train.threads=0", "train.threads: expected between 1 and 256, found 0"),
    ("train.device=gpu", "train.device: expected cpu, cuda, cuda:N or mps, found 'gpu'"),
    ("train.random_noise=1.5", "train.random_noise: expected between 0 (inclusive) and 1, found 1.5"),
    ("train.epochs=0", "train.epochs: expected >= 1, found 0"),
    ("train.ensemble_members=-1", "train.ensemble_members: expected >= 0, found -1"),
    ("train.ensemble_members=2", "train.ensemble_members: 2 members need train.ensemble true (found false: the "
                                 "run's model would be the best restart alone)"),
    ("model.type=lstm", "model.type: expected one of memn2n, transformer, universal, pairs, words; found 'lstm'"),
])
def test_every_ranged_field_is_checked_with_the_allowed_values(override, message):
    with pytest.raises(ConfigError) as error:
        config.load(None, [override])
    assert str(error.value) == message


def test_an_ensemble_cannot_have_more_members_than_restarts():
    with pytest.raises(ConfigError, match=r"train.ensemble_members: expected at most train.restarts \(3\), found 4"):
        config.load(None, ["train.ensemble=true", "train.restarts=3", "train.ensemble_members=4"])
    assert config.load(None, ["train.ensemble=true", "train.restarts=3", "train.ensemble_members=3"]).train.ensemble_members == 3


def test_an_ensemble_stops_together_only_where_its_members_have_a_stopping_rule():
    with pytest.raises(ConfigError) as error:
        config.load(None, ["train.ensemble_halting=together", "model.stopping=true"])
    assert str(error.value) == ("train.ensemble_halting: together stops an ensemble where most of its members' stopping "
                                "rules say stop; it needs train.ensemble true and a memory network with model.stopping "
                                "true, found train.ensemble false, model.type memn2n, model.stopping true")
    with pytest.raises(ConfigError, match="found train.ensemble true, model.type memn2n, model.stopping false"):
        config.load(None, ["train.ensemble_halting=together", "train.ensemble=true"])
    with pytest.raises(ConfigError, match="found train.ensemble true, model.type universal$"):
        config.load(None, ["train.ensemble_halting=together", "train.ensemble=true", "model.type=universal",
                           "model.stopping=true"])
    with pytest.raises(ConfigError, match="train.ensemble_halting: expected one of members, together; found 'vote'"):
        config.load(None, ["train.ensemble_halting=vote"])
    cfg = config.load(None, ["train.ensemble_halting=together", "train.ensemble=true", "model.stopping=true"])
    assert cfg.train.ensemble_halting == "together"


def test_a_model_section_holds_its_types_settings_only(tmp_path):
    with pytest.raises(ConfigError, match="model.layers: a setting of model.type transformer and universal, not of memn2n"):
        config.load(None, {"model.layers": 3})
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  type: transformer\n  hops: 3\n")
    with pytest.raises(ConfigError, match=r"c.yaml: model.hops: a setting of model.type memn2n, not of transformer"):
        config.load(path)
    cfg = config.load(None, {"model.type": "transformer", "model.heads": 4})
    assert isinstance(cfg.model, config.TransformerConfig) and config.from_dict(cfg.to_dict()) == cfg


def test_a_config_file_that_is_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"model:\n  hops: \xff\n")
    with pytest.raises(ConfigError, match="c.yaml: expected a UTF-8 text file, found byte 0xff"):
        config.load(path)


def test_a_restart_grid_entry_applies_to_every_restart_it_cycles_to():
    cfg = config.load(None, {"train.restarts": 5, "model.masking": "soft", "model.stopping": True,
                             "train.restart_grid": "[{}, {model.masking: second, model.init_std: 0.3}]"})
    restarts = [config.restart_config(cfg, s) for s in range(5)]
    assert [r.model.masking for r in restarts] == ["soft", "second", "soft", "second", "soft"]
    assert [r.model.init_std for r in restarts] == [0.1, 0.3, 0.1, 0.3, 0.1]
    assert all(r.train.restart_grid == [] for r in restarts)  # a restart's own config has no grid
    assert config.grid_label(cfg, 3) == "model.masking=second, model.init_std=0.3" and config.grid_label(cfg, 2) == ""
    assert cfg.model.masking == "soft" and len(cfg.train.restart_grid) == 2  # cfg itself unchanged
    assert config.from_dict(cfg.to_dict()) == cfg  # stored with the run, read back the same
    plain = config.load(None, {"model.dim": 30})
    assert config.restart_config(plain, 7) is plain  # no grid: every restart as configured


@pytest.mark.parametrize("grid,message", [
    ("[{model.hopz: 3}]", r"train.restart_grid\[0\]: unknown config key 'model.hopz'"),
    ("[{}, {model.masking: sometimes}]", r"train.restart_grid\[1\]: model.masking: expected one of"),
    ("[{train.lr: 0.1}]", r"train.restart_grid\[0\]: 'train.lr': a restart may set model fields"),
    ("[{model.type: transformer}]", r"train.restart_grid\[0\]: 'model.type'"),
    ("[3]", r"train.restart_grid\[0\]: expected a mapping of model fields"),
    ("{model.dim: 3}", r"train.restart_grid: expected a list"),
])
def test_a_bad_restart_grid_names_the_entry_and_the_key(grid, message):
    with pytest.raises(ConfigError, match=message):
        config.load(None, {"train.restart_grid": grid})


def test_the_presets_load_by_name_and_an_unknown_one_is_named_with_the_nearest():
    names = config.presets()
    assert {"default", "paper", "demo", "joint"} <= set(names)
    for name in names:
        config.load(config.find_preset(name))
    assert config.find_preset("default") == config.ROOT / "config.yaml"
    paper = config.load(config.find_preset("paper"))
    assert (paper.model.dim, paper.model.stopping, paper.model.masking, paper.train.restarts) == (20, False, "off", 10)
    with pytest.raises(ConfigError, match=r"--config papr: no such preset or file; did you mean paper\?"):
        config.find_preset("papr")
    with pytest.raises(ConfigError, match="nowhere.yaml: no such config file"):
        config.find_preset("nowhere.yaml")
