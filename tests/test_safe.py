"""``neuronkit.safe``: whatever a crafted string holds, what ``terminal_safe`` lets through has no
escape byte, control character, BEL or bidi control (nothing a terminal would act on, nothing a
removal could assemble into a new sequence), and plain text comes through as it was."""
from __future__ import annotations

import itertools
import random
import re

import pytest

from neuronkit.safe import html_text, spreadsheet_safe, strip_control, terminal_safe

# what a terminal could act on: C0 but tab and newline, DEL, C1, bidi controls, line and
# paragraph separators, and lone surrogates (not text: printing one raises UnicodeEncodeError)
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                       "\u2028\u2029\ud800-\udfff]")
HOSTILE = ["\x1b", "\x1b[", "\x1b]", "\x1bP", "\x1b\\", "\x1b(", "\x07", "\x9b", "\x9d", "\x9c",
           "\x90", "\x85", "\x80", "\x9f", "\x8d", "\r", "\x00", "\x08", "\x7f", "\u202e",
           "\u2066", "\u200f", "\u061c", "\u2028", "\udcff", "\ud800"]
PLAIN = ["a", "Z", "é", "中", "🙂", "[", "]", "31m", "0;title", ";", " ", "\n", "\t", "(0", "m",
         "\\", "P", "~", "?", "8;;http://x"]
PIECES = HOSTILE + PLAIN


def crafted() -> list[str]:
    """Every pair and triple of the pieces, then long random mixes (one seed: reproducible)."""
    strings = ["".join(p) for n in (1, 2, 3) for p in itertools.product(PIECES, repeat=n)]
    rng = random.Random(23)
    strings += ["".join(rng.choices(PIECES, k=rng.randint(4, 16))) for _ in range(5000)]
    return strings


def test_nothing_a_terminal_acts_on_gets_through():
    for text in crafted():
        out = terminal_safe(text)
        assert not FORBIDDEN.search(out), (text, out)
        out.encode("utf-8")  # printable on a UTF-8 terminal: no lone surrogate
        assert terminal_safe(out) == out, (text, out)  # nothing left to strip: a fixed point
        one_line = strip_control(text, keep_newlines=False)
        assert not FORBIDDEN.search(one_line) and not set(one_line) & {"\n", "\t", "\r"}, text


def test_plain_text_comes_through_unchanged():
    rng = random.Random(7)
    for pieces in [*itertools.product(PLAIN, repeat=2),
                   *(rng.choices(PLAIN, k=rng.randint(3, 20)) for _ in range(2000))]:
        text = "".join(pieces)
        assert terminal_safe(text) == text


@pytest.mark.parametrize("text, expected", [
    ("done\x1b", "done"),                    # a lone ESC at the end
    ("\x1b", ""),
    ("a\x1b\x9b31mb", "ab"),                 # ESC, then an 8-bit CSI sequence
    ("a\x1b\x85[31mb", "a[31mb"),            # ESC + C1: removing the C1 must not leave ESC [
    ("a\x1b\x1b[0m[31mb", "a[31mb"),         # removing one sequence must not leave another
    ("\x1b]0;title\x07rest", "rest"),        # OSC ... BEL, whole
    ("\x9d0;title\x9crest", "rest"),         # the 8-bit OSC ... ST
    ("\x1b]0;no end", "0;no end"),           # an unterminated OSC keeps its text, not ESC ]
    ("over\rwrite", "over\nwrite"),
    ("\u202eexe.txt", "exe.txt"),
    ("caf\udce9.jsonl", "caf\ufffd.jsonl"),  # a file name's undecodable byte shows as U+FFFD
])
def test_crafted_edges(text, expected):
    assert terminal_safe(text) == expected


def test_every_escaper_leaves_no_lone_surrogate():
    name = "log-\udcff.jsonl"  # how Python hands over a file name that is not UTF-8
    for out in (terminal_safe(name), html_text(name), spreadsheet_safe(name)):
        assert "\ufffd" in out and out.encode("utf-8")
