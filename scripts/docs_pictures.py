"""The README's pictures, made again from today's code and a trained model:

    docs/attention.png  `memnet inspect --format png` of the README's seed story (section 3)
    docs/report.png     the top of `memnet report --limit 30`'s page, as headless Chromium draws it

    ./scripts/demo                                   # trains runs/demo on data/demo (qa16)
    .venv/bin/python scripts/docs_pictures.py        # runs/demo and data/demo into docs/ (from the repository)
    .venv/bin/python scripts/docs_pictures.py --checkpoint RUN --data DIR --out FOLDER

The report's screenshot needs Chromium or Chrome (--browser); without one, attention.png is
still made and the script says what is missing (exit 1).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from memnet.cli import main as memnet
from memnet.files import atomic_write, read_bytes

# the README's seed.txt (tests/test_scripts.py holds the two equal)
STORY = ("1 Brian is a frog.\n2 Lily is gray.\n3 Brian is yellow.\n4 Julius is green.\n5 Greg is a frog.\n"
         "6 What color is Greg?\tyellow\t5 1 3\n")
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
SIZE = (1100, 1400)  # the screenshot's width and height in pixels: the header, the metrics and the first tables


def screenshot(browser: str, page: Path, png: Path) -> None:
    """`page` drawn by headless `browser` into `png` (SIZE); RuntimeError with the browser's own
    words when it draws nothing."""
    sandbox = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []  # Chromium refuses root otherwise
    done = subprocess.run([browser, "--headless", *sandbox, "--disable-gpu", "--hide-scrollbars",
                           f"--screenshot={png}", f"--window-size={SIZE[0]},{SIZE[1]}", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    if not png.is_file():
        raise RuntimeError(f"{browser} drew no screenshot (exit {done.returncode}): {done.stderr.strip()[-300:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Make docs/attention.png and docs/report.png from a trained model.")
    # relative, as the README's commands are, so that the report's title reads as theirs
    parser.add_argument("--checkpoint", default="runs/demo", help="the model (default: runs/demo)")
    parser.add_argument("--data", default="data/demo",
                        help="its data folder, whose test split the report reads (default: data/demo)")
    parser.add_argument("--out", default="docs", help="folder to write the two pictures into (default: docs)")
    parser.add_argument("--limit", type=int, default=30, help="questions the report shows in full (default: 30, the README's)")
    parser.add_argument("--browser", help=f"Chromium or Chrome to draw the report with (default: the first of {', '.join(BROWSERS)})")
    args = parser.parse_args(argv)
    out = Path(args.out)
    with tempfile.TemporaryDirectory() as tmp:
        story, page, shot = Path(tmp) / "seed.txt", Path(tmp) / "report.html", Path(tmp) / "report.png"
        story.write_text(STORY, encoding="utf-8")
        if memnet(["inspect", "--checkpoint", args.checkpoint, "--story", str(story), "--format", "png",
                   "--out", str(out / "attention.png")]):
            return 2  # memnet has said why
        if memnet(["report", "--checkpoint", args.checkpoint, "--data", args.data, "--limit", str(args.limit),
                   "--out", str(page)]):
            return 2
        browser = args.browser or next((b for b in BROWSERS if shutil.which(b)), None)
        if browser is None:
            print(f"docs_pictures: no browser to draw report.png with (looked for {', '.join(BROWSERS)}); give one "
                  f"with --browser PATH. {out / 'attention.png'} was written", file=sys.stderr)
            return 1
        try:
            screenshot(browser, page, shot)
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"docs_pictures: {browser}: {e}", file=sys.stderr)
            return 1
        atomic_write(out / "report.png", read_bytes(shot))
    print(f"wrote {out / 'report.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
