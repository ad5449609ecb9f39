import shutil
from pathlib import Path

import pytest

from memnet import official

ROOT = Path(__file__).resolve().parents[1]
BABI = official.official_dir(ROOT)
# Small files in the official layouts, made by memnet's generator (tests/fixtures/babi/README.md):
# en/ (qa1, qa16: train and test) and en-valid/ (qa1: train, valid and test).
FIXTURES = ROOT / "tests" / "fixtures" / "babi"


@pytest.fixture(scope="session")
def babi_dir() -> Path:
    """The official bAbI v1.2 data (en/ and en-valid/), for the tests that hold something up
    against the official files themselves; they skip when it is absent."""
    if not (BABI / "en").is_dir() or not (BABI / "en-valid").is_dir():
        pytest.skip(f"needs the official bAbI v1.2 data, not found at {BABI}: run `memnet data download` "
                    "or set MEMNET_BABI_DIR to a folder holding en/ and en-valid/")
    return BABI


@pytest.fixture(scope="session")
def babi_fixtures() -> Path:
    """Small bAbI files in the official layouts (en/ and en-valid/), for tests that need some data."""
    return FIXTURES


@pytest.fixture(scope="session")
def inspect_run(tmp_path_factory) -> dict[str, Path]:
    """A tiny qa16 model (a few seconds of training, far from solving the task) with the halting
    unit and hard masking on, so every part of an attention table shows up: {data, checkpoint}."""
    from memnet import config, generator
    from memnet.run import RunFolder
    from memnet.trainer import train

    root = tmp_path_factory.mktemp("inspect_run")
    generator.write_dataset(root / "data", 16, train=200, test=60, seed=0)
    cfg = config.load(None, {"data.dir": str(root / "data"), "data.task": "16", "model.stopping": True,
                             "model.masking": "hard", "train.epochs": 4, "train.eval_every": 2, "train.linear_start_epochs": 0,
                             "train.threads": 1})
    train(cfg, RunFolder(root / "run"), progress=False)
    return {"data": root / "data", "checkpoint": root / "run" / "model.pt"}


@pytest.fixture(scope="session")
def qa1_run(tmp_path_factory) -> dict[str, Path]:
    """A tiny qa1 model (a few seconds of training, far from solving the task), for what `ask`
    must decline whatever the model learned: {data, checkpoint}."""
    from memnet import config, generator
    from memnet.run import RunFolder
    from memnet.trainer import train

    root = tmp_path_factory.mktemp("qa1_run")
    generator.write_dataset(root / "data", 1, train=200, test=20, seed=0)
    cfg = config.load(None, {"data.dir": str(root / "data"), "data.task": "1", "train.epochs": 2,
                             "train.eval_every": 2, "train.linear_start_epochs": 0, "train.restarts": 1,
                             "train.threads": 1})
    train(cfg, RunFolder(root / "run"), progress=False)
    return {"data": root / "data", "checkpoint": root / "run" / "model.pt"}


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """qa1 in the en-valid layout, generated: 100 stories of train (500 questions), 20 of valid and test."""
    folder = tmp_path_factory.mktemp("qa1")
    for split in ("train", "valid", "test"):
        shutil.copyfile(FIXTURES / "en-valid" / f"qa1_{split}.txt", folder / f"qa1_{split}.txt")
    return folder


@pytest.fixture(scope="module")
def qa1():
    """A vocabulary and the encoded Batch of 40 generated qa1 stories (seed 3), for the readers' tests."""
    from memnet import babi, generator
    from memnet.data import Vocab, encode_samples
    samples = list(babi.samples(generator.generate(1, 40, seed=3)))
    vocab = Vocab.build(samples)
    return vocab, encode_samples(samples, vocab, memory_size=50)


@pytest.fixture(scope="session")
def widened():
    """A function: the Batch with 3 more empty memory slots and 2 more word columns, every slot
    its own age (what a reader must answer exactly as before)."""
    import dataclasses

    import torch

    def widen(batch):
        return dataclasses.replace(batch, story=torch.nn.functional.pad(batch.story, (0, 2, 0, 3)),
                                   time=torch.arange(batch.story.shape[1] + 3).expand(len(batch), -1))
    return widen
