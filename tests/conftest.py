import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BABI = Path(os.environ.get("MEMNET_BABI_DIR", ROOT.parent / "shared" / "babi"))


@pytest.fixture(scope="session")
def babi_dir() -> Path:
    """The official bAbI v1.2 data (en/ and en-valid/); MEMNET_BABI_DIR points elsewhere."""
    if not (BABI / "en").is_dir():
        pytest.fail(f"official bAbI data not found at {BABI}; set MEMNET_BABI_DIR")
    return BABI
