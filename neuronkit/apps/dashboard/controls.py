"""Small helpers every dashboard panel uses: a CSS class on each widget, clean dropdown labels,
titled sections, wrapping rows, buttons whose errors land in the status line, widgets that follow
the state's traits, and what a replay hides."""
from __future__ import annotations

from typing import Any, Callable

import ipywidgets as w

from neuronkit.apps.dashboard.state import DashboardState
from neuronkit.safe import html_text, strip_control

__all__ = ["styled", "options", "section", "row", "action_button", "follow", "hide_in_replay",
           "OPTION_WIDTH"]

OPTION_WIDTH = 80         # a device/backend label longer than this is cut (a replayed header's)


def styled(widget: Any, css_class: str, **layout: Any) -> Any:
    """``widget`` with the ``nk-…`` class tests and custom styles find it by, and its layout."""
    widget.add_class(css_class)
    for key, value in layout.items():
        setattr(widget.layout, key, value)
    return widget


def options(values: Any) -> list[Any]:
    """Dropdown options for device/backend names: the values as the state holds them, shown
    with clean labels. A replayed log's header may hold anything: where a name is not one clean
    line (control or bidi characters, newlines, very long), it gets a (label, value) pair whose
    label is cleaned and cut short; plain names stay plain options."""
    values = list(values)
    labels = []
    for value in values:
        label = " ".join(strip_control(value, keep_newlines=False).split()) or "?"
        if len(label) > OPTION_WIDTH:
            label = label[:OPTION_WIDTH - 1] + "…"
        labels.append(label)
    if labels == [str(v) for v in values]:
        return values
    return list(zip(labels, values, strict=True))


def section(title: str, *rows: w.Widget, css_class: str) -> w.VBox:
    """A framed box with a title over ``rows``."""
    box = w.VBox([w.HTML(f'<div class="nk-section">{html_text(title)}</div>'), *rows],
                 layout=w.Layout(border="1px solid #ddd", padding="4px 8px", margin="4px 0"))
    return styled(box, css_class)


def row(*children: w.Widget) -> w.HBox:
    """Widgets side by side, wrapping onto the next line when narrow."""
    return w.HBox(list(children), layout=w.Layout(flex_flow="row wrap", align_items="center"))


def action_button(text: str, css_class: str, action: Callable[[], Any], style: str,
                  tooltip: str, report: Callable[[Exception], None]) -> w.Button:
    """A button running ``action``; an exception goes to ``report`` (the status line)."""
    button = styled(w.Button(description=text, button_style=style, tooltip=tooltip), css_class)

    def on_click(_: w.Button) -> None:
        try:
            action()
        except Exception as exc:  # shown in the status area, never lost
            report(exc)

    button.on_click(on_click)
    return button


def follow(state: DashboardState, names: str | list[str], show: Callable[..., None]) -> None:
    """Call ``show`` now, and again whenever a trait ``names`` names changes."""
    state.observe(show, names)
    show()


def hide_in_replay(state: DashboardState, *parts: w.Widget) -> None:
    """A replay (or a followed run) shows only what applies to its logs: no disabled live
    controls."""
    if state.mode != "live":
        for part in parts:
            part.layout.display = "none"
