"""Writes ``sample_compile_log.jsonl``: the compile log notebook 6 replays, recorded here with the
current neuronkit (its log format version in the header): the embedded tiny model on CPU, the
``eager`` compile backend, five requests of growing prompt length sent one at a time with
``nk.generate(..., buckets=None)`` (no padding). Each new length is a new static-cache length,
so each request compiles a new prefill and a new decode graph: the replay shows the recompiles,
the dimension that changed and the advice. Nothing is forced: ``nk.generate`` fits torch's
recompile limit to its plan, so no limit is hit. Nothing here ran on Trainium.

    python notebooks/data/make_sample_log.py [OUT_FOLDER]     (default: this folder)
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# a source file's folder on the recording machine, up to the package: ".../site-packages/"
_MACHINE_FOLDER = re.compile(r"(?:/[\w.+-]+)+/(?:site|dist)-packages/")
LENGTHS = (8, 38, 68, 98, 128)   # prompt tokens of the five requests
MAX_NEW_TOKENS = 4

DESCRIPTION = ("Recorded on CPU, not Trainium: the embedded tiny model (eager backend), no "
               f"padding: {len(LENGTHS)} requests of growing prompt length "
               f"({', '.join(map(str, LENGTHS))} tokens) sent one at a time with "
               f"neuronkit.generate(..., buckets=None, max_new_tokens={MAX_NEW_TOKENS}). "
               "Written by notebooks/data/make_sample_log.py.")


def main(folder: Path = HERE) -> Path:
    import torch

    import neuronkit as nk
    from neuronkit.examples.text import text_of_tokens

    torch.compiler.reset()   # a fresh start: no graph of an earlier run counts
    path = nk.tiny_model()
    model = nk.load_model(path, device="cpu", dtype="float32")
    tok = nk.load_tokenizer(path)
    out = Path(folder) / "sample_compile_log.jsonl"
    out.unlink(missing_ok=True)
    with nk.CompileRecorder(out, device="cpu", backend="eager",
                            header={"description": DESCRIPTION}) as rec:
        for i, n in enumerate(LENGTHS):
            with rec.context(f"request {i}"):
                nk.generate(model, tok, [text_of_tokens(tok, n)], max_new_tokens=MAX_NEW_TOKENS,
                            buckets=None, backend="eager", recorder=rec)
    portable(out)
    print(f"wrote {out.name} ({len(nk.CompileLog.load(out).events)} events)")
    return out


def portable(path: Path) -> None:
    """The samples travel with the repository: cut the recording machine's folders from the file
    names in it (``/.../site-packages/transformers/...`` -> ``transformers/...``, this
    repository's folder -> a relative path). Nothing else changes."""
    text = _MACHINE_FOLDER.sub("", path.read_text(encoding="utf-8"))
    path.write_text(text.replace(f"{ROOT}/", ""), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
