"""`memnet train` and `memnet eval`."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from memnet import babi, config, official
from memnet.cli.common import CHECKPOINT_HELP, checkpoint_file, data_folder
from memnet.config import ConfigError
from memnet.errors import MemnetError

def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train", help="train a model; writes RUN/model.pt, RUN/config.yaml and RUN/metrics.jsonl",
        description="Train on a bAbI folder. Any config field can be overridden with a dotted flag, "
                    "e.g. --model.hops=4 --model.masking=hard --train.restarts=10.")
    p.add_argument("--data",
                   help="folder of bAbI files (en/, en-valid/ or generated), or an official set's name "
                        "(en-valid, en-10k, ...) after `memnet data download`; sets data.dir")
    p.add_argument("--task", help="task spec: 16, 1-20 (joint training), 1,2,16 or chain; sets data.task")
    p.add_argument("--out", required=True, help="run folder to write (refused if it holds another run, "
                                                "unless --resume or --force)")
    p.add_argument("--config", metavar="NAME|FILE",
                   help="a preset's name (default, paper, demo, joint: configs/NAME.yaml) or a YAML file; 'none': "
                        "the built-in defaults (default: default, the repository's config.yaml)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--resume", action="store_true", help="continue the stopped run in --out from its last.pt")
    what.add_argument("--force", action="store_true", help="replace the run in --out (its files are removed together)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_flags(p, default_config())
    p.set_defaults(func=run_train)

    p = subparsers.add_parser("eval", help="evaluate a checkpoint: accuracy, hop accuracy, hops used, each hop's answer",
                              description="Evaluate a checkpoint on a bAbI folder, overall and per task.")
    p.add_argument("--checkpoint", required=True, type=checkpoint_file, help=CHECKPOINT_HELP)
    p.add_argument("--data",
                   help="folder of bAbI files, or an official set's name (en-valid, ...) after `memnet data download` "
                        "(default: the folder the model was trained on)")
    p.add_argument("--task", help="task spec (default: the tasks the model was trained on)")
    p.add_argument("--split", default="test", choices=babi.SPLITS, help="split to evaluate (default: test)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--model.halt_confidence", dest="halt_confidence", metavar="P",
                   help="the stopping rule's gate for this evaluation: stop at a hop only where its answer's "
                        "probability is at least P, else read on (default: the checkpoint's; 0: no gate)")
    p.set_defaults(func=run_eval)


def add_config_flags(parser: argparse.ArgumentParser, path: Path | None) -> None:
    """One --section.key flag per config field, its help the field's comment in memnet/config.py
    and its default what the config file `path` sets (else the built-in default)."""
    try:
        start = config.load(path)
    except ConfigError:  # a broken file is reported when a run loads it; the help still shows
        path, start = None, config.Config()
    origin = f"in {path.name}" if path is not None else "built in"
    models = list(dict.fromkeys(config.model_types().values()))  # the package's, then the plug-ins' (memnet.registry)
    sections = [("data", config.DataConfig), *(("model", cls) for cls in models), ("train", config.TrainConfig)]
    owners = {f.name: [cls.__name__.removesuffix("Config").lower() for cls in models if f.name in {g.name for g in dataclasses.fields(cls)}]
              for cls in models for f in dataclasses.fields(cls)}  # which model types have each model field
    group = parser.add_argument_group(f"config overrides (applied after --config; defaults as {origin})")
    seen = set()
    for section, cls in sections:
        comments = config.field_help(cls)
        comments["type"] = f"the model: {', '.join(config.model_types())} (each has its own settings)"
        for f in dataclasses.fields(cls):
            key = f"{section}.{f.name}"
            if key in seen:
                continue
            seen.add(key)
            current = getattr(getattr(start, section), f.name, None)
            default = current if current is not None else getattr(cls(), f.name)
            only = "" if section != "model" or len(owners[f.name]) == len(models) else f" [{' and '.join(owners[f.name])} only]"
            choices = f"; one of {', '.join(config.CHOICES[key])}" if key in config.CHOICES else ""
            shown = f"{len(default)} entries" if isinstance(default, list) else repr(default)
            text = f"{comments.get(f.name, f.name.replace('_', ' '))}{only} (default {shown}{choices})"
            group.add_argument(f"--{key}", dest=f"override:{key}", default=argparse.SUPPRESS,
                               metavar=type(default).__name__.upper(), help=text.replace("%", "%%"))  # argparse formats %


def default_config() -> Path | None:
    return config.presets().get("default")


def config_path(given: str | None) -> Path | None:
    """--config: a preset's name or a file, 'none' for the built-in defaults, or (not given) the default preset."""
    if given is None:
        return default_config()
    return None if given == "none" else config.find_preset(given)


def run_train(args: argparse.Namespace) -> int:
    from memnet import distributed
    from memnet.evaluation import percents
    from memnet.run import RunFolder
    from memnet.trainer import train  # torch loads only for commands that need it

    overrides = {k.removeprefix("override:"): v for k, v in vars(args).items() if k.startswith("override:")}
    if args.data is not None:  # absolute: the checkpoint's data folder must resolve from any working directory
        overrides["data.dir"] = args.data = str(Path(official.resolve_data_dir(args.data)).resolve())
    if args.task is not None:
        overrides["data.task"] = args.task
    source = config_path(args.config)
    try:
        cfg = config.load(source, overrides)
    except ConfigError as e:
        hint = " (the model section of the config file is for another model.type: --config none starts from the " \
               "built-in defaults)" if "model.type" in overrides and "a setting of model.type" in str(e) else ""
        raise ConfigError(f"{e}{hint}") from None
    if args.data is not None and not Path(args.data).is_dir():
        raise MemnetError(f"{args.data}: no such data folder")
    here = distributed.world()
    run = None  # under torchrun process 0 writes the run; the others read it only to resume
    if here.main or args.resume:
        run = RunFolder(args.out, resume=args.resume, force=args.force, config_source=None if args.resume else source)
    if args.resume:
        refuse_changes(run, overrides, (args.config, source) if args.config is not None else None)
    result = train(cfg, run, progress=not args.quiet)
    if not here.main:
        return 0
    for split in ("valid", "test"):
        if split in result:
            m = result[split]
            print(f"{split}: accuracy {100 * m['accuracy']:.1f}%  hop accuracy "
                  f"{percents(m['hop_accuracy'])}  chain {100 * m['chain_accuracy']:.1f}%  mean hops {m['mean_hops']:.2f}")
    if result["saved"] is not None:
        print(f"wrote {result['saved']}")
    else:
        print("nothing was saved: training was interrupted before any epoch could be chosen "
              "(linear start chooses none)", file=sys.stderr)
    return 130 if result["interrupted"] else 0


FLAGS = {"data.dir": "--data", "data.task": "--task"}  # the config keys that flags of their own set


def refuse_changes(run, overrides: dict[str, Any], preset: tuple[str, Path | None] | None = None) -> None:
    """Under --resume the run continues with the config it saved: a flag, or a key of the
    --config file `preset` (its name as given, its path), that asks for another value is refused,
    naming the flag and the saved value, rather than silently ignored (the saved value is fine)."""
    saved = config.from_dict(run.read_last()["config"])
    from_file = _keys(_config_file(preset[1])) if preset is not None and preset[1] is not None else {}
    asked = [(f"--config {preset[0]}", key, value) for key, value in from_file.items() if key not in overrides]
    asked += [(FLAGS.get(key, f"--{key}"), key, value) for key, value in overrides.items()]
    for flag, key, value in asked:
        try:
            wanted = _value(config.apply_overrides(saved, {key: value}), key)
        except ConfigError as e:  # a key of another model type: never the saved value
            wanted = e
        have = _value(saved, key)
        if wanted != have:
            what = f"{flag} sets {key} {value!r}" if flag.startswith("--config") else f"{flag} {value}"
            raise MemnetError(f"{what}: the run in {run.path} was saved with {key} {have!r}, and a resumed run keeps "
                              f"its config; drop {flag.split()[0]} (or --force starts the run again with it)")


def _config_file(path: Path) -> dict[str, Any]:
    """The mapping a config file sets (config.load has read and checked it already)."""
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def _keys(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'model': {'dim': 20}} -> {'model.dim': 20}."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            out.update(_keys(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _value(cfg: config.Config, key: str) -> Any:
    section, name = key.split(".", 1)
    return getattr(getattr(cfg, section), name, None)


def run_eval(args: argparse.Namespace) -> int:
    from memnet import checkpoint
    from memnet.data import encode_tasks, read_splits
    from memnet.evaluation import evaluate, hop_answers_table, hops_table, task_table
    from memnet.models.memn2n import MemN2N

    args.data = official.resolve_data_dir(args.data) if args.data else None
    model, cfg, vocab, _ = checkpoint.load(args.checkpoint)
    if args.halt_confidence is not None:  # checked as a run's config would be
        cfg = config.apply_overrides(cfg, {"model.halt_confidence": args.halt_confidence})
        for part in model.modules():  # the model, or each member of an ensemble
            if isinstance(part, MemN2N):
                part.halting.confidence = cfg.model.halt_confidence
    bad = checkpoint.nonfinite(model)
    if bad:
        print(f"memnet eval: warning: {args.checkpoint} holds weights that are not finite ({', '.join(bad)}): "
              f"its answers mean nothing", file=sys.stderr)
    try:
        tasks = babi.parse_tasks(args.task or cfg.data.task)
    except ValueError as e:
        raise ConfigError(f"--{e}") from None
    folder = data_folder(args.data, cfg.data.dir, args.checkpoint)
    samples = read_splits(folder, tasks, cfg.data.valid_fraction)[args.split]
    if not any(samples.values()):  # only a test split can be missing: train and valid are read strictly
        name = babi.task_filename(tasks[0], args.split)
        raise MemnetError(f"{folder}: expected a {args.split} file for task {tasks[0]} ({name}), found no such file")
    unknown = vocab.unknown(s for ss in samples.values() for s in ss)
    if unknown:
        print(f"memnet eval: {len(unknown)} word(s) not in the model's vocabulary read as <unk>: "
              f"{' '.join(unknown[:20])}", file=sys.stderr)
    m = evaluate(model, encode_tasks(samples, vocab, cfg.data.memory_size))
    if args.json:
        print(json.dumps(m))
        return 0
    print(task_table(m))
    print()
    print(hops_table(m))
    print()
    print(hop_answers_table(m))
    return 0

