"""Bucket plans in the words of the server you deploy with, and a check of a config you have.

Three forms: ``hf`` (``nk.Buckets`` and ``nk.warmup``/``nk.generate``), ``vllm-neuron`` (vLLM's
``LLM(...)`` keyword arguments with ``additional_config={"neuron_config": {...}}``) and ``nxdi``
(NxD Inference ``NeuronConfig`` keyword arguments). Key names and constraints are those of the
cited text in ``tests/data/server_bucket_keys.md`` (Neuron 2.33.0 docs; NxDI tag v0.7.14366):

- vLLM Neuron: ``num_batched_tokens_buckets`` are compiled prefill token counts, the largest must
  equal ``max_num_batched_tokens``; ``num_seqs_buckets`` are decode batch sizes, the largest must
  equal ``max_num_seqs``; by default decode runs at one length, ``max_model_len`` (the design
  page on decode context-length bucketing).
- NxDI: ``context_encoding_buckets`` are prompt lengths, the largest <= ``max_context_length``;
  ``token_generation_buckets`` are total lengths (KV cache), the largest <= ``max_length``
  (default ``seq_len``); both lists are used only with ``enable_bucketing=True``
  (models/config.py:131-136, 180-195 at v0.7.14366; modules/autobucketing.py:162, 185, 238,
  253 at main 4bcdc54).
"""
from __future__ import annotations

import ast
import json
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from neuronkit.workloads.shapes import Buckets

__all__ = ["FORMS", "FAR", "ServerConfig", "PhaseCheck", "CheckReport", "render", "parse_config",
           "check_config"]

FORMS = ("hf", "vllm-neuron", "nxdi")
FAR = 2          # a request "far" from its bucket: padded to at least FAR x its length
MAX_CONFIG_CHARS = 1_000_000
VLLM_LIMITS = ("max_model_len", "max_num_batched_tokens", "max_num_seqs")
NXDI_LIMITS = ("seq_len", "max_context_length", "max_length", "batch_size")


@dataclass(frozen=True)
class ServerConfig:
    """A server's buckets: ``prefill`` (prompt lengths), ``decode`` (total lengths; empty where
    the server decodes at one length), ``batch`` (decode batch sizes), ``limits`` (its length
    and batch limits by their own key names)."""

    form: str
    prefill: tuple[int, ...]
    decode: tuple[int, ...] = ()
    batch: tuple[int, ...] = ()
    limits: dict[str, int] = field(default_factory=dict)


def _sorted(values: Any, what: str) -> list[int]:
    return list(Buckets(values).boundaries) if values is not None else _fail(f"{what} is missing")


def _fail(message: str) -> Any:
    raise ValueError(message)


def render(plan_buckets: list[int], form: str, *, batch_sizes: list[int] | None, max_len: int,
           decode_buckets: list[int] | None = None, max_new_tokens: int | None = None) -> str:
    """The plan as the server takes it. ``plan_buckets``: prompt-length buckets; ``max_len``: the
    longest prompt + output the server must hold; ``decode_buckets``: total-length buckets (NxDI
    token generation; default ``[max_len]``); ``max_new_tokens`` (hf): default ``max_len`` minus
    the largest bucket. vllm-neuron: JSON of ``LLM(...)`` keyword arguments; nxdi: the keyword
    arguments of ``NeuronConfig(...)``; hf: Python lines."""
    prefill = _sorted(plan_buckets, "plan_buckets")
    batch = _sorted(batch_sizes, "batch_sizes") if batch_sizes else []
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < prefill[-1]:
        raise ValueError(f"max_len must be an int >= the largest bucket {prefill[-1]} (a prompt "
                         f"of that length must fit), got {max_len!r}")
    if form == "hf":
        new = max_new_tokens if max_new_tokens is not None else max(1, max_len - prefill[-1])
        sizes = tuple(batch) or (1,)
        return (f"buckets = nk.Buckets({prefill})\n"
                f"manifest = nk.warmup(model, tok, buckets, batch_sizes={sizes}, "
                f"max_new_tokens={new})\n"
                f"result = nk.generate(model, tok, prompts, buckets=buckets, "
                f"batch_size={sizes[-1]}, max_new_tokens={new})\n")
    if form == "vllm-neuron":
        neuron: dict[str, Any] = {"num_batched_tokens_buckets": prefill}
        kwargs: dict[str, Any] = {"max_model_len": max_len, "max_num_batched_tokens": prefill[-1]}
        if batch:
            neuron["num_seqs_buckets"] = batch
            kwargs["max_num_seqs"] = batch[-1]
        kwargs["additional_config"] = {"neuron_config": neuron}
        return json.dumps(kwargs, indent=2)
    if form == "nxdi":
        decode = _sorted(decode_buckets, "decode_buckets") if decode_buckets else [max_len]
        if decode[-1] < max_len:
            raise ValueError(f"the largest decode bucket {decode[-1]} must cover max_len "
                             f"{max_len}: token_generation_buckets are total lengths")
        parts = ["enable_bucketing=True", f"context_encoding_buckets={prefill}",
                 f"token_generation_buckets={decode}", f"max_context_length={prefill[-1]}",
                 f"seq_len={decode[-1]}"]
        if batch:
            parts.append(f"batch_size={batch[-1]}")
        return ", ".join(parts)
    raise ValueError(f"unknown server form {form!r}; one of {', '.join(FORMS)}")


def _ints(value: Any, key: str) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{key} must be a non-empty list of positive ints, got {value!r}")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{key} must hold positive ints, got {value!r}")
    return tuple(Buckets(value).boundaries)


def _limits(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for k in keys:
        v = d.get(k)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{k} must be a positive int, got {v!r}")
            out[k] = v
    return out


def _from_mapping(d: dict[str, Any]) -> ServerConfig:
    """A dict: vLLM ``LLM`` kwargs / ``additional_config`` / ``neuron_config``, or NxDI kwargs
    (or an NxDI ``neuron_config.json`` with a nested ``neuron_config``)."""
    inner = d.get("additional_config", d)
    inner = inner.get("neuron_config", inner) if isinstance(inner, dict) else inner
    if not isinstance(inner, dict):
        raise ValueError("neuron_config must be a mapping of keys to values")
    if "context_encoding_buckets" in inner or "token_generation_buckets" in inner:
        limits = _limits(inner, NXDI_LIMITS)
        cte, tkg = inner.get("context_encoding_buckets"), inner.get("token_generation_buckets")
        top = limits.get("max_context_length", limits.get("seq_len"))
        return ServerConfig("nxdi", _ints(cte, "context_encoding_buckets") if cte is not None
                            else _powers(128, top, "context_encoding_buckets"),
                            _ints(tkg, "token_generation_buckets") if tkg is not None
                            else _powers(128, limits.get("max_length", limits.get("seq_len")),
                                         "token_generation_buckets"), (), limits)
    if "num_batched_tokens_buckets" in inner or "num_seqs_buckets" in inner:
        limits = _limits({**d, **inner}, VLLM_LIMITS)
        tokens = inner.get("num_batched_tokens_buckets")
        prefill = (_ints(tokens, "num_batched_tokens_buckets") if tokens is not None else
                   _powers(128, limits.get("max_num_batched_tokens"), "num_batched_tokens_buckets"))
        seqs = inner.get("num_seqs_buckets")
        batch = (_ints(seqs, "num_seqs_buckets") if seqs is not None else
                 _powers(1, limits["max_num_seqs"], "num_seqs_buckets")
                 if "max_num_seqs" in limits else ())
        return ServerConfig("vllm-neuron", prefill, (), batch, limits)
    raise ValueError("no bucket keys found: expected num_batched_tokens_buckets / num_seqs_buckets "
                     "(vllm-neuron) or context_encoding_buckets / token_generation_buckets (nxdi)")


def _powers(low: int, high: int | None, key: str) -> tuple[int, ...]:
    """The documented default when a list is left out: powers of two from ``low`` up to
    ``high`` (the limit itself the last bucket)."""
    if high is None:
        raise ValueError(f"{key} is not set and neither is the limit its default derives from")
    out, b = [], low
    while b < high:
        out.append(b)
        b *= 2
    return tuple(out + [high])


def parse_config(text: str) -> ServerConfig:
    """A server config in any of the three forms (detected): JSON or a Python dict with
    ``additional_config``/``neuron_config`` (vllm-neuron; an NxDI ``neuron_config.json`` is
    nxdi), ``name=value, ...`` or ``NeuronConfig(...)`` with ``context_encoding_buckets`` (nxdi),
    ``64,128,256`` or ``nk.Buckets([...])`` (hf). ValueError names what could not be read."""
    if not isinstance(text, str):
        raise TypeError(f"parse_config takes the config's text, got {type(text).__name__}")
    if len(text) > MAX_CONFIG_CHARS or "\x00" in text:
        raise ValueError("the config is not a text config (binary, or over 1 MB)")
    body = text.strip()
    if not body:
        raise ValueError("the config is empty")
    if body.startswith("{"):
        try:
            data = json.loads(body)
        except RecursionError:
            raise ValueError("the config's JSON is nested too deeply to read") from None
        except ValueError:
            data = _literal(body)
        if not isinstance(data, dict):
            raise ValueError("the config's braces do not hold a mapping")
        return _from_mapping(data)
    if re.search(r"(context_encoding|token_generation)_buckets\s*=", body) or (
            "Buckets(" not in body and re.search(r"\w\s*=", body)):
        return _from_mapping(_keywords(body))
    match = re.search(r"Buckets\s*\(\s*(\[[^\]]*\])", body)
    raw = match.group(1) if match else body.strip("[]() \n")
    items = [s for s in re.split(r"[\s,]+", raw.strip("[]")) if s]
    if not items or not all(s.isdigit() for s in items):
        raise ValueError(f"cannot read {body[:80]!r} as a server config: give the vllm-neuron "
                         "JSON, the NxDI NeuronConfig keywords, or buckets such as 64,128,256")
    return ServerConfig("hf", _ints([int(s) for s in items], "buckets"))


def _literal(body: str) -> Any:
    try:
        return ast.literal_eval(body)
    except (ValueError, SyntaxError, RecursionError, MemoryError) as e:
        raise ValueError(f"cannot read the config as JSON or a Python literal: {e}") from None


def _keywords(body: str) -> dict[str, Any]:
    """``name=value, ...`` or ``NeuronConfig(name=value, ...)``: the literal keyword values."""
    call = body if re.match(r"^[\w.]+\s*\(", body) and body.endswith(")") else f"f({body})"
    try:
        node = ast.parse(call, mode="eval").body
    except (SyntaxError, RecursionError, MemoryError, ValueError) as e:
        raise ValueError(f"cannot read the config as keyword arguments: {e}") from None
    if not isinstance(node, ast.Call):
        raise ValueError("the config is not a list of name=value keyword arguments")
    out: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            continue
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            continue  # a non-literal value (torch.bfloat16, a variable): not a bucket key
    return out


@dataclass
class PhaseCheck:
    """One bucket list against the lengths it pads: requests per bucket, buckets never used,
    requests longer than the largest bucket, requests padded to >= FAR x their length."""

    key: str
    what: str
    buckets: list[int]
    used: dict[int, int]
    overflow: int
    longest: int
    far: int
    padding: int
    real: int

    @property
    def unused(self) -> list[int]:
        return [b for b in self.buckets if not self.used.get(b)]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "lengths": self.what, "buckets": self.buckets,
                "requests_per_bucket": {str(b): self.used.get(b, 0) for b in self.buckets},
                "unused": self.unused, "overflow": self.overflow, "longest": self.longest,
                "far": self.far, "padding_tokens": self.padding, "real_tokens": self.real}


def _phase(key: str, what: str, buckets: tuple[int, ...] | list[int],
           lengths: list[int]) -> PhaseCheck:
    bs = sorted(buckets)
    used: dict[int, int] = {}
    overflow = far = padding = real = 0
    for n in lengths:
        i = bisect_left(bs, n)
        if i == len(bs):
            overflow += 1
            continue
        used[bs[i]] = used.get(bs[i], 0) + 1
        padding += bs[i] - n
        real += n
        far += bs[i] >= FAR * n
    return PhaseCheck(key, what, bs, used, overflow, max(lengths, default=0), far, padding, real)


@dataclass
class CheckReport:
    """``check_config``'s answer: per phase what the config does with the traffic, the limits
    the traffic breaks, and the planned prefill buckets' graphs and padding beside the config's."""

    form: str
    requests: int
    phases: list[PhaseCheck]
    limits: list[str]
    planned: PhaseCheck

    def to_dict(self) -> dict[str, Any]:
        first = self.phases[0]
        return {"form": self.form, "requests": self.requests,
                "phases": [p.to_dict() for p in self.phases], "limits": self.limits,
                "planned": self.planned.to_dict(),
                "saves": {"graphs": len(first.buckets) - len(self.planned.buckets),
                          "padding_tokens": first.padding - self.planned.padding,
                          "overflow": first.overflow - self.planned.overflow}}

    def text(self) -> str:
        lines = [f"Config ({self.form}) against {self.requests} requests:"]
        for p in self.phases:
            share = 100 * p.padding / max(1, p.padding + p.real)
            lines.append(f"  {p.key} {p.buckets} ({p.what}):")
            lines.append("    requests per bucket: " + ", ".join(
                f"{b}: {p.used.get(b, 0)}" for b in p.buckets))
            lines.append(f"    unused buckets: {p.unused or 'none'}"
                         + (" (graphs compiled for no request)" if p.unused else ""))
            lines.append(f"    overflow: {p.overflow} requests longer than {p.buckets[-1]}"
                         + (f" (longest {p.longest})" if p.overflow else ""))
            lines.append(f"    far: {p.far} requests padded to {FAR}x their length or more; "
                         f"padding {p.padding} tokens, {share:.1f}% of the padded compute")
        lines += [f"  limit: {m}" for m in self.limits]
        d, first, plan = self.to_dict()["saves"], self.phases[0], self.planned
        lines.append(f"  planned {first.key} {plan.buckets}: {len(plan.buckets)} graphs "
                     f"(config {len(first.buckets)}), padding {plan.padding} tokens (config "
                     f"{first.padding}), overflow {plan.overflow} (config {first.overflow}); "
                     f"{_change(d['graphs'], 'graph')}, {_change(d['padding_tokens'], 'padded token')}")
        return "\n".join(lines)


def _change(saved: int, noun: str) -> str:
    """``saves 3 graphs`` / ``costs 1476898 padded tokens more`` / ``the same graphs``."""
    if saved == 0:
        return f"the same {noun}s"
    return f"saves {saved} {noun}s" if saved > 0 else f"costs {-saved} {noun}s more"


def check_config(prompt_lengths: list[int], total_lengths: list[int], config: ServerConfig,
                 planned: list[int]) -> CheckReport:
    """``config`` against the traffic: prefill buckets against prompt lengths, decode buckets
    (NxDI token generation) against prompt + output lengths, the server's length limits against
    both, and the planned prefill buckets beside the config's."""
    if len(prompt_lengths) != len(total_lengths):
        raise ValueError("prompt_lengths and total_lengths must be one entry per request")
    prompts, totals = list(prompt_lengths), list(total_lengths)
    names = {"hf": "buckets", "vllm-neuron": "num_batched_tokens_buckets",
             "nxdi": "context_encoding_buckets"}
    phases = [_phase(names.get(config.form, "buckets"), "prompt lengths", config.prefill,
                     prompts)]
    if config.decode:
        phases.append(_phase("token_generation_buckets", "prompt + output lengths",
                             config.decode, totals))
    limits = []
    for key, lengths, what in (("max_model_len", totals, "prompt + output"),
                               ("max_length", totals, "prompt + output"),
                               ("seq_len", totals, "prompt + output"),
                               ("max_context_length", prompts, "prompt"),
                               ("max_num_batched_tokens", prompts, "prompt")):
        cap = config.limits.get(key)
        over = sum(n > cap for n in lengths) if cap else 0
        if over:
            limits.append(f"{over} requests with {what} longer than {key}={cap}")
    planned_check = _phase(phases[0].key, "prompt lengths", _sorted(planned, "planned"), prompts)
    return CheckReport(config.form, len(prompts), phases, limits, planned_check)
