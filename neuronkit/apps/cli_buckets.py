"""``neuronkit buckets TRAFFIC``: the bucket trade-off of served traffic (1..N buckets: graphs,
padding, overflow, compile bill), the chosen plan (``nk.plan_buckets`` at the same prices), and
with ``--for`` / ``--check`` the plan in a server's words or a check of a config you have."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from neuronkit.apps.cli_common import int_list, positive_int, print_out, write_output

__all__ = ["FORMS", "add_buckets_command", "cmd_buckets"]

FORMS = ("hf", "vllm-neuron", "nxdi")

EPILOG = """\
TRAFFIC: JSONL, one request a line ({"prompt_tokens": 812, "output_tokens": 95}, or
{"prompt": "text"} with --tokenizer); a .csv file with a --column of prompt token counts
(output_tokens beside it where present); or a neuronkit compile log of nk.generate calls (one
length per graph compiled: rough). Bad lines are skipped, counted and named on stderr; a file with
no usable line is an error (exit 2).

Each row is the plan with the least padding for that many buckets; * marks the chosen plan:
nk.plan_buckets(prompt lengths, max_buckets=N, compile_cost_s, token_cost_s,
graphs_per_bucket=2 x batch sizes) (a prefill and a decode graph per bucket and batch size).
"""


def _tokenizer(name: str | None) -> Any:
    if name is None:
        return None
    from neuronkit.setup.models import load_tokenizer

    tok = load_tokenizer(name)
    return lambda text: len(tok.encode(text))


def _server() -> Any:
    try:
        from neuronkit.advice import server_buckets
    except ImportError as exc:  # pragma: no cover - only before server_buckets.py exists
        raise ValueError(f"--for and --check need neuronkit.advice.server_buckets ({exc})") from exc
    return server_buckets


def _config_text(arg: str) -> str:
    """--check CONFIG: a file's text, else the argument itself (e.g. "64,128,256")."""
    path = Path(arg)
    if path.is_file():
        return path.read_text(encoding="utf-8", errors="replace")
    return arg


def cmd_buckets(args: argparse.Namespace) -> int:
    from neuronkit.advice.bucket_plan import plan_traffic, price_from_log
    from neuronkit.views.bucket_text import plan_data, plan_text
    from neuronkit.workloads.shapes import plan_buckets
    from neuronkit.workloads.traffic import read_traffic

    compile_cost_s, source = args.compile_cost_s, ""
    if args.price_log is not None:
        compile_cost_s, source = price_from_log(args.price_log)
    traffic = read_traffic(args.traffic, column=args.column, tokenize=_tokenizer(args.tokenizer))
    notes = sys.stderr if args.json else sys.stdout
    if traffic.bad:
        print(f"neuronkit buckets: warning: {traffic.bad_text()}", file=sys.stderr)
    plan = plan_traffic(traffic.prompt, max_buckets=args.max_buckets, compile_cost_s=compile_cost_s,
                        token_cost_s=args.token_cost_s, price_source=source,
                        batch_sizes=args.batch_sizes, max_len=args.max_len)
    info = {"source": traffic.source, "form": traffic.form, "requests": len(traffic.prompt),
            "bad_lines": traffic.bad, "bad_shown": traffic.bad_lines, "note": traffic.note}
    data = plan_data(plan, info)
    text = [plan_text(plan, traffic.note)]
    if args.server_form is not None or args.check is not None:
        server = _server()
        totals = [min(n, args.max_len) for n in traffic.total] if args.max_len else traffic.total
        decode = plan_buckets(totals, max_buckets=args.max_buckets, compile_cost_s=plan.compile_cost_s,
                              token_cost_s=plan.token_cost_s, graphs_per_bucket=len(plan.batch_sizes))
        if args.server_form is not None:
            out = server.render(plan.chosen, args.server_form, batch_sizes=plan.batch_sizes,
                                max_len=args.max_len or max(totals), decode_buckets=list(decode))
            data["server"] = {"form": args.server_form, "text": out}
            text.append(f"\n--for {args.server_form}:\n{out}")
        if args.check is not None:
            config = server.parse_config(_config_text(args.check))
            report = server.check_config(traffic.prompt, traffic.total, config, plan.chosen)
            data["check"] = report.to_dict()
            text.append(f"\n--check {args.check}:\n{report.text()}")
    if args.json:
        print_out(json.dumps(data, indent=2, ensure_ascii=True, default=str))
    else:
        print_out("\n".join(text))
    if args.png is not None:
        from neuronkit.views.bucket_text import save_bucket_png

        png = Path(args.png)
        write_output("chart", png, lambda: save_bucket_png(plan, png), notes)
    return 0


def _seconds_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 <= value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def add_buckets_command(sub: Any) -> None:
    """Register ``neuronkit buckets`` on the CLI's subparsers."""
    from neuronkit.workloads.shapes import DEFAULT_COMPILE_COST_S, DEFAULT_TOKEN_COST_S

    p = sub.add_parser("buckets", help="plan length buckets from served traffic (the trade-off)",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    p.add_argument("traffic", metavar="TRAFFIC", help="requests: JSONL, CSV or a compile log")
    p.add_argument("--for", dest="server_form", choices=FORMS, default=None,
                   help="also print the plan in this server's words")
    p.add_argument("--check", default=None, metavar="CONFIG",
                   help="check a bucket config (file or text, any --for form) against the traffic")
    p.add_argument("--json", action="store_true", help="print the trade-off as JSON")
    p.add_argument("--png", default=None, metavar="FILE",
                   help="also save a chart of padding waste against graphs")
    p.add_argument("--batch-sizes", type=int_list, default=[1], metavar="N,N,...",
                   help="batch sizes served (each bucket is a graph per phase per size; default 1)")
    p.add_argument("--max-buckets", type=positive_int, default=8, metavar="N",
                   help="plans of 1..N buckets (default 8)")
    p.add_argument("--max-len", type=positive_int, default=None, metavar="N",
                   help="the longest prompt served: longer ones overflow (default: no limit)")
    p.add_argument("--price-log", default=None, metavar="LOG",
                   help="price a graph at the median NEFF build (else Dynamo compile) seconds of "
                        "this neuronkit log")
    p.add_argument("--compile-cost-s", type=_seconds_arg, default=DEFAULT_COMPILE_COST_S,
                   metavar="S", help=f"seconds a graph compiles (default {DEFAULT_COMPILE_COST_S:g}, "
                                     "assumed)")
    p.add_argument("--token-cost-s", type=_seconds_arg, default=DEFAULT_TOKEN_COST_S, metavar="S",
                   help=f"seconds a padded prompt token costs (default {DEFAULT_TOKEN_COST_S:g})")
    p.add_argument("--column", default="prompt_tokens",
                   help="CSV column of prompt token counts (default prompt_tokens)")
    p.add_argument("--tokenizer", default=None, metavar="NAME",
                   help="tokenizer for JSONL lines with prompt text")
    p.set_defaults(func=cmd_buckets)
