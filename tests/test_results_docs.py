"""The figures in docs/results.md and README.md are the records' own: every table in
docs/results.md is `memnet bench --table RECORDS --markdown` of its committed records, printed
again here, and the README's headline figures are those tables' mean rows."""
import re
from pathlib import Path

import pytest

from memnet import bench
from memnet.cli import main

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results.md"
# a table in the docs: the command that prints it, in a comment above it, then its output
BLOCK = re.compile(r"<!-- (memnet bench --table (\S+) --markdown) -->\n(.*?)\n<!-- end -->", re.S)


def blocks() -> list[tuple[str, str, str]]:
    return BLOCK.findall(RESULTS.read_text(encoding="utf-8"))


def test_the_results_page_holds_tables_from_records():
    found = blocks()
    assert len(found) >= 2, "docs/results.md should hold the default's and the paper's columns"
    for command, records, _ in found:
        assert (ROOT / records).is_file(), f"{command}: {records} is not committed"


@pytest.mark.parametrize("command, records, shown", blocks(), ids=[b[1] for b in blocks()])
def test_each_table_is_what_its_command_prints_from_the_records(command, records, shown, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(command.split()[1:]) == 0
    assert capsys.readouterr().out.strip() == shown.strip()


def headline(records: str) -> str:
    """The mean row of a records file's table as the README quotes it: 'X.XX% mean test error
    (A.AA-B.BB% over N sets), F failed'."""
    mean = bench.table(bench.read_records(ROOT / records))[-1]
    assert mean.task == "mean"
    tests, failed = list(mean.test.values()), list(mean.failed.values())
    low, high = min(failed), max(failed)
    return (f"{100 * sum(tests) / len(tests):.2f}% mean test error ({100 * min(tests):.2f}-{100 * max(tests):.2f}% "
            f"over {len(tests)} sets), {low if low == high else f'{low}-{high}'} failed")


@pytest.mark.parametrize("records", ["results/default/records.jsonl", "results/paper/records.jsonl",
                                     "results/joint/records.jsonl"])
def test_the_readme_quotes_the_mean_rows(records):
    assert headline(records) in (ROOT / "README.md").read_text(encoding="utf-8")
