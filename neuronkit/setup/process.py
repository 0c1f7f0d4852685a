"""Which process this is in a distributed run: its rank and the world size (torchrun's
environment, else an initialised torch.distributed, else a single process)."""
from __future__ import annotations

import os

__all__ = ["default_rank", "world_size"]


def default_rank() -> int:
    """$RANK, else the torch.distributed rank when initialised, else 0."""
    if os.environ.get("RANK", "").isdigit():
        return int(os.environ["RANK"])
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    return 0


def world_size() -> int:
    """$WORLD_SIZE, else the torch.distributed world size when initialised, else 1."""
    if os.environ.get("WORLD_SIZE", "").isdigit():
        return int(os.environ["WORLD_SIZE"])
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return int(dist.get_world_size())
    return 1
