"""What ``nk.generate`` checks of its caller's arguments, and the :class:`CallSettings` every
batch's ``model.generate`` call shares: compile keywords, eos ids, the cache keyword; and
:func:`compile_config`, the public way to let ``model.generate`` compile on any device."""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from neuronkit.recorder.recorder import CompileRecorder
from neuronkit.setup.device import cpu_backend, detect
from neuronkit.workloads.static_cache import UnboundedCacheError

if TYPE_CHECKING:  # pragma: no cover
    from transformers import CompileConfig

__all__ = ["MANAGED_KWARGS", "CallSettings", "cache_keyword", "call_settings", "check_managed",
           "check_model_and_tokenizer", "check_progress", "check_prompts", "check_recorder",
           "compile_config", "compile_kwargs", "eos_ids", "max_positions", "token_ids"]

MANAGED_KWARGS = ("input_ids", "attention_mask", "cache", "past_key_values", "cache_implementation",
                  "max_length", "disable_compile", "num_return_sequences", "prefill_chunk_size")


def check_prompts(prompts: Any) -> list[str]:
    """One prompt or a list of them as a list of non-empty str, else a clear error."""
    if isinstance(prompts, str):
        prompts = [prompts]
    elif not isinstance(prompts, (list, tuple)):
        raise TypeError(f"prompts must be a str or a list of str, got {type(prompts).__name__}; "
                        "pass text, not token ids or tensors (generate tokenizes it)")
    if not prompts:
        raise ValueError("prompts is empty: pass at least one prompt")
    for i, p in enumerate(prompts):
        if not isinstance(p, str):
            raise TypeError(f"prompt {i} is a {type(p).__name__} ({p!r:.40}), not a str; "
                            "pass text, not token ids or tensors (generate tokenizes it)")
        if not p:
            raise ValueError(f"prompt {i} is an empty string: nothing to continue; drop it or "
                             "give it some text")
    return list(prompts)


def check_recorder(recorder: Any) -> None:
    """None or a :class:`~neuronkit.CompileRecorder`, else a clear error."""
    if recorder is None or isinstance(recorder, CompileRecorder):
        return
    hint = (f"; to write the events to {recorder!r}, pass "
            f"recorder=nk.CompileRecorder(log_path={recorder!r})"
            if isinstance(recorder, (str, os.PathLike)) else "")
    raise TypeError(f"recorder must be a neuronkit CompileRecorder or None (one is made for the "
                    f"call), got a {type(recorder).__name__}: {recorder!r:.60}{hint}. E.g. "
                    "`with nk.CompileRecorder() as rec: nk.generate(..., recorder=rec)`")


def _given(value: Any) -> str:
    """What a caller passed, for an error: ``None`` or ``a str: 'x'``."""
    return "None" if value is None else f"a {type(value).__name__}: {value!r:.60}"


def check_model_and_tokenizer(model: Any, tokenizer: Any) -> None:
    """A loaded causal LM (it has ``generate``, ``config`` and ``device``) and a tokenizer (it is
    called on text and has ``decode``), else a clear error: a name gets how to load it."""
    if not (callable(getattr(model, "generate", None)) and hasattr(model, "config")
            and hasattr(model, "device")):
        hint = (f"; load it first: nk.load_model({model!r})"
                if isinstance(model, (str, os.PathLike)) else "")
        raise TypeError(f"model must be a loaded transformers causal LM (a model with "
                        f".generate, e.g. nk.load_model(name) or "
                        f"AutoModelForCausalLM.from_pretrained(name)), got {_given(model)}{hint}")
    if not (callable(tokenizer) and callable(getattr(tokenizer, "decode", None))):
        hint = (f"; load it first: nk.load_tokenizer({tokenizer!r})"
                if isinstance(tokenizer, (str, os.PathLike)) else "")
        raise TypeError(f"tokenizer must be a tokenizer (e.g. nk.load_tokenizer(name) or "
                        f"AutoTokenizer.from_pretrained(name)), got {_given(tokenizer)}{hint}")


def check_progress(on_batch: Any, stop: Any) -> None:
    """``on_batch`` None or a callable, ``stop`` None or a ``threading.Event`` (anything with
    ``is_set()``), else a clear error."""
    if on_batch is not None and not callable(on_batch):
        raise TypeError(f"on_batch must be a callable (it is called with each batch's "
                        f"BatchProgress) or None, got {_given(on_batch)}")
    if stop is not None and not callable(getattr(stop, "is_set", None)):
        raise TypeError(f"stop must be a threading.Event (or anything with is_set()) or None, "
                        f"got {_given(stop)}; set the event to end the call before its next "
                        "batch")


def check_managed(generate_kwargs: dict) -> None:
    """An error for keywords that ``nk.generate`` sets itself."""
    clash = sorted(k for k in MANAGED_KWARGS if k in generate_kwargs)
    if clash:
        raise ValueError(f"generate() sets {clash} itself (static cache per bucket, one output per "
                         "prompt); use buckets=, max_new_tokens=, prefill= and compile=False instead")


def token_ids(tokenizer: Any, prompts: list[str]) -> list[list[int]]:
    """Each prompt's token ids (special tokens added); an error for a prompt with none."""
    ids = [list(x) for x in tokenizer(prompts, add_special_tokens=True)["input_ids"]]
    for i, x in enumerate(ids):
        if not x:
            raise ValueError(f"prompt {i} ({prompts[i]!r:.40}) has no tokens; give it some text")
    return ids


def max_positions(model: Any) -> int | None:
    """The positions the model's text config allows (None: not said, or not a positive int:
    XLNet's ``-1`` means no limit)."""
    n = getattr(model.config.get_text_config(decoder=True), "max_position_embeddings", None)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def cache_keyword(model: Any) -> str:
    """The keyword the model's forward takes its cache by; an ``UnboundedCacheError`` when it
    takes none (each step would re-run, and compile, the whole sequence so far)."""
    params = inspect.signature(model.forward).parameters
    for name in ("cache", "past_key_values"):
        if name in params:
            return name
    raise UnboundedCacheError(
        f"{type(model).__name__}: its forward takes neither cache nor past_key_values, so "
        f"nk.generate cannot give it a static cache: what it keeps between tokens (a state of "
        f"its own, or nothing, every token re-running the whole sequence) is not bounded by "
        f"buckets. Call model.generate directly (under a CompileRecorder to see what compiles)")


def eos_ids(model: Any, tokenizer: Any, kwargs: dict) -> set[int]:
    """The ids that end a row: the caller's ``eos_token_id``, else the model's, else the
    tokenizer's."""
    eos = kwargs.get("eos_token_id")
    if eos is None:
        eos = getattr(model.generation_config, "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    if eos is None:
        return set()
    return {int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])}


def compile_config(backend: str | Callable | None = None, *,
                   dynamic: bool = False) -> CompileConfig:
    """The ``transformers.CompileConfig`` transformers uses on Neuron (``mode="default"``,
    ``dynamic=False``), compiling ``generate()``'s forward on any device, the CPU included.

    ``backend``: a registered backend name (checked: an unknown one is a ValueError) or a
    callable; None: what ``nk.detect()`` picks here (``neuron`` on Neuron, the CPU backend of
    ``$NEURONKIT_CPU_BACKEND`` / ``eager`` on CPU, ``inductor`` on CUDA). Pass it as
    ``model.generate(..., cache_implementation="static", compile_config=nk.compile_config())``.
    """
    from transformers import CompileConfig

    if backend is None:
        backend = detect().compile_backend
    elif isinstance(backend, str):
        backend = cpu_backend(backend)  # any registered backend; an unknown name: ValueError
    elif not callable(backend):
        raise TypeError(f"backend must be a backend name, a callable or None, got {_given(backend)}")
    if not isinstance(dynamic, bool):
        raise TypeError(f"dynamic must be True or False, got {_given(dynamic)}")
    cc = CompileConfig(backend=backend, mode="default", dynamic=dynamic)
    # The one place neuronkit sets this private flag. transformers 5.24.0 reads it in
    # GenerationMixin._valid_auto_compile_criteria (transformers/generation/utils.py:2450-2451:
    # `valid_hardware = self.device.type in ["cuda", "xpu", "neuron", "tpu"] or
    # bool(generation_config.compile_config is not None and ..._compile_all_devices)`);
    # without it generate() compiles nothing on the CPU.
    cc._compile_all_devices = True
    return cc


def compile_kwargs(model: Any, compile: bool, backend: Any, kwargs: dict) -> tuple[dict, str | None]:
    """generate() keywords that switch compile on or off, and the backend name it will use
    (a caller's ``compile_config`` is taken out of ``kwargs``)."""
    if not compile:
        return {"disable_compile": True}, None
    if "compile_config" in kwargs:  # the caller's own config wins
        cc = kwargs.pop("compile_config")
        name = cc.backend if isinstance(cc.backend, str) else getattr(cc.backend, "__name__", "?")
        return {"compile_config": cc}, name
    kind = model.device.type
    if kind == "neuron" and backend is None:
        return {}, "neuron"     # transformers' default there: backend="neuron", dynamic=False
    if backend is None:
        backend = cpu_backend() if kind == "cpu" else "inductor"
    cc = compile_config(backend)  # validates the name
    backend = cc.backend
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", "custom")
    return {"compile_config": cc}, name


@dataclass(frozen=True)
class CallSettings:
    """What every batch's ``model.generate`` call shares."""

    pad_id: int
    eos: set[int]
    cache_kw: str                  # the keyword the model's forward takes its cache by
    kwargs: dict[str, Any]         # max_new_tokens, pad id, compile keywords, the caller's keywords
    logits_processor: list[Any]    # the caller's, run after the first-token clock
    compile: bool
    backend: str | None            # compile backend; None when compile=False


def call_settings(model: Any, tokenizer: Any, pad_id: int, max_new_tokens: int, compile: bool,
                  backend: Any, generate_kwargs: dict) -> CallSettings:
    """The settings of every batch's call (the caller's ``logits_processor`` and ``compile_config``
    are taken out of ``generate_kwargs``)."""
    processors = list(generate_kwargs.pop("logits_processor", None) or [])
    compile_kw, backend_name = compile_kwargs(model, compile, backend, generate_kwargs)
    return CallSettings(pad_id=pad_id, eos=eos_ids(model, tokenizer, generate_kwargs),
                        cache_kw=cache_keyword(model),
                        kwargs={"max_new_tokens": max_new_tokens, "pad_token_id": pad_id,
                                **compile_kw, **generate_kwargs},
                        logits_processor=processors, compile=compile, backend=backend_name)
