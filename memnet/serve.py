"""`memnet serve`: ask a trained model from a web page that only this machine can open.

    $ memnet serve --checkpoint runs/demo
    open http://127.0.0.1:8000/ (served to this machine only; Ctrl-C stops)

GET /          the page: a story box (one sentence a line, line numbers optional), a question
               and an Ask button. `/?story=...&question=...` fills them in and asks at once.
POST /answer   a JSON object {"story": "...", "question": "..."} (Content-Type
               application/json, at most MAX_BODY bytes of UTF-8) -> a JSON object: question,
               answer (null when declined), probability, hops, declined, reason, notes, table
               (`memnet ask --format json`'s object; null when declined before the model ran)
               and html (the same as the page shows it: notes, answer, heat map).

Answers are memnet.api's Model.answer, which reads and declines as `memnet ask` does (memnet.ask):
the page shows its notes (another spelling read as the model's, words never seen) and its
"cannot answer" with the reason. A request the server cannot read gets a 400 and one line.

Nothing leaves the machine: the server listens on 127.0.0.1 only, and the page loads nothing
(inline CSS and one inline script, which the Content-Security-Policy allows by its hash, so a
script smuggled into a story could not run even if escaping failed). Requests must name
127.0.0.1 or localhost in their Host header (a site that rebinds its DNS name to 127.0.0.1
gets a 403), and POST /answer takes JSON only, which no other site's form can send.
"""
from __future__ import annotations

import base64
import hashlib
import json
import sys
import threading
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, TextIO
from urllib.parse import urlsplit

from memnet import ask
from memnet.api import Answer, Model
from memnet.errors import MemnetError
from memnet.inspect import Table, shown, to_dict
from memnet.safe import cut, printable

HOST = "127.0.0.1"
MAX_BODY = 64 * 1024  # bytes of a POST /answer body: a story of some hundreds of sentences

_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 1.5em 2em; color: #222; max-width: 60em; }
h1 { font-size: 1.3em; } textarea, input[type=text] { font: inherit; width: 100%; box-sizing: border-box; }
pre.forms { background: #f6f6f6; padding: .5em .8em; }
table.heat { border-collapse: collapse; margin: .6em 0; }
table.heat td, table.heat th { border: 1px solid #ddd; padding: 2px 8px; }
table.heat th { background: #f4f4f4; text-align: left; } td.w { text-align: right; min-width: 3.5em; font-variant-numeric: tabular-nums; }
td.chosen { outline: 3px solid #d62728; outline-offset: -3px; font-weight: 700; }
td.masked, th.masked { text-decoration: line-through; color: #888; }
.declined { color: #b00; font-weight: 600; } .note { color: #555; } .error { color: #b00; }
.legend, footer { color: #666; font-size: .9em; }
"""

# The page's only script: Ask posts the story and question to /answer and shows the html it
# gets back (escaped by the server) or the one-line error; ?story=&question= asks at once.
_JS = """
const form = document.getElementById('ask'), out = document.getElementById('out');
async function ask() {
  out.className = ''; out.textContent = 'asking...';
  try {
    const r = await fetch('/answer', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                      body: JSON.stringify({story: form.story.value, question: form.question.value})});
    if (r.ok) { out.innerHTML = (await r.json()).html; return; }
    out.className = 'error'; out.textContent = await r.text();
  } catch (e) { out.className = 'error'; out.textContent = 'the server did not answer (' + e + ')'; }
}
form.addEventListener('submit', function (e) { e.preventDefault(); ask(); });
const given = new URLSearchParams(location.search);
if (given.has('question')) { form.story.value = given.get('story') || ''; form.question.value = given.get('question'); ask(); }
"""
_JS_HASH = base64.b64encode(hashlib.sha256(_JS.encode()).digest()).decode()
_HEADERS = {  # every response's: nothing loads from elsewhere, nothing is cached, no page may frame this one
    "Content-Security-Policy": f"default-src 'none'; script-src 'sha256-{_JS_HASH}'; style-src 'unsafe-inline'; "
                               "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


class BadRequest(MemnetError):
    """A request the server answers with `status` and the message, one line."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def page(model: Model, min_probability: float) -> str:
    """The whole page: what the model can be asked (as `memnet ask` lists it), the form, and
    an empty place for the answer."""
    where = _text(str(model.path)) if model.path else "a model"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>memnet serve</title><style>{_CSS}</style></head>
<body>
<h1>Ask {where}</h1>
<pre class="forms">{escape(ask.describe(model.vocab, min_probability))}</pre>
<form id="ask">
<p><label for="story">Story, one sentence a line (line numbers optional):</label><br>
<textarea id="story" name="story" rows="8"></textarea></p>
<p><label for="question">Question:</label><br><input type="text" id="question" name="question"></p>
<p><button type="submit">Ask</button></p>
</form>
<noscript><p class="error">The page needs JavaScript to ask; or POST JSON to /answer.</p></noscript>
<div id="out"></div>
<footer>Served by memnet on 127.0.0.1: only this machine can open it, and nothing it is told leaves it.</footer>
<script>{_JS}</script>
</body></html>
"""


def answer_json(model: Model, story: str, question: str, min_probability: float) -> dict[str, Any]:
    """POST /answer's reply: Model.answer's Answer as JSON, with its table and its html."""
    a = model.answer(story, question, min_probability=min_probability)
    return {"question": a.question, "answer": a.answer, "probability": a.probability, "hops": a.hops,
            "declined": a.declined, "reason": a.reason, "notes": a.notes,
            "table": to_dict(a.inspection) if a.inspection is not None else None, "html": answer_html(a)}


def answer_html(a: Answer) -> str:
    """The answer as the page shows it, every text from the user escaped: the notes, then
    "cannot answer" and why, or the answer, its heat map and what each hop would have said."""
    out = [f'<p class="note">note: {_text(note)}</p>' for note in a.notes]
    t = a.inspection
    if t is None:
        return "\n".join(out + [f'<p class="declined">cannot answer: {_text(a.reason)}</p>'])
    t = shown(t)
    if a.declined:
        out.append(f'<p class="declined">cannot answer: {_text(a.reason)}; its best guess:</p>')
    out.append(f'<p class="answer">Q: {escape(t.question)}<br>answer: <b>{escape(t.prediction)}</b> '
               f'(p={t.probability:.2f}) &middot; {t.hops_used} of {t.max_hops} {t.step}s (stopped: {t.stop_reason})</p>')
    out.append(heat_map(t))
    out.append('<p class="hops">had it stopped after: ' + ", ".join(
        f"{t.step} {k + 1} &rarr; {escape(ans)} ({p:.2f})" for k, (ans, p) in enumerate(t.hop_answers)) + "</p>")
    if t.forgotten:
        out.append(f'<p class="note">{t.forgotten} older sentence(s) fell out of the {len(t.memories)}-slot memory</p>')
    return "\n".join(out)


def _line(text: str) -> str:
    """A message as one line, control characters shown (a typed story can hold them)."""
    return printable(" ".join(text.splitlines()))


def _text(text: str) -> str:
    """A message for the page: one line, HTML escaped."""
    return escape(_line(text))


def heat_map(t: Table) -> str:
    """The attention of `t` (already passed through inspect.shown) as an HTML table: a row per
    memory, a column per hop, each cell shaded by its weight (printed to 2 decimals), the hop's
    chosen memory outlined, memories masked by an earlier hop struck through; a hop that could
    read nothing is headed "all masked". The null memory's row follows where a hop used it."""
    full = [k in t.all_masked for k in range(t.hops_used)]
    head = "".join(f'<th class="masked" title="every memory was chosen by an earlier {t.step}">{t.step} {k + 1}'
                   f"<br>all masked</th>" if full[k] else f"<th>{t.step} {k + 1}</th>" for k in range(t.hops_used))
    rows = [f'<tr><th>id</th><th>sentence</th>{head}</tr>']
    for r, (line_id, sentence) in enumerate(t.memories):
        kinds = ["masked" if full[k] else "chosen" if r == t.chosen[k] else "masked" if r in t.masked[k] else ""
                 for k in range(t.hops_used)]
        cells = "".join(_cell(t.attention[k][r], kind) for k, kind in enumerate(kinds))
        rows.append(f"<tr><td>{line_id}</td><td>{escape(sentence)}</td>{cells}</tr>")
    if t.reads_nothing:
        rows.append("<tr><td></td><td>(nothing: the null memory)</td>" + "".join(_cell(w, "") for w in t.nothing) + "</tr>")
    legend = (f'<p class="legend">Darker cells carry more weight; outlined: the {t.step}\'s chosen memory (its argmax); '
              f"struck through: masked, chosen by an earlier {t.step}.</p>")
    return '<table class="heat">\n' + "\n".join(rows) + "\n</table>\n" + legend


def _cell(w: float, kind: str) -> str:
    titles = {"chosen": ' title="chosen: the argmax"', "masked": ' title="masked: chosen by an earlier hop"'}
    ink = "#fff" if w > 0.6 else "#222"
    return (f'<td class="{f"w {kind}".strip()}"{titles.get(kind, "")} '
            f'style="background:rgba(31,119,180,{w:.3f});color:{ink}">{w:.2f}</td>')


def read_request(headers: Any, rfile: Any) -> tuple[str, str]:
    """The story and question of a POST /answer (its headers, and its body still to read);
    BadRequest saying what is wrong with it."""
    if headers.get_content_type() != "application/json":
        raise BadRequest(f"expected Content-Type application/json, found {cut(headers.get('Content-Type', 'none'), 60)!r}")
    try:
        length = int(headers.get("Content-Length", ""))
    except ValueError:
        raise BadRequest("expected a Content-Length header giving the body's length in bytes") from None
    if not 0 <= length <= MAX_BODY:
        if 0 < length <= 16 * MAX_BODY:  # read and dropped: closing on an unread body would reset the connection
            rfile.read(length)
        raise BadRequest(f"expected a body of at most {MAX_BODY} bytes, found {length}")
    data = rfile.read(length)
    try:
        body = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise BadRequest(f"expected UTF-8 text, found byte 0x{data[e.start]:02x} at byte {e.start}") from None
    except ValueError as e:  # json.JSONDecodeError
        raise BadRequest(f'expected a JSON object {{"story": ..., "question": ...}} ({e})') from None
    except RecursionError:
        raise BadRequest('expected a JSON object {"story": ..., "question": ...}, found arrays or objects nested '
                         "too deeply to read") from None
    if not isinstance(body, dict):
        raise BadRequest(f'expected a JSON object {{"story": ..., "question": ...}}, found a {type(body).__name__}')
    for key in ("story", "question"):
        if not isinstance(body.get(key), str):
            raise BadRequest(f"{key}: expected a string, found {'nothing' if key not in body else type(body[key]).__name__}")
        try:
            body[key].encode("utf-8")
        except UnicodeEncodeError as e:  # a lone surrogate, which JSON's \\ud800 escape can carry
            raise BadRequest(f"{key}: expected text, found the lone surrogate U+{ord(e.object[e.start]):04X}") from None
    return body["story"], body["question"]


class Server(ThreadingHTTPServer):
    """An HTTP server on HOST:port for one model, which answers one question at a time."""

    daemon_threads = True  # Ctrl-C does not wait for a browser's open connection

    def __init__(self, model: Model, port: int, min_probability: float = ask.MIN_PROBABILITY):
        self.model, self.min_probability = model, min_probability
        self.lock = threading.Lock()  # one question at a time through the model
        self.page = page(model, min_probability).encode()
        try:
            super().__init__((HOST, port), Handler)
        except OSError as e:
            raise MemnetError(f"cannot listen on {HOST}:{port} ({e.strerror or e}): choose another --port, "
                              "or --port 0 for a free one") from None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"


class Handler(BaseHTTPRequestHandler):
    server: Server
    timeout = 30  # seconds a client may stall mid-request before its connection is dropped

    def do_GET(self) -> None:
        self._answer(self._page)

    def do_POST(self) -> None:
        self._answer(self._post)

    def _page(self) -> tuple[str, bytes]:
        self._path("/")
        return "text/html; charset=utf-8", self.server.page

    def _post(self) -> tuple[str, bytes]:
        self._path("/answer")
        story, question = read_request(self.headers, self.rfile)
        try:
            with self.server.lock:
                reply = answer_json(self.server.model, story, question, self.server.min_probability)
        except MemnetError as e:  # a malformed story or question: its line, as `memnet ask` says it
            raise BadRequest(str(e)) from None
        return "application/json", json.dumps(reply).encode()

    def _path(self, expected: str) -> None:
        host = self.headers.get("Host", "").rsplit(":", 1)[0].lower()
        if host not in (HOST, "localhost"):  # DNS rebinding: another site's name resolved to this machine
            raise BadRequest(f"expected the Host {HOST} or localhost, found {cut(host, 40)!r}", 403)
        path = urlsplit(self.path).path
        if path != expected:
            raise BadRequest(f"no {path!r} here: the page is /, and answers come from POST /answer", 404)

    def _answer(self, handle: Callable[[], tuple[str, bytes]]) -> None:
        """Sends what `handle` returns (content type, body), or its BadRequest as one line."""
        try:
            status, (ctype, body) = 200, handle()
        except BadRequest as e:
            status, ctype, body = e.status, "text/plain; charset=utf-8", f"{_line(str(e))}\n".encode()
        except Exception:  # a bug: the client hears so, the traceback goes to the server's output
            self._send(500, "text/plain; charset=utf-8", b"internal error in memnet serve: see its output\n")
            raise
        self._send(status, ctype, body)

    def _send(self, status: int, ctype: str, body: bytes) -> None:
        self.send_response(status)
        for name, value in {**_HEADERS, "Content-Type": ctype, "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the server prints its address once, not a line per request."""


def serve(model: Model, port: int = 8000, min_probability: float = ask.MIN_PROBABILITY,
          out: TextIO | None = None) -> int:
    """Serve the page until Ctrl-C, then return 0. Prints one line first: the URL to open."""
    server = Server(model, port, min_probability)
    print(f"open {server.url} (served to this machine only; Ctrl-C stops)", file=out or sys.stdout, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
