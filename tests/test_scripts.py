"""The scripts: scripts/saturation.py's untrained part, scripts/bench_speed.py's report on one
epoch, scripts/docs_pictures.py on a tiny model."""
import importlib.util
import shutil
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]


def script(name: str):
    """scripts/NAME.py imported as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


saturation, bench_speed, docs_pictures = map(script, ["saturation", "bench_speed", "docs_pictures"])


def test_saturation_without_scaling_grows_with_width(babi_fixtures, capsys):
    saturation.main(["--data", str(babi_fixtures / "en-valid"), "--task", "1", "--widths", "4,128"])
    rows = [line.strip("| ").split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    peak = {label: float(max_weight) for label, max_weight, *_ in rows}
    assert list(peak) == ["4, 1/sqrt(d_k)", "4, none", "128, 1/sqrt(d_k)", "128, none"]
    assert peak["128, none"] > 0.8 > peak["128, 1/sqrt(d_k)"]  # unscaled: one sentence takes nearly everything
    assert peak["128, none"] > peak["4, none"]


def test_bench_speed_reports_each_run_and_the_spread(babi_fixtures, capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["bench_speed.py", "--data", str(babi_fixtures / "en-valid"), "--tasks", "1",
                                     "--seeds", "1,2", "--epochs", "1", "--repeat", "2", "--threads", "2"])
    bench_speed.main()
    lines = capsys.readouterr().out.splitlines()
    assert " cores, torch " in lines[0] and lines[0].endswith("backend auto, threads 2")
    runs = [line for line in lines if "training questions/s" in line]
    assert [line.split(":")[0] for line in runs] == ["qa1   seeds  1"] * 2 + ["qa1   seeds  2"] * 2
    assert all("(best of" in line and "test accuracy" in line for line in runs)
    assert [line.split(":")[0] for line in lines if "median" in line] == ["qa1   seeds  1", "qa1   seeds  2"]
    assert lines[-1].startswith("total, 2 runs, seeds  2:")
    # the restarts' cost: the quickest 2-seed run over the quickest 1-seed run
    walls = {seeds: min(float(line.split(":")[1].split()[0]) for line in runs if line.startswith(f"qa1   seeds  {seeds}"))
             for seeds in (1, 2)}
    ratio = next(line for line in lines if " seeds cost " in line)
    assert ratio.startswith("qa1   2 seeds cost ") and ratio.endswith("x 1 seed")
    # the printed walls are rounded to 0.01 s and the ratio to 0.1: it lies within what they allow
    low, high = (walls[2] - 0.005) / (walls[1] + 0.005), (walls[2] + 0.005) / max(walls[1] - 0.005, 1e-9)
    assert low - 0.05 <= float(ratio.split()[4].rstrip("x")) <= high + 0.05


def checkout(root: Path, files: dict[str, str]) -> Path:
    """A stand-in for a MemN2N-pytorch checkout: `files` under root/memn2n."""
    source = root / "memn2n"
    source.mkdir(parents=True)
    for name, text in files.items():
        (source / name).write_text(text)
    return root


def test_the_reference_copy_gets_exactly_its_two_fixes_and_six(tmp_path):
    repo = checkout(tmp_path / "repo", {"data_utils.py": "words = [x.strip() for x in parts if x.strip()]\n",
                                        "trainer.py": "total = loss.data[0]\n", "model.py": "unchanged = True\n"})
    script("reference_memn2n").prepare(repo, tmp_path / "out")
    assert (tmp_path / "out" / "data_utils.py").read_text() == 'words = [x.strip() for x in parts if x and x.strip()]\n'
    assert (tmp_path / "out" / "trainer.py").read_text() == "total = loss.item()\n"
    assert (tmp_path / "out" / "model.py").read_text() == "unchanged = True\n"
    assert "reduce" in (tmp_path / "out" / "six" / "moves.py").read_text()


def test_the_reference_copy_refuses_another_version(tmp_path):
    repo = checkout(tmp_path / "repo", {"data_utils.py": "words = parts\n", "trainer.py": "total = loss.item()\n"})
    with pytest.raises(SystemExit, match="not commit a28dd92"):
        script("reference_memn2n").prepare(repo, tmp_path / "out")


def test_docs_pictures_draws_the_readmes_seed_story():
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("    $ cat seed.txt\n") + len("    $ cat seed.txt\n"):readme.index("    $ memnet inspect --checkpoint runs/demo --story seed.txt")]
    assert docs_pictures.STORY == "".join(line.removeprefix("    ") + "\n" for line in block.splitlines())
    assert "![attention heatmap](docs/attention.png)" in readme and "![report](docs/report.png)" in readme


def test_docs_pictures_makes_both_pictures_on_a_tiny_model(inspect_run, tmp_path, capsys):
    browser = next((b for b in docs_pictures.BROWSERS if shutil.which(b)), None)
    code = docs_pictures.main(["--checkpoint", str(inspect_run["checkpoint"]), "--data", str(inspect_run["data"]),
                               "--out", str(tmp_path / "docs"), "--limit", "2"])
    assert (tmp_path / "docs" / "attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if browser is None:
        assert code == 1 and "no browser to draw report.png with" in capsys.readouterr().err
        pytest.skip("no Chromium or Chrome here: report.png not drawn")
    png = (tmp_path / "docs" / "report.png").read_bytes()
    assert code == 0 and png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == docs_pictures.SIZE  # IHDR
    assert sorted(p.name for p in (tmp_path / "docs").iterdir()) == ["attention.png", "report.png"]


def test_docs_pictures_without_a_browser(inspect_run, tmp_path, capsys):
    code = docs_pictures.main(["--checkpoint", str(inspect_run["checkpoint"]), "--data", str(inspect_run["data"]),
                               "--out", str(tmp_path), "--browser", str(tmp_path / "no-such-browser")])
    assert code == 1 and "no-such-browser" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attention.png"]
