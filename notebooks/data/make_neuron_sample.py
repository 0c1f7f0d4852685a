"""Writes ``sample_neuron_log.jsonl``: a SYNTHETIC compile log with the fields only a Trainium run
fills in (NEFF build seconds, NEFF cache state, eager-op kernels), for the notebooks and the
dashboard's replay. Nothing here ran on Neuron: the tiny model runs on CPU under the test fake of
torch-neuronx (``tests/neuron_fake``), whose NEFF and kernel seconds are planned numbers.
Generation runs with ``prefill="eager"`` (transformers' own prefill, whose aten ops native Neuron
runs eager, compiling a kernel per op and shape), so the log holds decode graphs and kernel events.

    python notebooks/data/make_neuron_sample.py [OUT_FOLDER]     (default: this folder)
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "tests")]

DESCRIPTION = ("SYNTHETIC sample, not a Trainium measurement: the embedded tiny model on CPU under "
               "neuronkit's test fake of native torch-neuronx, 4 prompts of growing length without "
               "padding. The NEFF build seconds (60-120 s), cache states and eager-kernel seconds "
               "are planned by the fake to show the fields a Trainium run fills in.")


def main(folder: Path = HERE) -> Path:
    import torch
    from make_sample_log import portable

    import neuronkit as nk
    from neuron_fake import installed_fake

    torch.compiler.reset()   # a fresh start: no graph of an earlier run counts
    path = nk.tiny_model()
    model = nk.load_model(path, device="cpu", dtype="float32")
    tok = nk.load_tokenizer(path)
    prompts = ["hi", "the compiler builds", "the compiler builds one graph for every shape",
               "hi"]
    out = Path(folder) / "sample_neuron_log.jsonl"
    with tempfile.TemporaryDirectory() as tmp, installed_fake(build_type="DEV") as fake:
        @torch.compiler.disable
        def prefill_kernels(module, args, kwargs):  # the eager ops native Neuron runs to prefill
            ids = kwargs.get("input_ids")
            if ids is not None and ids.shape[1] > 1:
                fake.run_eager_op("aten::embedding", model.model.embed_tokens.weight, ids)
                fake.run_eager_op("aten::mul.Tensor", ids, 2.0)
        handle = model.register_forward_pre_hook(prefill_kernels, with_kwargs=True)
        plans = [("compiled", 3.1), ("compiled", 2.4), ("compiled", 96.0),    # prompt 1
                 ("compiled", 2.8), ("compiled", 2.2), ("disk_hit", 0.0),     # prompt 2
                 ("compiled", 3.3), ("compiled", 2.6), ("compiled", 118.0)]   # prompt 3
        for outcome, seconds in plans:
            fake.plan(outcome, duration_s=seconds)
        rec = nk.CompileRecorder(Path(tmp) / "log.jsonl", device="neuron", backend="neuron")
        with rec:
            for i, prompt in enumerate(prompts):
                with rec.context(f"request {i}"):
                    # prefill="eager": transformers' own prefill, whose ops run eager and
                    # compile kernels on native Neuron (the hook above); decode is one graph
                    nk.generate(model, tok, [prompt], max_new_tokens=4, buckets=None,
                                backend="neuron", recorder=rec, prefill="eager")
        handle.remove()
        log = nk.CompileLog.load(Path(tmp) / "log.jsonl")
    log.header.update(description=DESCRIPTION, synthetic=True,
                      torch_neuronx="fake (tests/neuron_fake)")
    # the fake's NEFF builds take no real time; a real run waits for them at its first host read
    log.wall_time_s = round(log.compile_share() * log.wall_time_s + 40.0, 1) if log.wall_time_s else None
    log.save(out)  # written whole: the updates are folded into the events
    portable(out)
    print(f"wrote {out} ({len(log.events)} events)")
    return out


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
