"""The smallest model a Trainer trains, shared by the training and recording tests."""
from __future__ import annotations

import torch


class TinyRegression(torch.nn.Module):
    """A loss from one linear layer over ``n_inputs`` features."""

    def __init__(self, n_inputs: int = 8) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(n_inputs, 1)

    def forward(self, inputs, labels=None):
        out = self.linear(inputs).squeeze(-1)
        return {"loss": ((out - labels) ** 2).mean(), "logits": out}
