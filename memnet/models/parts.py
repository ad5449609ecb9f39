"""The parts a memory network is made of (memnet/models/memn2n.py), each with one contract.

    Attention      scores (B, M) of one hop -> its attention p (B, M); padding and blocked memories get 0
    PointerInTime  what the last hop read -> a bias on this hop's scores, per age difference
    Masking        which memories earlier hops chose: blocked (hard), or their scores lowered (soft)
    AnswerHead     each hop's state -> its answer logits â_k (B, K, A)
    Halting        each hop's state and answer -> where the stopping rule stops, and its loss

Each takes the model's config (memnet.config.MemN2NConfig) and reads only its own fields;
tests/test_parts.py tests each alone.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memnet.config import MemN2NConfig

NEVER = -1e30  # a score whose exp() is exactly 0


class Attention(nn.Module):
    """p_i from hop k's scores over the memories it may attend to.

    softmax:  p = softmax(score), with the null memory (one more entry of score 0 that reads
              nothing) where model.null_memory is set; during linear start p = score itself.
    stick:    stick-breaking from slot 0, the most recent memory, back: p_i = β_i Π_{j<i} (1 - β_j),
              β = σ(score), what is left reading nothing: a hop takes the latest memory that matches.
    mixed:    σ(g_k) stick + (1 - σ(g_k)) softmax, a learned gate g_k per hop from model.stick_init.
    """

    def __init__(self, cfg: MemN2NConfig):
        super().__init__()
        self.kind, self.null, self.stick_init = cfg.attention, cfg.null_memory, cfg.stick_init
        self.gate = nn.Parameter(torch.zeros(cfg.hops)) if self.kind == "mixed" else None  # (K,) g_k

    def reset_parameters(self) -> None:
        if self.gate is not None:
            with torch.no_grad():
                self.gate.fill_(self.stick_init)

    def forward(self, score: Tensor, allowed: Tensor, hop: int, linear: bool = False) -> Tensor:
        score = score.masked_fill(~allowed, NEVER)  # (B, M)
        if self.kind != "softmax":  # log p_i = log σ(s_i) + Σ_{j < i} log(1 - σ(s_j))
            rest = F.logsigmoid(-score)  # (B, M) log(1 - β_j): 0 where not allowed
            stick = (F.logsigmoid(score) + rest.cumsum(-1) - rest).exp()  # (B, M)
            if self.kind == "stick":
                return stick.masked_fill(~allowed, 0.0)
        if linear:
            p = score
        elif self.null:  # one more entry with score 0, which reads nothing
            p = torch.cat([torch.zeros_like(score[:, :1]), score], -1).softmax(-1)[:, 1:]  # (B, M)
        else:
            p = score.softmax(-1)  # (B, M)
        if self.gate is not None:
            share = torch.sigmoid(self.gate[hop])
            p = share * stick + (1 - share) * p
        return p.masked_fill(~allowed, 0.0)  # nothing allowed: all 0


class PointerInTime(nn.Module):
    """A pointer in time (model.relative_time D): hop k > 1's score of memory i adds
    Σ_j p^{k-1}_j w^k[clip(age_i - age_j, -D, D)], a learned weight per age difference from what the
    last hop read, so a hop can ask for "the memory just before that one", which T(i), a weight per
    absolute age, cannot say. With model.relative_query the weights also read the hop's state,
    w^k + r^k u^k, so what was read chooses the direction. Both start at zero."""

    def __init__(self, cfg: MemN2NConfig):
        super().__init__()
        D, K = cfg.relative_time, cfg.hops
        self.span = D
        self.w = nn.Parameter(torch.zeros(K - 1, 2 * D + 1))  # (K-1, 2D+1) row k - 2: w^k
        self.r = nn.Parameter(torch.zeros(K - 1, 2 * D + 1, cfg.dim)) if cfg.relative_query else None  # (K-1, 2D+1, d)

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.w.zero_()
            if self.r is not None:
                self.r.zero_()

    def offsets(self, time: Tensor) -> Tensor:
        """(B, M, M): the index into w^k of age_i - age_j, from the memories' ages (B, M)."""
        return (time[:, :, None] - time[:, None, :]).clamp(-self.span, self.span) + self.span

    def forward(self, u: Tensor, before: Tensor, offsets: Tensor, hop: int) -> Tensor:
        """(B, M): hop `hop`'s (0-based, > 0) bias on each memory's score, from its state u (B, d) and
        the last hop's attention `before` (B, M)."""
        w = self.w[hop - 1].expand(u.shape[0], -1)  # (B, 2D+1) w^k
        if self.r is not None:
            w = w + u @ self.r[hop - 1].T  # + r^k u^k
        return torch.einsum("bj,bij->bi", before, w.gather(1, offsets.flatten(1)).view(offsets.shape))


class Masking(nn.Module):
    """Visited-memory masking: hop k may not return to a memory an earlier hop chose (its argmax).
    off; hard: those memories leave the softmax; soft: their scores drop by a learned e^x (x from
    model.mask_init); second: hop 2 may not attend to hop 1's choice, later hops as soft."""

    def __init__(self, cfg: MemN2NConfig):
        super().__init__()
        self.kind, self.mask_init = cfg.masking, cfg.mask_init
        self.log_penalty = nn.Parameter(torch.zeros(1)) if self.kind in ("soft", "second") else None  # (1,) x

    def reset_parameters(self) -> None:
        if self.log_penalty is not None:
            with torch.no_grad():
                self.log_penalty.fill_(self.mask_init)

    def penalty(self, visited: Tensor) -> Tensor | float:
        """What a hop's scores (B, M) lose: e^x on each visited memory (0 without soft masking)."""
        return self.log_penalty.exp() * visited if self.log_penalty is not None else 0.0

    def allowed(self, real: Tensor, visited: Tensor, hop: int) -> Tensor:
        """(B, M) the memories hop `hop` (0-based) may attend to."""
        blocked = self.kind == "hard" or (hop == 1 and self.kind == "second")
        return real & ~visited if blocked else real

    def visit(self, visited: Tensor, p: Tensor, real: Tensor) -> Tensor:
        """visited with this hop's choice added."""
        return visited | (chosen(p) & real) if self.kind != "off" else visited


def chosen(p: Tensor) -> Tensor:
    """(B, M) bool: each row's argmax (the first of equals), where it is above 0."""
    best = p.argmax(-1, keepdim=True)  # (B, 1)
    return torch.zeros_like(p, dtype=torch.bool).scatter(-1, best, p.gather(-1, best) > 0)


class AnswerHead(nn.Module):
    """Each hop's answer logits: â_k = softmax(W s_k (+ module_k)), W the answer words' rows of C^K
    (the paper's W^T = C^K; given by the model), s_k what model.answer_from names: state u^{k+1}
    (the paper), readout o^k, or question u^1 + o^k. With model.answer_hidden H, an answer module
    adds V relu(U [u^1; o^k] + b) (V from zero): a nonlinear answer from the question and what hop
    k read."""

    def __init__(self, cfg: MemN2NConfig, n_answers: int):
        super().__init__()
        self.source, self.hidden, d = cfg.answer_from, cfg.answer_hidden, cfg.dim
        self.U = nn.Parameter(torch.zeros(2 * d, self.hidden)) if self.hidden else None  # (2d, H)
        self.b = nn.Parameter(torch.zeros(self.hidden)) if self.hidden else None  # (H,)
        self.V = nn.Parameter(torch.zeros(self.hidden, n_answers)) if self.hidden else None  # (H, A)

    def reset_parameters(self, normal) -> None:
        if self.hidden:
            with torch.no_grad():
                self.U.copy_(normal(*self.U.shape))
                self.b.zero_(), self.V.zero_()

    def state(self, question: Tensor, o: Tensor, u_next: Tensor) -> Tensor:
        """(B, d) s_k, what hop k's answer reads."""
        return o if self.source == "readout" else question + o if self.source == "question" else u_next

    def forward(self, states: Tensor, W: Tensor, question: Tensor, reads: Tensor) -> Tensor:
        """(B, K, A): each hop's logits from its state (B, K, d) through W (A, d), and the module's
        from the question (B, d) and the read-outs (B, K, d)."""
        logits = states @ W.T  # (B, K, A)
        if self.hidden:
            B, K, d = reads.shape
            x = torch.cat([question[:, None].expand(B, K, d), reads], -1)  # (B, K, 2d)
            logits = logits + torch.relu(x @ self.U + self.b) @ self.V
        return logits


class Stopped(NamedTuple):
    logits: Tensor  # (B, A) the answer of the hop it stopped at
    attention: Tensor  # (B, K, M) zeros for the hops not taken
    hops_used: Tensor  # (B,)
    halted: Tensor  # (B,) bool: the halting unit stopped it
    halt_probs: Tensor  # (B, K) π_k
    stops: Tensor | None  # (B, K) bool: would it stop after hop k


class Halting(nn.Module):
    """The stopping rule: a halting unit h_k = σ(w_h · s_k + b_h) after each hop (h_K = 1), the
    halting distribution π_k = h_k Π_{j<k} (1 - h_j); inference stops at the first hop whose h_k
    passes model.halt_threshold (and, with model.halt_confidence τ, whose answer is at least τ
    sure), or at K. How it learns (model.halt_training):
    expected:   the expected answer loss Σ_k π_k CE(â_k) plus halt_cost Σ_k π_k (k - 1)
                (PonderNet, Banino et al. 2021, in spirit);
    right:      h_k learns by BCE whether hop k's answer is right, on the states with their gradient
                stopped (it steers nothing); the answer loss trains the answer the rule gives at
                weight 1, every other hop's at early_answers (hop 1's at early_answers_hop1);
    right_last: as right, the last hop's answer at 1 too, the other answers from their states with
                the gradient stopped (they train the answer layer, and steer no hop).
    Without model.stopping every question takes all K hops."""

    def __init__(self, cfg: MemN2NConfig):
        super().__init__()
        self.on, self.training_rule, self.threshold = cfg.stopping, cfg.halt_training, cfg.halt_threshold
        self.confidence, self.cost, self.init = cfg.halt_confidence, cfg.halt_cost, cfg.halt_init
        self.early = cfg.early_answers
        self.early_hop1 = cfg.early_answers if cfg.early_answers_hop1 < 0 else cfg.early_answers_hop1
        self.w = nn.Parameter(torch.zeros(cfg.dim)) if self.on else None  # (d,) w_h
        self.b = nn.Parameter(torch.zeros(1)) if self.on else None  # (1,) b_h

    def reset_parameters(self, normal) -> None:
        if self.on:
            with torch.no_grad():
                self.w.copy_(normal(self.w.shape[0]))
                self.b.fill_(self.init)

    def forward(self, states: Tensor, hop_logits: Tensor, attention: Tensor, every_hop: bool = False) -> Stopped:
        """Where each question stops, from the states (B, K, d) and answers (B, K, A); the attention
        of the hops not taken is zeroed unless `every_hop`."""
        B, K, A = hop_logits.shape
        arange_k = torch.arange(K, device=states.device)  # (K,)
        if not self.on:
            halt_probs = (arange_k == K - 1).float().expand(B, K)  # (B, K)
            hops_used = torch.full((B,), K, device=states.device)  # (B,)
            return Stopped(hop_logits[:, -1], attention, hops_used, torch.zeros_like(hops_used, dtype=torch.bool),
                           halt_probs, None)
        h_raw = torch.sigmoid(states @ self.w + self.b)  # (B, K) h_k
        h = torch.where(arange_k == K - 1, 1.0, h_raw)  # (B, K) h_K = 1
        go_on = torch.cumprod(torch.cat([torch.ones_like(h[:, :1]), 1 - h[:, :-1]], -1), -1)  # (B, K) Π_{j<k}(1-h_j)
        halt_probs = h * go_on  # (B, K) π_k
        stop = h_raw > self.threshold  # (B, K)
        if self.confidence and not self.training:  # at inference, where the hop's answer is this sure too
            stop = stop & (hop_logits.softmax(-1).amax(-1) >= self.confidence)
        stop = stop | (arange_k == K - 1)
        hops_used = stop.float().argmax(-1) + 1  # (B,) the first hop that says stop
        halted = h_raw.gather(1, (hops_used - 1)[:, None])[:, 0] > self.threshold  # (B,)
        if not every_hop:
            attention = attention * (arange_k < hops_used[:, None])[..., None]  # hops not taken: zeros
        logits = hop_logits.gather(1, (hops_used - 1)[:, None, None].expand(B, 1, A))[:, 0]  # (B, A)
        return Stopped(logits, attention, hops_used, halted, halt_probs, stop)

    def loss(self, answer: Tensor, states: Tensor, hop_logits: Tensor, stopped: Stopped,
             apart: Tensor | None) -> Tensor:
        """The answer loss under the stopping rule, summed over the batch. answer (B,), -1: none;
        apart (B, K, A): right_last's logits from states whose gradient is stopped."""
        B, K, A = hop_logits.shape
        targets = answer[:, None].expand(B, K).reshape(-1)
        ce = F.cross_entropy(hop_logits.reshape(-1, A), targets, ignore_index=-1, reduction="none").view(B, K)
        if self.training_rule == "expected":
            extra = torch.arange(K, device=ce.device, dtype=ce.dtype)  # (K,) hops beyond the first
            return (stopped.halt_probs * (ce + self.cost * extra)).sum()
        given = torch.arange(K, device=ce.device) == (stopped.hops_used - 1)[:, None]  # (B, K) the hop answered from
        if apart is not None:  # right_last: the last hop's at 1 too, the others' gradient reaching no hop
            given = given | (torch.arange(K, device=ce.device) == K - 1)
            ce = torch.where(given, ce, F.cross_entropy(apart.reshape(-1, A), targets, ignore_index=-1,
                                                        reduction="none").view(B, K))
        early = torch.full((K,), self.early, device=ce.device, dtype=ce.dtype)
        early[0] = self.early_hop1
        weight = torch.where(given, 1.0, early)  # (B, K)
        return (ce * weight).sum() + self.right(answer, states, hop_logits)

    def right(self, answer: Tensor, states: Tensor, hop_logits: Tensor) -> Tensor:
        """Σ_{k<K} BCE(h_k, [argmax â_k = answer]), h_k from the states with their gradient
        stopped: the halting unit learns whether each hop's answer is right and steers nothing."""
        K = states.shape[1]
        z = states[:, :K - 1].detach() @ self.w + self.b  # (B, K-1)
        right = (hop_logits[:, :K - 1].argmax(-1) == answer[:, None]).float()  # (B, K-1)
        keep = (answer >= 0)[:, None].float()
        return (F.binary_cross_entropy_with_logits(z, right, reduction="none") * keep).sum()
