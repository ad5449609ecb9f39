"""An ensemble of restarts: the answer distributions of several trained models, averaged.

    p(a) = (1/S) Σ_s softmax(W_s u_s)(a)        logits = log p

Each member is a model of the same type and vocabulary (the restarts of one run, the best on
validation first). Attention, hops and halting are the first member's: an ensemble has no
attention of its own, and inspect shows the model the ensemble leans on most.
"""
from __future__ import annotations

import torch
from torch import nn

from memnet.data import Batch
from memnet.models.result import Result


class Ensemble(nn.Module):
    def __init__(self, members: list[nn.Module]):
        super().__init__()
        self.members = nn.ModuleList(members)

    @property
    def linear(self) -> bool:
        return self.members[0].linear

    def forward(self, batch: Batch) -> Result:
        results = [member(batch) for member in self.members]
        first = results[0]
        logits = torch.stack([r.logits.log_softmax(-1) for r in results]).logsumexp(0) - torch.log(
            torch.tensor(float(len(results))))  # (B, A) log of the mean distribution
        hop_logits = torch.stack([r.hop_logits.log_softmax(-1) for r in results]).logsumexp(0) - torch.log(
            torch.tensor(float(len(results))))  # (B, K, A)
        losses = [r.loss for r in results if r.loss is not None]
        loss = torch.stack(losses).mean() if losses else None
        return first._replace(logits=logits, hop_logits=hop_logits, loss=loss)
