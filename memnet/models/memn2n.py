"""End-to-End Memory Network (Sukhbaatar, Szlam, Weston, Fergus 2015, arXiv:1503.08895), with
memnet's stopping rule and visited-memory masking: the reference model, in plain PyTorch.

The question is embedded as u^1 = Σ_j l_j · B q_j. Then, for hops k = 1..K:

    m_i = Σ_j l_j · A^k x_ij + T_A^k(i)     input memory of sentence i
    c_i = Σ_j l_j · C^k x_ij + T_C^k(i)     output memory of sentence i
    p_i = softmax_i(u^k · m_i)              attention; padding gets exactly 0
    o^k = Σ_i p_i c_i                       what hop k reads
    u^{k+1} = u^k + o^k                     adjacent tying:   A^{k+1} = C^k, B = A^1, W^T = C^K
            = H u^k + o^k                   layer-wise tying: A^k = A^1, C^k = C^1
    â_k = softmax(W u^{k+1})                the answer had the model stopped after hop k

l_j is the position encoding l_kj = (1 - j/J) - (k/d)(1 - 2j/J) of word j of J in embedding
dimension k of d (1 for bag of words). T(i) is the temporal encoding of a memory's age i (its
slot, see memnet.data; random noise ages memories at training time). An answer class's row of
W is the sum of its words' rows of C^K (a phrase such as 'n,e' is one word of its own). With
model.null_memory the softmax has one more entry, an empty memory of score 0 that reads nothing
(the paper's code has it in effect: its zero padding slots sit inside its softmax). During linear
start (the trainer sets `linear`) p_i = u^k · m_i, no softmax.

The parts (memnet/models/parts.py), each a config field or a few:
- Attention: the softmax, stick-breaking from the latest memory back, or a learned mix (attention).
- PointerInTime: a bias on hop k's scores per age difference from what hop k-1 read (relative_time).
- Masking: memnet's visited-memory masking (masking off, hard, soft, second).
- AnswerHead: what â_k reads (answer_from state, readout or question) and an answer module.
- Halting: memnet's stopping rule (stopping, halt_*), which also decides the answer loss.
question_table offset embeds the question by A^1 plus a table of its own from zero, that the
question alone trains (B = A^1 + B'). attention_supervision pulls hop k's scores toward the k-th
supporting fact (and the expected-loss halting toward their number).

This file is the model's definition: evaluation, inspection and the GPU train it as it is.
On the CPU the trainer may use a compiled kernel that computes the same numbers faster
(memnet/kernels, tested against this file).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memnet.config import MemN2NConfig
from memnet.data import Batch
from memnet.models.parts import NEVER, AnswerHead, Attention, Halting, Masking, PointerInTime
from memnet.models.result import Result


class MemN2N(nn.Module):
    has_linear_start = True  # the trainer may remove the attention softmax for the first epochs

    def __init__(self, cfg: MemN2NConfig, *, vocab_size: int, answer_words: list[list[int]], memory_size: int,
                 attention_supervision: float = 0.0):
        super().__init__()
        self.cfg, self.memory_size, self.supervision = cfg, memory_size, attention_supervision
        self.dim, self.hops, self.encoding, self.tying = cfg.dim, cfg.hops, cfg.encoding, cfg.tying
        self.linear = False  # linear start: no attention softmax (set by the trainer)
        # the attention of every hop, the hops after the one the rule stopped at too (set by an
        # ensemble that stops on its members' rules together: its hops need not be this member's)
        self.every_hop = False
        V, d = vocab_size, cfg.dim
        # adjacent: tables [A^1 = B, C^1 = A^2, ..., C^K = W^T]; layer-wise: [B, A, C, W^T]
        self.n_tables = cfg.hops + 1 if cfg.tying == "adjacent" else 4
        self.tables = nn.Parameter(torch.zeros(self.n_tables, V, d))  # (n_tables, V, d)
        self.question_table = nn.Parameter(torch.zeros(V, d)) if cfg.question_table == "offset" else None  # (V, d) B'
        self.temporal = nn.Parameter(torch.zeros(self.n_tables, memory_size, d)) if cfg.temporal else None  # T(i)
        self.H = nn.Parameter(torch.zeros(d, d)) if cfg.tying == "layerwise" else None  # (d, d)
        self.attention = Attention(cfg)
        self.pointer = PointerInTime(cfg) if cfg.relative_time else None
        self.masking = Masking(cfg)
        self.answer = AnswerHead(cfg, len(answer_words))
        self.halting = Halting(cfg)
        answer_bag = torch.zeros(len(answer_words), V)  # (A, V) the words of each answer class
        for a, words in enumerate(answer_words):
            for w in words:
                answer_bag[a, w] += 1.0
        self.register_buffer("answer_bag", answer_bag, persistent=False)
        self.register_buffer("e", torch.arange(1, d + 1) / d, persistent=False)  # (d,) e_k = k/d
        self.reset_parameters(torch.Generator().manual_seed(0))

    def reset_parameters(self, generator: torch.Generator, std: float = 0.1, temporal_zero: bool = False) -> None:
        """Weights from N(0, std), T(i) from zero with `temporal_zero`; every part as its config starts it."""
        V, d, n = self.tables.shape[1], self.dim, self.n_tables

        def normal(*shape: int) -> Tensor:
            return torch.randn(*shape, generator=generator) * std

        with torch.no_grad():  # drawn as (rows, tables * d), the layout the kernels keep
            self.tables.copy_(normal(V, n * d).view(V, n, d).transpose(0, 1))
            if self.question_table is not None:
                self.question_table.zero_()
            if self.temporal is not None:
                T = self.memory_size
                self.temporal.copy_(torch.zeros(n, T, d) if temporal_zero else normal(T, n * d).view(T, n, d).transpose(0, 1))
            if self.H is not None:
                self.H.copy_(normal(d, d))
        self.halting.reset_parameters(normal)
        self.masking.reset_parameters()
        self.attention.reset_parameters()
        if self.pointer is not None:
            self.pointer.reset_parameters()
        self.answer.reset_parameters(normal)

    def table(self, hop: int, role: str) -> int:
        """Which table hop `hop` (0-based) reads as A (memories m_i) or C (read-outs c_i)."""
        if self.tying == "adjacent":
            return hop if role == "A" else hop + 1
        return 1 if role == "A" else 2

    def weights(self, words: Tensor) -> Tensor:
        """l_kj of each word of sentences (..., J): (..., J, d); padding weighs 0."""
        real = (words != 0).float()  # (..., J)
        if self.encoding == "bow":
            return real[..., None].expand(*words.shape, self.dim)  # (..., J, d) l = 1
        j = real.cumsum(-1) / real.sum(-1, keepdim=True).clamp(min=1)  # (..., J) j/J
        return ((1 - j)[..., None] + self.e * (2 * j - 1)[..., None]) * real[..., None]  # (..., J, d) a_j + e_k c_j

    def embed(self, words: Tensor, l: Tensor, table: int, ages: Tensor | None = None) -> Tensor:
        """Sentences (..., J) of word ids with their weights l (..., J, d) -> (..., d):
        Σ_j l_j · E x_j (+ T(age) with ages (...))."""
        x = (l * self.tables[table][words]).sum(-2)  # (..., d)
        if ages is not None and self.temporal is not None:
            x = x + self.temporal[table][ages.clamp(max=self.memory_size - 1)]  # + T(i)
        return x

    def ask(self, query: Tensor) -> Tensor:
        """(B, d) u^1 = Σ_j l_j B q_j: B = A^1, or with question_table offset A^1 + B', the
        question's gradient into B' alone."""
        l_q = self.weights(query)
        if self.question_table is None:
            return self.embed(query, l_q, 0)
        return (l_q * self.question_table[query]).sum(-2) + (l_q * self.tables[0].detach()[query]).sum(-2)

    def forward(self, batch: Batch) -> Result:
        B, M, _ = batch.story.shape
        real = torch.arange(M, device=batch.story.device) < batch.length[:, None]  # (B, M) memories, not padding
        visited = torch.zeros_like(real)  # (B, M) memories an earlier hop chose
        question = u = self.ask(batch.query)  # (B, d) u^1
        l = self.weights(batch.story)  # (B, M, J, d)
        # each table applied to every memory once (adjacent tying: C^k is A^{k+1})
        memories = {t: self.embed(batch.story, l, t, batch.time)  # (B, M, d)
                    for t in sorted({self.table(k, role) for k in range(self.hops) for role in "AC"})}
        offsets = self.pointer.offsets(batch.time) if self.pointer is not None else None  # (B, M, M)
        states, reads, ps, scores = [], [], [], []
        for k in range(self.hops):
            m, c = memories[self.table(k, "A")], memories[self.table(k, "C")]  # (B, M, d) m_i, c_i
            score = torch.einsum("bmd,bd->bm", m, u)  # (B, M) u^k · m_i
            if self.pointer is not None and k > 0:
                score = score + self.pointer(u, ps[-1], offsets, k)
            score = score - self.masking.penalty(visited)
            allowed = self.masking.allowed(real, visited, k)  # (B, M)
            p = self.attention(score, allowed, k, self.linear)  # (B, M) p_i
            o = torch.einsum("bm,bmd->bd", p, c)  # (B, d) o^k = Σ_i p_i c_i
            u_next = (u @ self.H.T if self.H is not None else u) + o  # (B, d) u^{k+1}
            visited = self.masking.visit(visited, p, real)
            states.append(self.answer.state(question, o, u_next))
            reads.append(o), ps.append(p), scores.append(score.masked_fill(~allowed, NEVER))
            u = u_next
        states, reads = torch.stack(states, 1), torch.stack(reads, 1)  # (B, K, d) each
        W = self.answer_bag @ self.tables[-1]  # (A, d) W: the answer words' rows of C^K
        hop_logits = self.answer(states, W, question, reads)  # (B, K, A) â_k before the softmax
        stopped = self.halting(states, hop_logits, torch.stack(ps, 1), self.every_hop)
        loss = None
        if bool((batch.answer >= 0).any()):
            loss = self.loss(batch, states, hop_logits, stopped, torch.stack(scores, 1), W, question, reads)
        return Result(stopped.logits, stopped.attention, stopped.hops_used, stopped.halted, hop_logits,
                      stopped.halt_probs, loss, stops=stopped.stops)

    def loss(self, batch: Batch, states: Tensor, hop_logits: Tensor, stopped, scores: Tensor, W: Tensor,
             question: Tensor, reads: Tensor) -> Tensor:
        """Summed over the batch (not averaged), as the paper's recipe with lr 0.01 expects."""
        h = self.halting
        if not h.on:
            loss = F.cross_entropy(stopped.logits, batch.answer, ignore_index=-1, reduction="sum")
        else:  # right_last: each hop's logits again from inputs whose gradient is stopped
            apart = self.answer(states.detach(), W, question.detach(), reads.detach()) \
                if h.training_rule == "right_last" else None
            loss = h.loss(batch.answer, states, hop_logits, stopped, apart)
        if self.supervision > 0:
            loss = loss + self.supervision * self.supervised(batch, stopped.halt_probs, scores)
        return loss

    def supervised(self, batch: Batch, halt_probs: Tensor, scores: Tensor) -> Tensor:
        """Cross-entropy of hop k's scores (B, K, M; NEVER where it may not attend) toward the
        k-th supporting fact, where it may attend to it; with expected-loss halting, -log π at the
        number of supporting facts."""
        n = min(self.hops, batch.support.shape[1])
        target = batch.support[:, :n]  # (B, n) memory slot of fact k; -1: none or forgotten
        allowed = scores[:, :n] > NEVER / 2
        ok = (target >= 0) & allowed.gather(-1, target.clamp(min=0)[..., None])[..., 0]  # (B, n)
        ce = F.cross_entropy(scores[:, :n].reshape(-1, scores.shape[-1]), target.clamp(min=0).reshape(-1),
                             reduction="none").view(target.shape)  # (B, n)
        loss = (ce * ok).sum()
        if self.halting.on and self.halting.training_rule == "expected":
            want = (batch.n_support.clamp(1, self.hops) - 1)[:, None]  # (B, 1) the hop the facts need
            loss = loss - halt_probs.gather(1, want).clamp(min=1e-8).log().sum()
        return loss
