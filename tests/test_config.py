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


def test_joint_runs_take_the_joint_settings():
    cfg = config.load(None, {"data.task": "1-20", "train.joint_dim": 40, "train.joint_epochs": 7,
                             "model.answer_from": "question", "train.joint_answer_from": "readout",
                             "model.relative_time": 5, "train.joint_relative_time": 2,
                             "model.question_table": "offset", "train.joint_question_table": "own",
                             "model.attention": "mixed", "train.joint_attention": "stick"})
    joint, single = config.resolve(cfg, 20), config.resolve(cfg, 1)
    assert (joint.model.dim, joint.train.epochs, joint.train.lr_decay_every, joint.model.answer_from) == (40, 7, 15, "readout")
    assert joint.model.relative_time == 2 and single.model.relative_time == 5
    assert joint.model.attention == "stick" and single.model.attention == "mixed"
    assert joint.model.question_table == "own" and single.model.question_table == "offset"
    assert (single.model.dim, single.train.epochs, single.model.answer_from) == (20, 100, "question")
    assert (cfg.model.dim, cfg.model.answer_from) == (20, "question")  # cfg itself unchanged


def test_joint_ideas_false_turns_the_two_ideas_off_in_a_joint_run_alone():
    ideas = {"model.stopping": True, "model.masking": "soft", "model.halt_training": "right", "model.halt_init": -4.0,
             "model.halt_confidence": 0.95, "model.second_alternate": True, "model.second_alternate_pull": 0.0,
             "model.mask_init": -1.0, "model.early_answers": 0.15, "train.last_hop_cost": 0.05}
    cfg = config.load(None, {"data.task": "1-20", **ideas, "train.joint_ideas": False})
    joint, single, defaults = config.resolve(cfg, 20), config.resolve(cfg, 1), config.Config()
    for key in config.IDEAS:
        section, name = key.split(".")
        assert getattr(getattr(joint, section), name) == getattr(getattr(defaults, section), name), key
    assert not joint.model.stopping and joint.model.masking == "off"
    assert single.model.stopping and single.model.second_alternate and single.train.last_hop_cost == 0.05
    assert cfg.model.stopping  # cfg itself unchanged
    kept = config.resolve(config.load(None, {"data.task": "1-20", **ideas}), 20)  # the default: as the model sets them
    assert kept.model.stopping and kept.model.masking == "soft" and kept.model.second_alternate
    assert kept.model.halt_init == -4.0 and kept.train.last_hop_cost == 0.05


def test_a_resumed_joint_run_keeps_what_it_resolved_to_before_a_joint_setting_existed():
    """A joint run's stored config (resolved) from before train.joint_attention existed: resolving
    it again must keep the attention it ran with, not take today's joint default."""
    cfg = config.resolve(config.load(None, {"data.task": "1-20", "train.joint_attention": "mixed"}), 20)
    values = cfg.to_dict()
    assert values["model"]["attention"] == "mixed"
    del values["train"]["joint_attention"], values["train"]["joint_dim"]
    assert config.resolve(config.from_dict(values), 20).model.attention == "softmax"  # what the fix is for
    again = config.resolve(config.stored(values, 20), 20)
    assert again.to_dict() == cfg.to_dict()
    assert "joint_attention" not in values["train"]  # the stored dict itself unchanged
    single = config.resolve(config.load(None, {"model.attention": "mixed", "model.dim": 30}), 1).to_dict()
    del single["train"]["joint_attention"]
    assert config.stored(single, 1).train.joint_attention == "softmax"  # one task: nothing to keep


def test_joint_answer_from_is_checked_and_left_to_the_transformers():
    with pytest.raises(ConfigError, match="train.joint_answer_from"):
        config.load(None, {"train.joint_answer_from": "sum"})
    cfg = config.resolve(config.load(None, {"model.type": "transformer", "train.joint_answer_from": "question"}), 20)
    assert not hasattr(cfg.model, "answer_from")
