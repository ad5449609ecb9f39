"""Text from data files, made safe for where it is shown.

A story file is data a user may have been handed: its sentences can hold terminal escape
sequences (which could retitle a terminal, hide lines or fake output), HTML (live in most
markdown viewers) or spreadsheet formulas (run by Excel or LibreOffice when a CSV is opened).
Every renderer passes story text through one of these before writing it.
"""
from __future__ import annotations

import html
import re
import unicodedata

# bidirectional overrides and isolates: they reorder what a terminal or an editor shows
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: str) -> str:
    """Control characters (C0, DEL, C1: ESC starts every terminal escape) and bidirectional
    overrides shown as visible escapes: 'a\\x1b[2Jb' -> 'a\\\\x1b[2Jb'."""
    if text.isprintable():
        return text
    return "".join(ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) == "Cc" or ch in _BIDI
                   else ch for ch in text)


LONG_WORD = 40  # characters of one word a table or a listing shows


def short_words(text: str, limit: int = LONG_WORD) -> str:
    """`text` with each word (a run of non-blanks) longer than `limit` cut to its first `limit`
    characters, an ellipsis and its length: a story's word can be megabytes long, and a table
    pads every row to its longest sentence. 'a xxx...x b' -> 'a xxxx… (5000000 characters) b'."""
    if len(text) <= limit:
        return text
    return re.sub(rf"\S{{{limit + 1},}}", lambda m: f"{m.group(0)[:limit]}… ({len(m.group(0))} characters)", text)


def shown(text: str) -> str:
    """Text from data as a table, a listing or a page shows it: long words cut (short_words),
    control characters made visible (printable)."""
    return printable(short_words(text))


def markdown(text: str) -> str:
    """For a markdown table cell: HTML special characters escaped (markdown passes raw HTML
    through), '|' escaped (it would end the cell), control characters made visible, long words cut."""
    return html.escape(shown(text), quote=False).replace("|", "\\|")


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A cell a spreadsheet shows as text: a string that starts like a formula (= + - @, tab or
    carriage return) gets a leading single quote, as OWASP's CSV-injection advice says."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def cut(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
