"""Train the embedded tiny Qwen3 so that greedy generation prints words, and write its files.

    python -m neuronkit.examples.train_tiny --out neuronkit/data/tiny-qwen3

Builds the byte-level BPE tokenizer (vocab 512, trained on ``neuronkit/data/corpus.txt``) and the
Qwen3 config (hidden 64, 2 layers, 4 heads, 2 kv heads, tied embeddings), then trains the model
with AdamW on next-token prediction over the corpus and the demo texts of
:mod:`neuronkit.examples.text`: seeded, on one CPU thread, about a minute. Some windows start
with a few random corpus words, so that a prompt from outside the corpus goes on with corpus
words too. No window holds the eos token, so generation runs to ``max_new_tokens``.

Float training is not bit-reproducible across CPUs, so the result is shipped as package data
(``neuronkit/data/tiny-qwen3``); ``nk.tiny_model()`` copies it.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronkit.examples.text import SWEEP_TEXT, TRAINING_TEXT, WORDS
from neuronkit.setup.models import quiet_progress
from neuronkit.setup.tiny import EOS, PAD

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

__all__ = ["corpus", "build_tokenizer", "build_config", "training_text", "train", "greedy",
           "save", "main", "PROMPTS"]

VOCAB_SIZE = 512
HIDDEN, INTERMEDIATE = 64, 256
STEPS, BATCH, WINDOW = 1200, 12, 128  # WINDOW covers the dashboard's longest sweep prompt
LR, WARMUP, WEIGHT_DECAY = 3e-3, 50, 0.01
SALAD, SALAD_WORDS = 0.3, 12  # share of windows that start with 1..SALAD_WORDS random words
SEED = 0
PROMPTS = ("Trainium compiles one graph for every input shape", "The old bridge",
           "Good bread needs", "The French Bread Law states", "a prompt that was never warmed up")
INFO_FILE = "neuronkit-training.json"


def corpus() -> list[str]:
    """The paragraphs of ``neuronkit/data/corpus.txt`` (the tokenizer's training text)."""
    text = resources.files("neuronkit").joinpath("data/corpus.txt").read_text(encoding="utf-8")
    return [p.strip() for p in text.split("\n\n") if p.strip()]


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer with ``VOCAB_SIZE`` tokens trained on :func:`corpus`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=[PAD, EOS],
                                  show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS,
                                   model_max_length=2048)


def build_config(tokenizer: Any) -> Qwen3Config:
    """The tiny Qwen3's config; pad, bos and eos ids from ``tokenizer``."""
    from transformers import Qwen3Config

    eos_id = tokenizer.eos_token_id
    return Qwen3Config(vocab_size=len(tokenizer), hidden_size=HIDDEN,
                       intermediate_size=INTERMEDIATE, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
                       tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
                       bos_token_id=eos_id, eos_token_id=eos_id)


def training_text() -> str:
    """The corpus, then the demo texts (the sweep text repeated, as the dashboard sends it)."""
    extra = [(SWEEP_TEXT * 3).strip(), TRAINING_TEXT, " ".join(WORDS)]
    return "\n\n".join(corpus() + extra)


class _Windows:
    """Training windows of ``length`` tokens: a slice of the text, or (with probability
    ``SALAD``) a few random words of the text followed by a slice starting at a word."""

    def __init__(self, tokenizer: Any, text: str, length: int, rng: random.Random) -> None:
        self.tokenizer, self.length, self.rng = tokenizer, length, rng
        self.ids: list[int] = tokenizer(text, verbose=False)["input_ids"]
        tokens = tokenizer.convert_ids_to_tokens(self.ids)
        self.word_starts = [i for i, t in enumerate(tokens[:-length]) if t.startswith("\u0120")]
        self.words = sorted(set(text.split()))

    def __call__(self) -> list[int]:
        rng, n = self.rng, self.length
        if rng.random() >= SALAD:
            start = rng.randrange(len(self.ids) - n)
            return self.ids[start:start + n]
        salad = " ".join(rng.choice(self.words) for _ in range(rng.randint(1, SALAD_WORDS)))
        start = rng.choice(self.word_starts)
        return (self.tokenizer(salad)["input_ids"] + self.ids[start:start + n])[:n]


def _lr(step: int, steps: int) -> float:
    """Linear warm-up, then cosine decay to zero."""
    return LR * min(1.0, (step + 1) / WARMUP) * 0.5 * (1 + math.cos(math.pi * step / steps))


def train(model: Qwen3ForCausalLM, tokenizer: Any, steps: int = STEPS, seed: int = SEED,
          log_every: int = 200) -> float:
    """Train ``model`` in place on :func:`training_text`; returns the last batch's loss."""
    import torch

    windows = _Windows(tokenizer, training_text(), WINDOW, random.Random(seed))
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.98),
                            weight_decay=WEIGHT_DECAY)
    model.train()
    loss = torch.tensor(float("nan"))
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = _lr(step, steps)
        batch = torch.tensor([windows() for _ in range(BATCH)])
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if log_every and (step % log_every == 0 or step == steps - 1):
            print(f"step {step:5d}  loss {loss.item():.4f}")
    model.eval()
    return float(loss.item())


def corpus_loss(model: Qwen3ForCausalLM, tokenizer: Any) -> float:
    """Mean next-token loss over the training text, in consecutive windows of ``WINDOW``."""
    import torch

    ids = torch.tensor(tokenizer(training_text(), verbose=False)["input_ids"])
    chunks = [ids[i:i + WINDOW] for i in range(0, len(ids) - 1, WINDOW)]
    with torch.no_grad():
        losses = [model(input_ids=c[None], labels=c[None]).loss.item() * (len(c) - 1)
                  for c in chunks if len(c) > 1]
    return sum(losses) / sum(len(c) - 1 for c in chunks if len(c) > 1)


def greedy(model: Any, tokenizer: Any, prompt: str, new_tokens: int = 16) -> str:
    """The greedy continuation of ``prompt`` (the new text only)."""
    batch = tokenizer(prompt, return_tensors="pt").to(model.device)
    out = model.generate(**batch, max_new_tokens=new_tokens, do_sample=False)
    text = tokenizer.decode(out[0, batch["input_ids"].shape[1]:], skip_special_tokens=True)
    assert isinstance(text, str)  # one sequence decodes to one string
    return text


def save(model: Qwen3ForCausalLM, tokenizer: Any, out: Path, info: dict[str, Any]) -> None:
    """Write weights (fp32 safetensors), configs, tokenizer and ``info`` into ``out``."""
    from transformers import GenerationConfig

    pad_id, eos_id = tokenizer.pad_token_id, tokenizer.eos_token_id
    model.generation_config = GenerationConfig(do_sample=False, pad_token_id=pad_id,
                                               eos_token_id=eos_id, bos_token_id=eos_id)
    out.mkdir(parents=True, exist_ok=True)
    with quiet_progress():
        model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Build, train, save; print the losses and a few greedy samples."""
    import torch
    import transformers
    from transformers import Qwen3ForCausalLM

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write the model to")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)

    torch.set_num_threads(1)  # the same reduction order on every run of a machine
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    tokenizer = build_tokenizer()
    # PreTrainedModel.to is @functools.wraps(Module.to): mypy takes the dtype for `self`
    model = Qwen3ForCausalLM(build_config(tokenizer)).to(torch.float32)
    print(f"{model.num_parameters():,} parameters, {args.steps} steps of {BATCH} x {WINDOW} "
          "tokens")
    began = time.perf_counter()
    last = train(model, tokenizer, args.steps, args.seed)
    seconds = time.perf_counter() - began
    full = corpus_loss(model, tokenizer)
    print(f"trained in {seconds:.0f} s: last batch loss {last:.4f}, loss over the text {full:.4f}")
    for prompt in PROMPTS:
        print(f"{prompt!r} -> {greedy(model, tokenizer, prompt)!r}")
    info = {"script": "python -m neuronkit.examples.train_tiny", "steps": args.steps,
            "seed": args.seed, "batch": BATCH, "window": WINDOW, "lr": LR,
            "last_batch_loss": round(last, 4), "text_loss": round(full, 4),
            "torch": torch.__version__, "transformers": transformers.__version__}
    save(model, tokenizer, args.out, info)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
