from pathlib import Path

import pytest

from memnet import babi

ROOT = Path(__file__).resolve().parents[1]
BABI = babi.official_dir(ROOT)


@pytest.fixture(scope="session")
def babi_dir() -> Path:
    """The official bAbI v1.2 data (en/ and en-valid/); MEMNET_BABI_DIR points elsewhere."""
    if not (BABI / "en").is_dir():
        pytest.fail(f"official bAbI data not found at {BABI}; set MEMNET_BABI_DIR")
    return BABI


@pytest.fixture(scope="session")
def inspect_run(tmp_path_factory) -> dict[str, Path]:
    """A tiny qa16 model (a few seconds of training, far from solving the task) with the halting
    unit and hard masking on, so every part of an attention table shows up: {data, checkpoint}."""
    from memnet import config, generator
    from memnet.run import RunFolder
    from memnet.train import train

    root = tmp_path_factory.mktemp("inspect_run")
    generator.write_dataset(root / "data", 16, train=200, test=60, seed=0)
    cfg = config.load(None, {"data.dir": str(root / "data"), "data.task": "16", "model.stopping": True,
                             "model.masking": "hard", "train.epochs": 4, "train.eval_every": 2, "train.linear_start_epochs": 0,
                             "train.threads": 1})
    train(cfg, RunFolder(root / "run"), progress=False)
    return {"data": root / "data", "checkpoint": root / "run" / "model.pt"}


@pytest.fixture(scope="session")
def tiny(babi_dir, tmp_path_factory):
    """qa1 in the en-valid layout: 100 stories of train (500 questions), 20 of valid and test."""
    folder = tmp_path_factory.mktemp("qa1")
    for split, n in [("train", 100), ("valid", 20), ("test", 20)]:
        stories = babi.read_file(babi_dir / "en-valid" / f"qa1_{split}.txt")[:n]
        babi.write_file(folder / f"qa1_{split}.txt", stories)
    return folder
