"""The bucket trade-off of ``neuronkit buckets``: a text table, its ``--json`` data, and a chart
(``--png``) of padding waste against graphs to compile."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from neuronkit.advice.bucket_plan import BucketPlan

__all__ = ["FORMAT", "bucket_chart", "plan_data", "plan_text", "save_bucket_png"]

FORMAT = "neuronkit-buckets"


def _seconds(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 60:.1f} min" if s >= 60 else f"{s:.1f} s"


def _buckets(values: list[int], most: int = 40) -> str:
    text = ",".join(str(v) for v in values)
    return text if len(text) <= most else text[: most - 3] + "..."


def plan_text(plan: BucketPlan, traffic_note: str = "") -> str:
    """The table (one row per bucket count, the chosen one marked ``*``) and the chosen plan."""
    sizes = ",".join(str(b) for b in plan.batch_sizes)
    head = [f"{plan.requests:,} requests; batch sizes {sizes}; price {plan.compile_cost_s:g} s a "
            f"graph ({plan.price_source}), {plan.token_cost_s:g} s a padded token"]
    if plan.max_len:
        head.append(f"--max-len {plan.max_len}: longer prompts overflow (planned truncated)")
    if traffic_note:
        head.append(traffic_note)
    cols = ("", "n", "buckets", "graphs (prefill+decode)", "padding tokens", "% compute",
            "overflow", "compile bill", "padding s")
    rows = [cols]
    for r in plan.rows:
        rows.append(("*" if r.chosen else "", str(len(r.buckets)), _buckets(r.buckets),
                     f"{r.graphs} ({r.graphs_prefill}+{r.graphs_decode})", f"{r.padding_tokens:,}",
                     f"{r.padding_share:.1%}", f"{r.overflow:,}", _seconds(r.compile_s),
                     _seconds(r.padding_s)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    lines = ["  ".join(c.rjust(w) if i in (1, 3, 4, 5, 6, 7, 8) else c.ljust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
             for row in rows]
    chosen = next((r for r in plan.rows if r.chosen), None)
    tail = f"chosen plan (nk.plan_buckets at these prices): Buckets({plan.chosen})"
    if chosen is not None:
        tail += (f": {chosen.graphs} graphs, compile bill {_seconds(chosen.compile_s)}, padding "
                 f"{chosen.padding_share:.1%} of prompt compute")
    return "\n".join(head + [""] + lines + ["", tail])


def plan_data(plan: BucketPlan, traffic: dict[str, Any] | None = None) -> dict[str, Any]:
    """``--json``: format, the plan's fields (rows with graphs and total_s), and the traffic read."""
    data: dict[str, Any] = {"format": FORMAT, **plan.to_dict()}
    if traffic is not None:
        data["traffic"] = traffic
    return data


def bucket_chart(plan: BucketPlan) -> Any:
    """Padding waste (% of prompt compute) against graphs to compile, one point per plan."""
    from neuronkit.views.charts import figure_axes

    fig, ax = figure_axes(None, (6.4, 3.6))
    xs = [r.graphs for r in plan.rows]
    ys = [100 * r.padding_share for r in plan.rows]
    ax.plot(xs, ys, marker="o", color="#4477aa")
    for r, x, y in zip(plan.rows, xs, ys, strict=True):
        ax.annotate(str(len(r.buckets)), (x, y), textcoords="offset points", xytext=(4, 4),
                    fontsize=8)
        if r.chosen:
            ax.plot([x], [y], marker="o", markersize=12, fillstyle="none", color="#cc3311")
    ax.set_xlabel("graphs to compile (prefill + decode, all batch sizes)")
    ax.set_ylabel("padding, % of prompt compute")
    ax.set_title(f"bucket trade-off, {plan.requests:,} requests (circled: chosen)", fontsize=10)
    ax.set_ylim(bottom=0)
    fig.tight_layout()
    return fig


def save_bucket_png(plan: BucketPlan, path: str | os.PathLike[str]) -> Path:
    from neuronkit.views.charts import save_png

    return save_png(bucket_chart(plan), path)
