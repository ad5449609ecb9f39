"""The readers' tests run in memnet's suite (pyproject.toml's testpaths) with the plug-in loaded:
the repository root on the path, experiments.readers imported (it registers its model types), and
the package's fixtures for a reader's batch."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import experiments.readers  # noqa: E402,F401  (registers model.type pairs, words, items and mixture)
from tests.conftest import babi_fixtures, qa1, widened  # noqa: E402,F401

# what a subprocess needs to load the plug-in as this process has it
PLUGIN_ENV = {"MEMNET_PLUGINS": "experiments.readers", "PYTHONPATH": str(ROOT)}
