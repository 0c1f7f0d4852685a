"""The compile bill (``advice/bill.py``) as text, JSON-ready data and an HTML fragment.

Every line says what the numbers are: graphs and kernels Neuron *would* build, seconds priced by
a named model ("assumed" or "calibrated"), never a measurement. Values from the log (function
names, refusal reasons, header facts) are made terminal-safe or HTML-escaped where written.
"""
from __future__ import annotations

from typing import Any

from neuronkit.advice.bill import Bill
from neuronkit.advice.wording import count
from neuronkit.safe import html_text
from neuronkit.views.text_layout import WIDTH, Col, clean, fitted, wrap

__all__ = ["MOST_REFUSALS", "MOST_ROWS", "bill_data", "bill_html", "bill_lines", "bill_text"]

MOST_ROWS = 20  # functions the text shows (the costliest); the HTML shows up to 10x as many
MOST_REFUSALS = 10  # refusals listed with their reason
HEADS = ("function", "forward", "backward", "kernels", "breaks", "refused", "seconds")


def _seconds(s: float) -> str:
    """``1,620 s (27.0 min)``: seconds, and minutes or hours past a minute."""
    if s >= 3600:
        return f"{s:,.0f} s ({s / 3600:.1f} h)"
    return f"{s:,.0f} s ({s / 60:.1f} min)" if s >= 60 else f"{s:.1f} s"


def _rehearsal(bill: Bill) -> str:
    """Where the counts come from, in words."""
    device = clean(bill.device) or "an unknown device"
    if bill.as_neuron is not None:
        return (f"a rehearsal on {device} under Neuron's compile rules: counts of what Neuron "
                "would build, not a measurement")
    return f"counted from a run on {device}: what Neuron would build, not a measurement"


def bill_lines(bill: Bill) -> list[str]:
    """The bill's summary sentences (unwrapped, terminal-safe), the title first."""
    kernels = (f" and {count(bill.kernels, 'eager kernel')}"
               f"{' (forecast)' if bill.kernels_forecast else ''}")
    lines = [f"Compile bill ({_rehearsal(bill)})",
             f"would build {count(bill.graphs, 'graph')} ({bill.forward} forward, "
             f"{bill.backward} backward){kernels}; {count(bill.graph_breaks, 'graph break')}"]
    if bill.refused:
        lines.append(f"would fail on Neuron: {count(bill.refused, 'graph')} refused (listed "
                     "below, not priced)")
    lines.append(f"priced ({bill.basis}): {_seconds(bill.total_s)} to build = graphs "
                 f"{_seconds(bill.graph_s)} + eager kernels {_seconds(bill.kernel_s)}")
    lines.append(f"model: {clean(bill.model)}")
    if bill.priced_at_mean:
        lines.append(f"{count(bill.priced_at_mean, 'graph')} had no "
                     f"{bill.calibration.feature if bill.calibration else 'feature'} count: "
                     "priced at the calibration's mean build")
    rules = (bill.as_neuron or {}).get("rules")
    if isinstance(rules, list) and rules:
        lines.append("rules applied: " + ", ".join(clean(r) for r in rules))
    return lines


def _row_cells(bill: Bill, most: int) -> list[list[str]]:
    return [[clean(r.function), f"{r.forward}", f"{r.backward}", f"{r.kernels}",
             f"{r.graph_breaks}", f"{r.refused}", f"{r.total_s:,.0f}"] for r in bill.rows[:most]]


def bill_text(bill: Bill, width: int = WIDTH) -> str:
    """The bill as plain text: the summary, the costliest functions, the refusals."""
    title, *rest = bill_lines(bill)
    out = [wrap(title, indent="", width=width), "=" * min(len("Compile bill"), width)]
    out += [wrap(line, indent="  ", width=width) for line in rest]
    if bill.rows:
        cols = [Col(HEADS[0], cap=60, least=16)] + [Col(h, right=True) for h in HEADS[1:]]
        out += ["", fitted(cols, _row_cells(bill, MOST_ROWS), width=width)]
        if len(bill.rows) > MOST_ROWS:
            out.append(f"{len(bill.rows) - MOST_ROWS} more function(s) not shown (those that "
                       "would build least; --json lists them all)")
    if bill.refusals:
        out += ["", "refused on Neuron (these graphs would fail there):"]
        out += [wrap(f"  {clean(r.function)} ({clean(r.kind)}): {clean(r.why)}", indent="  ",
                     width=width) for r in bill.refusals[:MOST_REFUSALS]]
        if len(bill.refusals) > MOST_REFUSALS:
            out.append(f"  and {len(bill.refusals) - MOST_REFUSALS} more")
    return "\n".join(out)


def bill_data(bill: Bill) -> dict[str, Any]:
    """The bill as JSON-ready data (``neuronkit report --json``'s "bill"); dump it with
    ``ensure_ascii=True`` as the report does."""
    data = bill.to_dict()
    data["summary"] = bill_lines(bill)
    return data


def bill_html(bill: Bill, most: int = 10 * MOST_ROWS) -> str:
    """The bill as an HTML fragment (every value escaped): the summary, then a table."""
    title, *rest = bill_lines(bill)
    parts = [f'<div class="nk-synthetic">{html_text(title)}</div>',
             "<ul>" + "".join(f"<li>{html_text(line)}</li>" for line in rest) + "</ul>"]
    if bill.rows:
        head = "".join(f"<th>{html_text(h)}</th>" for h in HEADS)
        body = "".join("<tr>" + "".join(
            f'<td class="nk-num">{html_text(c)}</td>' if i else f"<td>{html_text(c)}</td>"
            for i, c in enumerate(row)) + "</tr>" for row in _row_cells(bill, most))
        parts.append(f'<table class="nk-table"><thead><tr>{head}</tr></thead>'
                     f"<tbody>{body}</tbody></table>")
        if len(bill.rows) > most:
            parts.append(f'<div class="nk-muted">{len(bill.rows) - most} more function(s) not '
                         "shown</div>")
    if bill.refusals:
        items = "".join(f"<li>{html_text(r.function)} ({html_text(r.kind)}): "
                        f"{html_text(r.why)}</li>" for r in bill.refusals[:MOST_REFUSALS])
        parts.append(f"<div>refused on Neuron (these graphs would fail there):</div><ul>{items}</ul>")
    return "".join(parts)
