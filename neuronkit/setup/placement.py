"""Placement checks: is every parameter and buffer of a model on the device it was loaded for?"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["PlacementReport", "PlacementWarning", "check_placement"]


class PlacementWarning(UserWarning):
    """Some parameters or buffers are not on the device the model was loaded for."""


@dataclass
class PlacementReport:
    """Where a model's parameters and buffers are, against where they should be."""

    device: str
    checked: int = 0
    stragglers: dict[str, str] = field(default_factory=dict)  # tensor name -> its device

    @property
    def ok(self) -> bool:
        return not self.stragglers

    def __str__(self) -> str:
        if self.ok:
            return f"placement ok: all {self.checked} parameters and buffers are on {self.device}"
        shown = [f"  {name} on {dev}" for name, dev in list(self.stragglers.items())[:10]]
        more = len(self.stragglers) - len(shown)
        if more:
            shown.append(f"  ... and {more} more")
        return (f"placement: {len(self.stragglers)} of {self.checked} parameters/buffers are not "
                f"on {self.device}:\n" + "\n".join(shown))


def _parse_device(device) -> tuple[str, int | None]:
    """("neuron", 1) from "neuron:1" or a torch.device; works without torch-neuronx installed."""
    kind, _, index = str(device).partition(":")
    if not kind or (index and not index.isdigit()):
        raise ValueError(f"not a device: {device!r}; use e.g. 'neuron', 'neuron:0', 'cpu'")
    return kind, int(index) if index else None


def _matches(actual, want: tuple[str, int | None]) -> bool:
    kind, index = want
    return actual.type == kind and (index is None or (actual.index or 0) == index)


def check_placement(model: torch.nn.Module, device: str | torch.device | None = None
                    ) -> PlacementReport:
    """Check that every parameter and buffer of ``model`` is on ``device``.

    ``device`` is a string or ``torch.device``; without an index (``"neuron"``) any index
    matches. ``None`` means the device holding most of the tensors.
    """
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    if device is None:
        counts: dict[str, int] = {}
        for _, t in tensors:
            counts[t.device.type] = counts.get(t.device.type, 0) + t.numel()
        device = max(counts, key=lambda kind: counts[kind]) if counts else "cpu"
    want = _parse_device(device)
    stragglers = {name: str(t.device) for name, t in tensors if not _matches(t.device, want)}
    return PlacementReport(device=str(device), checked=len(tensors), stragglers=stragglers)
