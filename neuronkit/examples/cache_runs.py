"""One small graph compiled per run: the runs that ``neuronkit diff`` and ``neuronkit cache check``
compare in notebook 7 and docs/cli.md.

    neuronkit record --log-dir runs/1 -- python -m neuronkit.examples.cache_runs
    neuronkit record --log-dir runs/2 -- python -m neuronkit.examples.cache_runs   # loads
    TORCHINDUCTOR_FREEZING=1 neuronkit record --log-dir runs/3 -- \\
        python -m neuronkit.examples.cache_runs                                    # builds

It compiles a two-layer step of ``--width`` features with the machine's backend (``neuron`` on
Trainium; else ``inductor``, which keeps a persistent cache in ``TORCHINDUCTOR_CACHE_DIR``, not the
``eager`` backends, which cache nothing) and says where it ran.
"""
from __future__ import annotations

import argparse
from typing import Sequence

__all__ = ["main", "run"]


def run(width: int = 32, dtype: str = "float32", backend: str | None = None) -> str:
    """Compile and call the small graph once; returns ``"<device> / <backend>"``."""
    import torch

    from neuronkit.setup.device import detect

    report = detect()
    on_neuron = report.device == "neuron"
    backend = backend or ("neuron" if on_neuron else "inductor")
    torch.manual_seed(0)
    weight = torch.randn(width, width, dtype=getattr(torch, dtype))
    x = torch.randn(4, width, dtype=getattr(torch, dtype))
    if on_neuron:
        weight, x = weight.to("neuron"), x.to("neuron")

    def step(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x @ weight) @ weight.T + x

    torch.compile(step, backend=backend, dynamic=False)(x)
    return f"{report.device} / {backend}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neuronkit.examples.cache_runs",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=32, help="features (default 32)")
    parser.add_argument("--dtype", default="float32", help="float32 or bfloat16 (default float32)")
    parser.add_argument("--backend", default=None,
                        help="compile backend (default: neuron on Trainium, else inductor)")
    args = parser.parse_args(argv)
    print("compiled on", run(args.width, args.dtype, args.backend))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
