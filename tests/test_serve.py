"""memnet serve: the page answers as `memnet ask` does, escapes what it is told, and refuses
what it cannot read with one line (conftest: inspect_run, a tiny qa16 model, hard masking)."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlencode

import pytest

from memnet import api, ask, inspect, serve
from memnet.cli import build_parser, main
from memnet.inspect import Table

ROOT = Path(__file__).resolve().parents[1]
STORY = ("1 Brian is a frog.\n2 Brian is yellow.\n3 Greg is a frog.\n<script>alert(1)</script> is a frog.\n"
         "Julius\x1b[2J is a frog.\n")  # HTML and a terminal escape, shown as text


@pytest.fixture(scope="module")
def served(inspect_run):
    """(the server's URL, the model it serves), the server running in a thread."""
    model = api.load(inspect_run["checkpoint"])
    server = serve.Server(model, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.url, model
    server.shutdown()
    server.server_close()


def request(url: str, body: bytes | dict | None = None, content_type: str = "application/json",
            headers: dict | None = None) -> tuple[int, str]:
    """(status, body text) of a GET, or of a POST of `body` (a dict is sent as JSON)."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    req = urllib.request.Request(url, data, {**({"Content-Type": content_type} if data is not None else {}),
                                             **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Heat(HTMLParser):
    """The rows of the page's heat map, each a list of (tag, class, text) cells; and the tags seen."""

    def __init__(self, html: str):
        super().__init__()
        self.rows, self.tags, self.cell, self.inside = [], [], None, False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "table":
            self.inside = a.get("class") == "heat"
        elif tag == "tr" and self.inside:
            self.rows.append([])
        elif tag in ("td", "th") and self.inside:
            self.cell = [tag, a.get("class") or "", ""]

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(tuple(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[2] += data


def check_heat_map(html: str, table: Table) -> None:
    """The heat map shows the table: a row per memory (its sentence as typed, escaped), each
    weight to 2 decimals, the chosen memory of each hop marked, the masked ones struck."""
    table = inspect.shown(table)  # control characters made visible, as every renderer shows them
    rows = Heat(html).rows
    assert rows, f"no heat map in {html[:300]!r}"
    assert [c[2] for c in rows[0]] == ["id", "sentence", *(f"hop {k + 1}" for k in range(table.hops_used))]
    for r, (line_id, sentence) in enumerate(table.memories):
        cells = rows[1 + r]
        assert cells[0][2] == str(line_id) and cells[1][2] == sentence
        assert [c[2] for c in cells[2:]] == [f"{table.attention[k][r]:.2f}" for k in range(table.hops_used)]
        for k, (_, cls, _) in enumerate(cells[2:]):
            kind = "chosen" if r == table.chosen[k] else "masked" if r in table.masked[k] else ""
            assert cls == f"w {kind}".strip()


def test_answers_as_ask_does(served):
    url, model = served
    status, text = request(url + "answer", {"story": STORY, "question": "What colour is Greg?"})
    reply = json.loads(text)
    expected = model.answer(STORY, "What colour is Greg?")
    assert status == 200 and reply["question"] == "What color is Greg?"
    assert [reply[k] for k in ("answer", "probability", "hops", "declined", "reason", "notes")] == \
           [expected.answer, expected.probability, expected.hops, expected.declined, expected.reason, expected.notes]
    assert "reading 'colour' as 'color'" in reply["notes"] and "the model never saw 'script'; ignored" in reply["notes"]
    # memnet ask's own functions on the same input: the same table (ask names the flag, the API the argument)
    table = ask.answer(model.module, model.vocab, model.config, ask.typed_sample(STORY, "What colour is Greg?"))
    assert reply["table"] == {**inspect.to_dict(table), "cannot_answer": reply["table"]["cannot_answer"]}
    assert (reply["table"]["cannot_answer"] or "") == table.declined.replace("--min-probability", "min_probability")
    check_heat_map(reply["html"], table)
    assert "note: reading &#x27;colour&#x27; as &#x27;color&#x27;" in reply["html"]
    if table.declined:  # the tiny model is unsure: the page says so before its guess, as ask does
        assert f"cannot answer: {reply['reason']}; its best guess:" in reply["html"].replace("&#x27;", "'")
    assert f"answer: <b>{table.prediction}</b> (p={table.probability:.2f})" in reply["html"]


@pytest.mark.parametrize("question, reason", [
    ("What color is Lily?", "the story never mentions Lily"),
    ("Where is Greg?", "the model was never asked a question like 'Where is Greg?' ('where' never occurred in "
                       "training); it knows: what color is X?"),
    ("What color is <b>Greg</b>?", "the model was never asked a question like 'What color is <b>Greg</b>?' ('b' never "
                                   "occurred in training); it knows: what color is X?"),
])
def test_declines_as_ask_does(served, question, reason):
    url, model = served
    status, text = request(url + "answer", {"story": STORY, "question": question})
    reply = json.loads(text)
    assert status == 200 and reply["declined"] and reply["answer"] is None and reply["table"] is None
    assert reply["reason"] == reason == model.answer(STORY, question).reason
    with pytest.raises(ask.CannotAnswer, match=f"^cannot answer: {re.escape(reason)}$"):
        ask.answer(model.module, model.vocab, model.config, ask.typed_sample(STORY, question))
    assert "<b>Greg</b>" not in reply["html"] and Heat(reply["html"]).rows == []


def test_story_text_is_escaped(served):
    url, _ = served
    reply = json.loads(request(url + "answer", {"story": STORY, "question": "What color is Greg?"})[1])
    assert "<script>" not in reply["html"] and "&lt;script&gt;alert(1)&lt;/script&gt; is a frog." in reply["html"]
    assert "\x1b" not in reply["html"] and "Julius\\x1b[2J is a frog." in reply["html"]
    assert [t for t, _ in Heat(reply["html"]).tags if t not in ("p", "br", "b", "table", "tr", "th", "td")] == []
    status, page = request(url)
    tags = Heat(page).tags
    assert status == 200 and [t for t, _ in tags].count("script") == 1
    assert not [a for _, attrs in tags for a in attrs if a in ("src", "href")]  # it loads nothing


@pytest.mark.parametrize("body, content_type, message", [
    (b"not json", "application/json", 'expected a JSON object {"story": ..., "question": ...} (Expecting value'),
    (b"\xff\xfe", "application/json", "expected UTF-8 text, found byte 0xff at byte 0"),
    (b'{"story": "Brian is a frog."}', "application/json", "question: expected a string, found nothing"),
    (b'{"story": 1, "question": "What color is Greg?"}', "application/json", "story: expected a string, found int"),
    (b"[1, 2]", "application/json", "found a list"),
    (b"[" * 50_000, "application/json", "nested too deeply to read"),
    (b'{"story": "a", "question": "\\ud800?"}', "application/json", "question: expected text, found the lone surrogate U+D800"),
    (b" " * (serve.MAX_BODY + 1), "application/json", f"expected a body of at most {serve.MAX_BODY} bytes, found 65537"),
    (b'{"story": "a", "question": "b?"}', "text/plain", "expected Content-Type application/json, found 'text/plain'"),
    (b'{"story": "Where is Greg?", "question": "What color is Greg?"}', "application/json",
     "story line 1: 'Where is Greg?' is a question; the story holds sentences only, the question goes apart"),
])
def test_a_bad_request_gets_one_line(served, body, content_type, message):
    url, _ = served
    status, text = request(url + "answer", body, content_type)
    assert status == 400 and text.count("\n") == 1 and text.endswith("\n") and message in text, text
    assert request(url)[0] == 200  # and the server goes on


def test_wrong_path_and_host(served):
    url, _ = served
    assert request(url + "nothing") == (404, "no '/nothing' here: the page is /, and answers come from POST /answer\n")
    assert request(url, headers={"Host": "rebound.example:80"}) == (
        403, "expected the Host 127.0.0.1 or localhost, found 'rebound.example'\n")


def test_a_hop_that_could_read_nothing_shows_as_masked():
    # hard masking, two memories, three hops: hop 3 finds both chosen before, reads nothing
    t = Table(question="What color is Greg?", answer=None, memories=[(1, "Greg is a frog."), (2, "Brian is green.")],
              attention=[[0.8, 0.2], [0.0, 1.0], [0.0, 0.0]], chosen=[0, 1, None], masked=[[], [0], [0, 1]], support=[],
              prediction="green", probability=0.9, hops_used=3, max_hops=3, stop_reason="max hops",
              hop_answers=[("white", 0.5), ("green", 0.8), ("green", 0.9)])
    rows = Heat(serve.heat_map(t)).rows
    assert rows[0][4] == ("th", "masked", "hop 3all masked")
    assert [row[2:] for row in rows[1:]] == [
        [("td", "w chosen", "0.80"), ("td", "w masked", "0.00"), ("td", "w masked", "0.00")],
        [("td", "w", "0.20"), ("td", "w chosen", "1.00"), ("td", "w masked", "0.00")]]


@pytest.mark.parametrize("checkpoint, message", [("missing", "found no such file or folder"),
                                                  ("corrupt.pt", "not a readable memnet checkpoint")])
def test_a_bad_checkpoint_is_refused_as_ask_refuses_it(capsys, tmp_path, checkpoint, message):
    (tmp_path / "corrupt.pt").write_bytes(b"not a checkpoint")
    for name in ("ask", "serve"):
        assert main([name, "--checkpoint", str(tmp_path / checkpoint)]) == 2
    out, err = capsys.readouterr()
    ask_err, serve_err, rest = err.split("\n")
    assert ask_err.startswith("memnet ask: error: ") and message in ask_err and (out, rest) == ("", "")
    assert serve_err == ask_err.replace("memnet ask", "memnet serve")


def test_command_line_errors(capsys, inspect_run):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--checkpoint", str(inspect_run["checkpoint"]), "--port", str(port)]) == 2
    assert capsys.readouterr().err == (f"memnet serve: error: cannot listen on 127.0.0.1:{port} (Address already in use): "
                                       "choose another --port, or --port 0 for a free one\n")
    assert main(["serve", "--checkpoint", str(inspect_run["checkpoint"]), "--port", "65536"]) == 2
    assert "argument --port: expected a whole number from 0 to 65535, found 65536" in capsys.readouterr().err
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    assert all(action.help for action in subparsers.choices["serve"]._actions)


def test_it_prints_the_url_and_stops_on_ctrl_c(inspect_run):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # SIGINT's default action: a shell's background job (a CI runner's, say) runs with SIGINT ignored,
    # which the server would inherit, and Python then never turns the test's Ctrl-C into KeyboardInterrupt
    proc = subprocess.Popen([sys.executable, "-m", "memnet", "serve", "--checkpoint", str(inspect_run["checkpoint"]),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = proc.stdout.readline()
        url = line.split()[1] if line.startswith("open http://127.0.0.1:") else None
        assert line == f"open {url} (served to this machine only; Ctrl-C stops)\n", line + proc.stderr.read()
        assert request(url)[0] == 200
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (0, "", "")


def chromium() -> str | None:
    return next(filter(None, (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome"))), None)


def test_a_browser_shows_the_answer_and_the_heat_map(served, tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip("needs a headless Chromium to run the page's script: `apt install chromium`")
    url, model = served
    query = urlencode({"story": STORY, "question": "What colour is Greg?"})
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path}", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
         "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",  # nothing but this machine resolves
         "--virtual-time-budget=5000", "--dump-dom", f"{url}?{query}"],
        capture_output=True, text=True, timeout=120).stdout
    expected = model.answer(STORY, "What colour is Greg?")
    out = dom.split('<div id="out"', 1)[1].split("</div>", 1)[0]  # what the script put there
    check_heat_map(out, expected.inspection)  # ran under the page's Content-Security-Policy: its hash is right
    assert f"answer: <b>{expected.guess}</b>" in out and "note: reading 'colour' as 'color'" in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt; is a frog." in out and dom.count("<script") == 1
