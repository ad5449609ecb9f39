"""An ensemble of restarts: the answer distributions of several trained models, averaged.

    p(a) = (1/S) Σ_s softmax(W_s u_s)(a)        logits = log p

Each member is a model of the same type and vocabulary (the restarts of one run, the best on
validation first). Attention is the first member's: an ensemble has no attention of its own, and
inspect shows the model the ensemble leans on most.

With a stopping rule, `halting` says whose hops these are:
- members: each member answers from the hop its own rule stops at, and the ensemble's hops and
  halting are the first member's;
- together: the ensemble stops at the first hop k where more than half of the members' rules
  say stop (Result.stops; at K if none), and averages every member's answer after hop k, so a
  member that would have stopped sooner alone reads on with the others, and one that would
  have read on stops with them.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from memnet.data import Batch
from memnet.models.result import Result

HALTINGS = ("members", "together")


def mean_distribution(logits: list[Tensor]) -> Tensor:
    """log of the mean of the members' softmax over the last dimension."""
    return torch.stack([x.log_softmax(-1) for x in logits]).logsumexp(0) - torch.log(torch.tensor(float(len(logits))))


class Ensemble(nn.Module):
    def __init__(self, members: list[nn.Module], halting: str = "members"):
        super().__init__()
        if halting not in HALTINGS:
            raise ValueError(f"halting: expected one of {', '.join(HALTINGS)}, found {halting!r}")
        self.members = nn.ModuleList(members)
        self.halting = halting
        for member in self.members:  # together: the ensemble's hops may go past a member's own
            if hasattr(member, "every_hop"):
                member.every_hop = halting == "together"

    @property
    def linear(self) -> bool:
        return self.members[0].linear

    def forward(self, batch: Batch) -> Result:
        results = [member(batch) for member in self.members]
        first = results[0]
        hop_logits = mean_distribution([r.hop_logits for r in results])  # (B, K, A)
        losses = [r.loss for r in results if r.loss is not None]
        loss = torch.stack(losses).mean() if losses else None
        if self.halting == "members" or first.stops is None:
            return first._replace(logits=mean_distribution([r.logits for r in results]), hop_logits=hop_logits,
                                  loss=loss)
        B, K, A = hop_logits.shape
        votes = torch.stack([r.stops for r in results]).float().mean(0)  # (B, K) share of members saying stop
        stops = (votes > 0.5) | (torch.arange(K, device=votes.device) == K - 1)  # (B, K)
        hops_used = stops.float().argmax(-1) + 1  # (B,) the first hop most members stop at
        halted = hops_used < K  # (B,) False: it went on to the last hop
        logits = hop_logits.gather(1, (hops_used - 1)[:, None, None].expand(B, 1, A))[:, 0]  # (B, A)
        attention = first.attention * (torch.arange(K, device=votes.device) < hops_used[:, None])[..., None]
        halt_probs = torch.stack([r.halt_probs for r in results]).mean(0)  # (B, K)
        return first._replace(logits=logits, attention=attention, hops_used=hops_used, halted=halted,
                              hop_logits=hop_logits, halt_probs=halt_probs, loss=loss, stops=stops)
