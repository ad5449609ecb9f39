"""End-to-End Memory Network (Sukhbaatar, Szlam, Weston, Fergus 2015, arXiv:1503.08895),
with memnet's stopping rule and visited-memory masking.

The question is embedded as u^1 = Σ_j l_j · B q_j. Then, for hops k = 1..K:

    m_i = Σ_j l_j · A^k x_ij + T_A^k(i)     input memory of sentence i
    c_i = Σ_j l_j · C^k x_ij + T_C^k(i)     output memory of sentence i
    p_i = softmax_i(u^k · m_i)              attention; padding gets exactly 0
    o   = Σ_i p_i c_i
    u^{k+1} = u^k + o                       adjacent tying:   A^{k+1} = C^k, B = A^1, W^T = C^K
            = H u^k + o                     layer-wise tying: A^k = A^1, C^k = C^1
    â_k = softmax(W u^{k+1})                the answer had the model stopped after hop k

l_j is the position encoding l_kj = (1 - j/J) - (k/d)(1 - 2j/J) (1 for bag of words). T(i) is
the temporal encoding of a memory's age i (slot i, see memnet.data). Answer classes are
answer strings; a class's row of W is the sum of its words' rows, so single-word answers
are exactly the paper's softmax over the vocabulary.

memnet's ideas, each a config switch:
- stopping: a halting unit h_k = σ(w_h · u^{k+1} + b_h) gives the halting distribution
  π_k = h_k Π_{j<k} (1 - h_j) (h_K = 1). Training minimises the expected answer loss
  Σ_k π_k CE(â_k) plus halt_cost · Σ_k π_k (k - 1); inference stops at the first hop whose
  h_k passes halt_threshold, or at K (PonderNet, Banino et al. 2021, in spirit).
- masking: hop k cannot attend to a memory an earlier hop chose (its argmax): `hard` removes
  those memories from the softmax, `soft` lowers their scores by a learned penalty.

Speed shapes the code: a sentence embedding under position encoding is rank 2,
Σ_j l_kj A x_j = (Σ_j a_j A x_j) + e_k (Σ_j c_j A x_j) with a_j = 1 - j/J, c_j = 2j/J - 1,
e_k = k/d, so all memories of all hops and the question come from ONE matrix product of
weighted bag-of-words rows with the stacked tables [A^1, C^1 = A^2, ..., C^K]; T(i) is
gathered from a table stacked the same way. Every parameter has a leading seed dimension S,
so restarts train side by side as one model, each seed with its own initialisation.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memnet.config import ModelConfig
from memnet.data import Batch
from memnet.errors import MemnetError


class Result(NamedTuple):
    """What every model returns. Shapes are for a plain batch and a one-seed model; a batch or
    model with S seeds puts S in front of each (the trainer's case)."""

    logits: Tensor  # (B, A) answer at the hop where the model stopped
    attention: Tensor  # (B, K, M) per-hop attention; zeros for hops not taken
    hops_used: Tensor  # (B,) long in 1..K
    halted: Tensor  # (B,) bool: True = the halting unit stopped it, False = it reached K hops
    hop_logits: Tensor  # (B, K, A) â_k: the answer had it stopped after hop k
    halt_probs: Tensor  # (B, K) π_k, the halting distribution (one-hot at K without stopping)
    loss: Tensor | None  # scalar: summed over questions and seeds; None without answers


HALT_REASONS = ("max hops", "halted")  # indexed by Result.halted


class MemN2N(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int, n_answers: int, *, answer_words: list[list[int]],
                 memory_size: int = 50, seeds: int = 1, attention_supervision: float = 0.0):
        super().__init__()
        assert cfg.encoding in ("bow", "pe"), f"model.encoding: expected bow or pe, found {cfg.encoding!r}"
        assert cfg.tying in ("adjacent", "layerwise"), f"model.tying: expected adjacent or layerwise, found {cfg.tying!r}"
        assert cfg.masking in ("off", "hard", "soft"), f"model.masking: expected off, hard or soft, found {cfg.masking!r}"
        assert len(answer_words) == n_answers
        self.cfg, self.seeds, self.memory_size = cfg, seeds, memory_size
        self.attention_supervision = attention_supervision
        self.linear = False  # linear start: the trainer removes the attention softmax for the first epochs
        S, d, K = seeds, cfg.dim, cfg.hops
        # adjacent: tables [A^1 = B, C^1 = A^2, ..., C^K = W^T]; layer-wise: [B, A, C, W^T]
        self.n_tables = K + 1 if cfg.tying == "adjacent" else 4
        self.emb = nn.Parameter(torch.empty(S, vocab_size, self.n_tables * d))  # (S, V, tables*d) word rows
        if cfg.temporal:
            self.temporal = nn.Parameter(torch.empty(S, memory_size, self.n_tables * d))  # (S, T, tables*d) T(i)
        if cfg.tying == "layerwise":
            self.H = nn.Parameter(torch.empty(S, d, d))  # (S, d, d)
        if cfg.stopping:
            self.halt_w = nn.Parameter(torch.empty(S, d))  # (S, d)
            self.halt_b = nn.Parameter(torch.empty(S))  # (S,)
        if cfg.masking == "soft":
            self.log_penalty = nn.Parameter(torch.empty(S))  # (S,) visited memories' scores drop by e^x
        answer_bag = torch.zeros(n_answers, vocab_size)  # (A, V) the words of each answer class
        for a, words in enumerate(answer_words):
            for w in words:
                answer_bag[a, w] += 1.0
        self.register_buffer("answer_bag", answer_bag, persistent=False)
        e = torch.arange(1, d + 1) / d  # (d,) e_k = k/d
        self.register_buffer("e_tables", e.repeat(self.n_tables), persistent=False)  # (tables*d,)
        # a_j = 1 - j/J and c_j = 2j/J - 1 as base + slope * (j/J)
        self.register_buffer("pe_base", torch.tensor([[1.0], [-1.0]]), persistent=False)  # (2, 1)
        self.register_buffer("pe_slope", torch.tensor([[-1.0], [2.0]]), persistent=False)  # (2, 1)
        self.reset_parameters([torch.Generator().manual_seed(s) for s in range(S)])

    def reset_parameters(self, generators: list[torch.Generator]) -> None:
        """Draw every seed's parameters from its own generator: seed s trains as if alone."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                for s, g in enumerate(generators):
                    if name == "halt_b":  # start by taking every hop: halting must be learnt
                        p[s].fill_(-2.0)
                    elif name == "log_penalty":
                        p[s].zero_()
                    else:
                        p[s].copy_(torch.randn(p.shape[1:], generator=g) * self.cfg.init_std)

    def _table(self, k: int, role: str) -> int:
        """Which table hop k (0-based) reads as A or C."""
        if self.cfg.tying == "adjacent":
            return k if role == "A" else k + 1
        return 1 if role == "A" else 2

    def _bags(self, words: Tensor) -> Tensor:
        """Weighted bags of words (..., J) -> (..., C, V): channel 0 holds a_j = 1 - j/J, channel 1
        c_j = 2j/J - 1 (bag of words: channel 0 only, weight 1). No gradient flows through it."""
        real = words != 0  # (..., J)
        r = torch.arange(1, words.shape[-1] + 1, device=words.device) / real.sum(-1, keepdim=True).clamp(min=1)  # (..., J) j/J
        if self.cfg.encoding == "pe":
            weights = (self.pe_base + self.pe_slope * r[..., None, :]) * real[..., None, :]  # (..., 2, J) a_j, c_j; padding weighs 0
        else:
            weights = real[..., None, :].float()  # (..., 1, J)
        bag = words.new_zeros(*words.shape[:-1], weights.shape[-2], self.emb.shape[1], dtype=torch.float)
        return bag.scatter_add_(-1, words[..., None, :].expand_as(weights), weights)  # (..., C, V)

    def forward(self, batch: Batch) -> Result:
        plain = batch.story.dim() == 3
        if plain:  # the same questions for every seed
            batch = batch.index(None)  # fields (1, B, ...)
        cfg, S, K, d = self.cfg, self.seeds, self.cfg.hops, self.cfg.dim
        s, B, M, J = batch.story.shape
        L = max(J, batch.query.shape[-1])

        # every sentence and the question (as slot M) through one matrix product with all tables:
        # [bag_a, bag_c] @ [A; e * A] = Σ_j (a_j + e_k c_j) A x_j, the position-encoded sum
        words = torch.cat([F.pad(batch.story, (0, L - J)), F.pad(batch.query, (0, L - batch.query.shape[-1]))[:, :, None]], 2)  # (s, B, M+1, L)
        bag = self._bags(words)  # (s, B, M+1, C, V)
        table = torch.cat([self.emb, self.emb * self.e_tables], 1) if cfg.encoding == "pe" else self.emb  # (S, C*V, tables*d)
        x = torch.matmul(bag.view(s, B * (M + 1), -1), table).view(S, B, M + 1, -1)  # (S, B, M+1, tables*d)
        memory, question = x.split([M, 1], dim=2)  # (S, B, M, tables*d), (S, B, 1, tables*d)
        if cfg.temporal:
            # T(i) of seed s is row s*T + i of the seeds' stacked tables: an embedding lookup,
            # whose backward is cheap (a gather's is a slow scatter)
            time = batch.time.clamp(max=self.memory_size - 1).expand(S, B, M)  # (S, B, M)
            rows = time + torch.arange(S, device=x.device)[:, None, None] * self.memory_size  # (S, B, M)
            memory = memory + F.embedding(rows, self.temporal.view(S * self.memory_size, -1))  # (S, B, M, tables*d) + T(i)
        tables = memory.reshape(S, B, M, self.n_tables, d).unbind(3)  # n_tables x (S, B, M, d)
        u = question.reshape(S, B, self.n_tables, d)[:, :, 0]  # (S, B, d) u^1 = B q
        W = torch.matmul(self.answer_bag, self.emb.view(S, -1, self.n_tables, d)[:, :, -1])  # (S, A, d) W = rows of C^K

        real = torch.arange(M, device=x.device) < batch.length[..., None]  # (s, B, M)
        allowed = real.expand(S, B, M)  # (S, B, M) memories hop k may attend to
        visited = torch.zeros(S, B, M, dtype=torch.bool, device=x.device)  # chosen by earlier hops
        attention, scores, allowed_k, states = [], [], [], []
        allowed_f = None
        for k in range(K):
            m, c = tables[self._table(k, "A")], tables[self._table(k, "C")]  # (S, B, M, d) m_i, c_i
            score = (m * u[:, :, None]).sum(-1)  # (S, B, M) u^k · m_i
            if cfg.masking == "hard":
                allowed = real & ~visited
            elif cfg.masking == "soft":
                score = score - self.log_penalty.exp()[:, None, None] * visited
            score = score.masked_fill(~allowed, -1e30)  # exp() of it is exactly 0
            if allowed_f is None or cfg.masking == "hard":
                allowed_f = allowed.float()  # (S, B, M)
            p = (score if self.linear else score.softmax(-1)) * allowed_f  # (S, B, M) p_i; rows with nothing allowed: 0
            o = (p[..., None] * c).sum(2)  # (S, B, d) o = Σ_i p_i c_i
            u = (torch.matmul(self.H[:, None], u[..., None])[..., 0] if cfg.tying == "layerwise" else u) + o  # u^{k+1}
            if cfg.masking != "off":
                visited = visited.scatter(-1, p.argmax(-1, keepdim=True), True) & real
            attention.append(p)
            states.append(u)
            if self.attention_supervision > 0:
                scores.append(score)
                allowed_k.append(allowed)
        attention = torch.stack(attention, 2)  # (S, B, K, M)
        states = torch.stack(states, 2)  # (S, B, K, d) u^2 .. u^{K+1}
        hop_logits = torch.matmul(states.view(S, B * K, d), W.transpose(1, 2)).view(S, B, K, -1)  # (S, B, K, A) â_k

        arange_k = torch.arange(K, device=x.device)  # (K,)
        if cfg.stopping:
            h_raw = torch.sigmoid(torch.matmul(states, self.halt_w[:, None, :, None])[..., 0] + self.halt_b[:, None, None])  # (S, B, K) h_k
            h = torch.where(arange_k == K - 1, 1.0, h_raw)  # (S, B, K) h_K = 1
            go_on = torch.cumprod(torch.cat([torch.ones_like(h[..., :1]), 1 - h[..., :-1]], -1), -1)  # (S, B, K) Π_{j<k}(1-h_j)
            halt_probs = h * go_on  # (S, B, K) π_k
            stop = (h_raw > cfg.halt_threshold) | (arange_k == K - 1)  # (S, B, K)
            hops_used = stop.float().argmax(-1) + 1  # (S, B) the first hop that says stop
            halted = h_raw.gather(-1, (hops_used - 1)[..., None])[..., 0] > cfg.halt_threshold  # (S, B)
            attention = attention * (arange_k < hops_used[..., None])[..., None]  # hops not taken: zeros
            logits = hop_logits.gather(2, (hops_used - 1)[..., None, None].expand(S, B, 1, hop_logits.shape[-1]))[:, :, 0]  # (S, B, A)
        else:
            halt_probs = (arange_k == K - 1).float().expand(S, B, K)  # (S, B, K)
            hops_used = torch.full((S, B), K, device=x.device)  # (S, B)
            halted = torch.zeros(S, B, dtype=torch.bool, device=x.device)  # (S, B)
            logits = hop_logits[:, :, -1]  # (S, B, A)

        loss = None
        if self.training or bool((batch.answer >= 0).any()):  # training batches always have answers
            loss = self._loss(batch, logits, hop_logits, halt_probs, scores, allowed_k)
        result = Result(logits, attention, hops_used, halted, hop_logits, halt_probs, loss)
        if plain and S == 1:
            result = Result(*(t if t is None or t.dim() == 0 else t[0] for t in result))
        return result

    def _loss(self, batch: Batch, logits: Tensor, hop_logits: Tensor, halt_probs: Tensor, scores: list[Tensor],
              allowed: list[Tensor]) -> Tensor:
        S, B, K, A = hop_logits.shape
        answer = batch.answer.expand(S, B)  # (S, B)
        if self.cfg.stopping:  # expected loss over the halting distribution, and a cost per extra hop
            ce = F.cross_entropy(hop_logits.reshape(-1, A), answer[..., None].expand(S, B, K).reshape(-1),
                                 ignore_index=-1, reduction="none").view(S, B, K)  # (S, B, K) CE(â_k)
            extra = torch.arange(K, device=ce.device, dtype=ce.dtype)  # (K,) hops beyond the first
            loss = (halt_probs * (ce + self.cfg.halt_cost * extra)).sum()
        else:
            # summed over the batch (not averaged), as the paper's recipe with lr 0.01 expects
            loss = F.cross_entropy(logits.reshape(-1, A), answer.reshape(-1), ignore_index=-1, reduction="sum")
        if self.attention_supervision > 0:
            loss = loss + self.attention_supervision * self._supervision(batch, halt_probs, torch.stack(scores, 2),
                                                                         torch.stack(allowed, 2))
        return loss

    def _supervision(self, batch: Batch, halt_probs: Tensor, scores: Tensor, allowed: Tensor) -> Tensor:
        """Pull hop k's attention toward the k-th supporting fact, and the halting toward the
        number of supporting facts (summed over questions and seeds)."""
        S, B, K, M = scores.shape
        n = min(K, batch.support.shape[-1])
        target = batch.support[..., :n].expand(S, B, n)  # (S, B, n) memory slot of fact k
        ok = (target >= 0) & allowed[:, :, :n].gather(-1, target.clamp(min=0)[..., None])[..., 0]  # (S, B, n)
        ce = F.cross_entropy(scores[:, :, :n].reshape(-1, M), target.clamp(min=0).reshape(-1),
                             reduction="none").view(S, B, n)  # (S, B, n)
        loss = (ce * ok).sum()
        if self.cfg.stopping:
            want = (batch.n_support.expand(S, B).clamp(1, K) - 1)[..., None]  # (S, B, 1) hops the facts need
            loss = loss - halt_probs.gather(-1, want).clamp(min=1e-8).log().sum()
        return loss


def build_model(cfg: ModelConfig, vocab_size: int, n_answers: int, *, answer_words: list[list[int]],
                memory_size: int = 50, seeds: int = 1, attention_supervision: float = 0.0) -> nn.Module:
    """The model cfg.type names. Every model takes a Batch and returns a Result, and keeps a
    leading seed dimension on every parameter (memnet.train relies on both)."""
    if cfg.type == "memn2n":
        return MemN2N(cfg, vocab_size, n_answers, answer_words=answer_words, memory_size=memory_size,
                      seeds=seeds, attention_supervision=attention_supervision)
    if cfg.type in ("transformer", "universal"):
        from memnet.transformer import Transformer  # here: memnet.transformer imports Result from this module
        return Transformer(cfg, vocab_size, n_answers, memory_size=memory_size, seeds=seeds,
                           attention_supervision=attention_supervision)
    raise MemnetError(f"model.type: expected memn2n, transformer or universal, found {cfg.type!r}")


def n_parameters(model: nn.Module) -> int:
    seeds = getattr(model, "seeds", 1)
    return sum(p.numel() for p in model.parameters()) // seeds

