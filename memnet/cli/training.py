"""`memnet train` and `memnet eval`."""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import re
import sys
from pathlib import Path

from memnet import babi, config, official
from memnet.config import ConfigError
from memnet.errors import MemnetError

ROOT_CONFIG = Path(__file__).resolve().parents[2] / "config.yaml"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train", help="train a model; writes RUN/model.pt, RUN/config.yaml and RUN/metrics.jsonl",
        description="Train on a bAbI folder. Any config field can be overridden with a dotted flag, "
                    "e.g. --model.hops=4 --model.masking=hard --train.restarts=10.")
    p.add_argument("--data",
                   help="folder of bAbI files (en/, en-valid/ or generated), or an official set's name "
                        "(en-valid, en-10k, ...) after `memnet data download`; sets data.dir")
    p.add_argument("--task", help="task spec: 16, 1-20 (joint training), 1,2,16 or chain; sets data.task")
    p.add_argument("--out", required=True, help="run folder to write")
    p.add_argument("--config", help=f"YAML config (default: ./config.yaml if present, else {ROOT_CONFIG.name} "
                                    "at the repository root, else built-in defaults)")
    p.add_argument("--resume", action="store_true", help="continue the stopped run in --out from its last.pt")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_flags(p)
    p.set_defaults(func=run_train)

    p = subparsers.add_parser("eval", help="evaluate a checkpoint: accuracy, hop accuracy, hops used",
                              description="Evaluate a checkpoint on a bAbI folder, overall and per task.")
    p.add_argument("--checkpoint", required=True, help="model file written by memnet train (RUN/model.pt)")
    p.add_argument("--data", required=True,
                   help="folder of bAbI files, or an official set's name (en-valid, ...) after `memnet data download`")
    p.add_argument("--task", help="task spec (default: the tasks the model was trained on)")
    p.add_argument("--split", default="test", choices=babi.SPLITS, help="split to evaluate (default: test)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(func=run_eval)


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One --section.key flag per config field, its help the field's comment in memnet/config.py."""
    comments = dict(re.findall(r"^    (\w+): [^=]+= [^#\n]+#\s*(.+)$", inspect.getsource(config), re.M))
    group = parser.add_argument_group("config overrides (applied after --config)")
    for section in dataclasses.fields(config.Config):
        for f in dataclasses.fields(section.type if isinstance(section.type, type) else getattr(config, section.type)):
            default = getattr(getattr(config.Config(), section.name), f.name)
            group.add_argument(f"--{section.name}.{f.name}", dest=f"override:{section.name}.{f.name}",
                               default=argparse.SUPPRESS, metavar=type(default).__name__.upper(),
                               help=f"{comments.get(f.name, f.name.replace('_', ' '))} (default {default})")


def default_config() -> Path | None:
    for path in (Path("config.yaml"), ROOT_CONFIG):
        if path.is_file():
            return path
    return None


def run_train(args: argparse.Namespace) -> int:
    from memnet.train import train  # torch loads only for commands that need it

    overrides = {k.removeprefix("override:"): v for k, v in vars(args).items() if k.startswith("override:")}
    if args.data is not None:
        overrides["data.dir"] = args.data = official.resolve_data_dir(args.data)
    if args.task is not None:
        overrides["data.task"] = args.task
    cfg = config.load(args.config or default_config(), overrides)
    if args.data is not None and not Path(args.data).is_dir():
        raise MemnetError(f"{args.data}: no such data folder")
    result = train(cfg, args.out, resume=args.resume, progress=not args.quiet)
    for split in ("valid", "test"):
        if split in result:
            m = result[split]
            print(f"{split}: accuracy {100 * m['accuracy']:.1f}%  hop accuracy "
                  f"{_percents(m['hop_accuracy'])}  chain {100 * m['chain_accuracy']:.1f}%  mean hops {m['mean_hops']:.2f}")
    print(f"wrote {Path(args.out) / 'model.pt'}")
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from memnet import checkpoint
    from memnet.train import encode_tasks, evaluate, read_splits

    args.data = official.resolve_data_dir(args.data)
    model, cfg, vocab, _ = checkpoint.load(args.checkpoint)
    try:
        tasks = babi.parse_tasks(args.task or cfg.data.task)
    except ValueError as e:
        raise ConfigError(f"--{e}") from None
    samples = read_splits(args.data, tasks, cfg.data.valid_fraction)[args.split]
    if not any(samples.values()):
        raise MemnetError(f"{args.data}: no {args.split} questions for task {args.task or cfg.data.task}")
    unknown = vocab.unknown(s for ss in samples.values() for s in ss)
    if unknown:
        print(f"memnet eval: {len(unknown)} word(s) not in the model's vocabulary read as <unk>: "
              f"{' '.join(unknown[:20])}", file=sys.stderr)
    m = evaluate(model, encode_tasks(samples, vocab, cfg.data.memory_size))
    if args.json:
        print(json.dumps(m))
        return 0
    print(f"{'task':>5} {'n':>5} {'acc':>6} {'error':>6} {'hop acc':>20} {'chain':>6} {'recall':>6} {'hops':>5} {'facts':>5}")
    for name, t in [*m["tasks"].items(), ("all", m)]:
        recall = "-" if t["support_recall"] is None else f"{100 * t['support_recall']:.1f}"
        print(f"{name:>5} {t['n']:5d} {100 * t['accuracy']:6.1f} {100 * t['error']:6.1f} {_percents(t['hop_accuracy']):>20} "
              f"{100 * t['chain_accuracy']:6.1f} {recall:>6} {t['mean_hops']:5.2f} {t['mean_facts']:5.2f}")
    print()
    print(hops_table(m))
    return 0


def hops_table(m: dict) -> str:
    """Hops used against the number of supporting facts, per task: questions, mean hops and how
    many questions took 1..K hops."""
    K = len(m["hop_accuracy"])
    lines = ["hops used by number of supporting facts",
             f"{'task':>5} {'facts':>5} {'n':>5} {'mean':>5} " + " ".join(f"{f'{k} hop' + 's' * (k > 1):>7}" for k in range(1, K + 1))]
    for name, t in m["tasks"].items():
        for facts, counts in t["hops_by_facts"].items():
            n = sum(counts.values())
            mean = sum(int(h) * c for h, c in counts.items()) / n
            lines.append(f"{name:>5} {facts:>5} {n:5d} {mean:5.2f} " + " ".join(f"{counts.get(str(k), 0):7d}" for k in range(1, K + 1)))
    return "\n".join(lines)


def _percents(values: list[float | None]) -> str:
    return " ".join("-" if v is None else f"{100 * v:.1f}" for v in values)
