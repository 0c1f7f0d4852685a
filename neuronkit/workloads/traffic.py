"""Request lengths of served traffic, read from a file: what ``neuronkit buckets`` plans from.

Three forms: JSONL (one request a line: ``{"prompt_tokens": 812, "output_tokens": 95}``, or
``{"prompt": "text", "output": "text"}`` with a tokenizer), a CSV file (a column of prompt token
counts, ``output_tokens`` beside it where present), or a neuronkit compile log of ``nk.generate``
calls. The file is untrusted, like a log: a bad line (not JSON, a length missing, negative, huge,
not an int, binary junk, longer than :data:`MAX_LINE_BYTES`) is counted and named, and the rest
is read; nothing usable left is a ``ValueError`` that says why.
"""
from __future__ import annotations

import csv
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterator

__all__ = ["MAX_LINE_BYTES", "MAX_TOKENS", "Traffic", "read_traffic"]

MAX_LINE_BYTES = 1 << 20  # a request line longer than 1 MiB is refused, not parsed
MAX_TOKENS = 10_000_000  # tokens of one request: beyond any model's context, so a bad number
SHOWN_BAD = 10  # bad lines named; the rest counted
_LOG_MARK = b"neuronkit-compile-log"  # the header of a compile log (events/schema.py FORMAT)
# nk.generate's batch label (workloads/generation.py _label): padded length and cache length
_GENERATE = re.compile(r"generate batch \d+: (?:bucket|length) (\d+), cache (\d+)")

Tokenize = Callable[[str], int]


@dataclass
class Traffic:
    """Prompt and output token counts, one pair per request, and the lines that were refused."""

    prompt: list[int] = field(default_factory=list)
    output: list[int] = field(default_factory=list)
    source: str = ""
    form: str = "jsonl"  # jsonl | csv | log
    bad: int = 0
    bad_lines: list[str] = field(default_factory=list)  # the first SHOWN_BAD: "line N: why"
    note: str = ""

    @property
    def total(self) -> list[int]:
        """Prompt + output tokens of each request: the sequence length decode reaches."""
        return [p + o for p, o in zip(self.prompt, self.output, strict=True)]

    def refuse(self, line_no: int, why: str) -> None:
        self.bad += 1
        if len(self.bad_lines) < SHOWN_BAD:
            self.bad_lines.append(f"line {line_no}: {why}")

    def bad_text(self) -> str:
        """The refused lines, the first ten named; '' when there are none."""
        if not self.bad:
            return ""
        more = self.bad - len(self.bad_lines)
        return (f"{self.bad} bad line(s) skipped in {self.source}: " + "; ".join(self.bad_lines)
                + (f"; and {more} more" if more > 0 else ""))


def _lines(f: IO[bytes]) -> Iterator[tuple[int, str | None]]:
    """(line number, text) per line; text None for a line over MAX_LINE_BYTES (the rest of it is
    read in pieces and dropped, so a 20 MB line costs no parse)."""
    n = 0
    while True:
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        n += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = f.readline(MAX_LINE_BYTES)
            yield n, None
            continue
        yield n, raw.decode("utf-8", errors="replace")


def _count(value: Any, what: str, least: int) -> int:
    """A token count: an int (not a bool or float) from ``least`` to MAX_TOKENS, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int):
        shown = repr(value)[:40]
        raise ValueError(f"{what} must be an int, got {shown}")
    if value < least:
        raise ValueError(f"{what} must be >= {least}, got {value}")
    if value > MAX_TOKENS:
        raise ValueError(f"{what} {str(value)[:20]}... is over {MAX_TOKENS:,} tokens"
                         if value > 10**20 else f"{what} {value:,} is over {MAX_TOKENS:,} tokens")
    return value


def _json_request(text: str, tokenize: Tokenize | None) -> tuple[int, int] | None:
    """(prompt, output) tokens of one JSONL line; None for a line to skip silently (blank, a
    header line ``{"header": ...}``); ValueError for a bad one."""
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:  # also ints past Python's 4300-digit limit
        raise ValueError(f"not JSON ({str(exc)[:60]})") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    if "prompt_tokens" in data:
        prompt = _count(data["prompt_tokens"], "prompt_tokens", 1)
    elif "prompt" in data:
        if tokenize is None:
            raise ValueError("prompt text needs --tokenizer (or give prompt_tokens)")
        if not isinstance(data["prompt"], str):
            raise ValueError("prompt must be text")
        prompt = _count(tokenize(data["prompt"]), "prompt tokens", 1)
    elif "header" in data:
        return None
    else:
        raise ValueError("no prompt_tokens (or prompt text)")
    if "output_tokens" in data:
        return prompt, _count(data["output_tokens"], "output_tokens", 0)
    if isinstance(data.get("output"), str) and tokenize is not None:
        return prompt, _count(tokenize(data["output"]), "output tokens", 0)
    return prompt, 0


def _csv_count(cell: str, what: str, least: int) -> int:
    text = cell.strip()
    if len(text) > 20 or not re.fullmatch(r"[+-]?\d+", text):
        raise ValueError(f"{what} must be an int, got {text[:40]!r}")
    return _count(int(text), what, least)


def _read_csv(f: IO[bytes], out: Traffic, column: str) -> None:
    header: list[str] | None = None
    for n, text in _lines(f):
        if text is None:
            out.refuse(n, f"longer than {MAX_LINE_BYTES:,} bytes")
            continue
        if not text.strip():
            continue
        try:
            cells = next(csv.reader([text]))
        except (csv.Error, StopIteration) as exc:
            out.refuse(n, f"not CSV ({exc})")
            continue
        if header is None:
            header = [c.strip() for c in cells]
            if column not in header:
                raise ValueError(f"{out.source}: no column {column!r} in the CSV header "
                                 f"{header[:10]}; name one with --column")
            continue
        at, out_at = header.index(column), (header.index("output_tokens")
                                            if "output_tokens" in header else None)
        try:
            if len(cells) != len(header):
                raise ValueError(f"{len(cells)} cells, the header has {len(header)}")
            prompt = _csv_count(cells[at], column, 1)
            output = 0 if out_at is None else _csv_count(cells[out_at], "output_tokens", 0)
        except ValueError as exc:
            out.refuse(n, str(exc))
            continue
        out.prompt.append(prompt)
        out.output.append(output)


def _read_log(path: Path, out: Traffic) -> None:
    """The batches of ``nk.generate`` calls in a compile log: each compiled batch's padded prompt
    length and its cache length (the label ``generate batch N: bucket B, cache C``). A log holds
    one event per graph built, not one per request: a rough picture of traffic."""
    from neuronkit.log.open import open_log

    for event in open_log(path).events:
        found = _GENERATE.search(event.context)
        if found:
            prompt, cache = int(found.group(1)), int(found.group(2))
            out.prompt.append(prompt)
            out.output.append(max(cache - prompt, 0))
    out.note = ("from a compile log: one length per graph nk.generate compiled (padded batch "
                "lengths), not per request")


def read_traffic(path: str | os.PathLike[str], *, column: str = "prompt_tokens",
                 tokenize: Tokenize | None = None) -> Traffic:
    """The request lengths in ``path`` (JSONL, ``.csv``, or a neuronkit compile log)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder: name a traffic file (JSONL, CSV or a compile log)")
    out = Traffic(source=str(path))
    with open(path, "rb") as f:
        head = f.read(4096)
        f.seek(0)
        if _LOG_MARK in head.split(b"\n", 1)[0]:
            out.form = "log"
        elif path.suffix.lower() == ".csv":
            out.form = "csv"
            _read_csv(f, out, column)
        else:
            for n, text in _lines(f):
                try:
                    if text is None:
                        raise ValueError(f"longer than {MAX_LINE_BYTES:,} bytes")
                    pair = _json_request(text, tokenize)
                except ValueError as exc:
                    out.refuse(n, str(exc))
                    continue
                if pair is not None:
                    out.prompt.append(pair[0])
                    out.output.append(pair[1])
    if out.form == "log":
        _read_log(path, out)
    if not out.prompt:
        why = f" ({out.bad_text()})" if out.bad else ""
        raise ValueError(f"{path}: no usable request lengths{why}; expected JSONL lines such as "
                         '{"prompt_tokens": 812, "output_tokens": 95}, a CSV with a '
                         f"{column!r} column, or a compile log of nk.generate calls")
    return out
