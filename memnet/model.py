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
e_k = k/d, so all memories of all hops come from ONE matrix product of weighted
bag-of-words rows with the stacked tables [A^1, C^1 = A^2, ..., C^K]; a time word (rows
after the vocabulary) carries T(i). Every parameter has a leading seed dimension S, so
restarts train side by side as one model, each seed with its own initialisation.
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
        self.cfg, self.seeds, self.vocab_size, self.memory_size = cfg, seeds, vocab_size, memory_size
        self.attention_supervision = attention_supervision
        self.linear = False  # linear start: the trainer removes the attention softmax for the first epochs
        d, K = cfg.dim, cfg.hops
        n_tables = K + 1 if cfg.tying == "adjacent" else 4  # adjacent: B=A^1, C^k=A^{k+1}, W^T=C^K; layerwise: B, A, C, W
        rows = vocab_size + (memory_size if cfg.temporal else 0)  # words, then time words T(0..memory_size-1)
        self.emb = nn.Parameter(torch.randn(seeds, rows, n_tables, d) * cfg.init_std)  # (S, V+T, tables, d)
        if cfg.tying == "layerwise":
            self.H = nn.Parameter(torch.randn(seeds, d, d) * cfg.init_std)  # (S, d, d)
        if cfg.stopping:
            self.halt_w = nn.Parameter(torch.randn(seeds, d) * cfg.init_std)  # (S, d)
            self.halt_b = nn.Parameter(torch.zeros(seeds))  # (S,)
        if cfg.masking == "soft":
            self.log_penalty = nn.Parameter(torch.zeros(seeds))  # (S,) penalty e^x on visited memories' scores
        answer_bag = torch.zeros(n_answers, rows)  # (A, V+T)
        for a, words in enumerate(answer_words):
            for w in words:
                answer_bag[a, w] += 1.0
        self.register_buffer("answer_bag", answer_bag, persistent=False)
        self.register_buffer("e", torch.arange(1, d + 1) / d, persistent=False)  # (d,) e_k = k/d

    def reset_parameters(self, generators: list[torch.Generator]) -> None:
        """Draw every seed's parameters from its own generator: seed s trains as if alone."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                for s, g in enumerate(generators):
                    if name in ("halt_b", "log_penalty"):
                        p[s].zero_()
                    else:
                        p[s].copy_(torch.randn(p.shape[1:], generator=g) * self.cfg.init_std)

    def _table(self, k: int, role: str) -> int:
        """Index of the table hop k (0-based) uses for role A or C; B and W are ('query', 'answer')."""
        if self.cfg.tying == "adjacent":
            return {"A": k, "C": k + 1, "query": 0, "answer": self.cfg.hops}[role]
        return {"query": 0, "A": 1, "C": 2, "answer": 3}[role]

    def _bags(self, words: Tensor, time: Tensor | None) -> Tensor:
        """Weighted bags of words (..., J) -> (..., channels, V+T): channel 0 holds a_j (and the
        time word with weight 1), channel 1 holds c_j; bag of words has channel 0 only."""
        real = words != 0  # (..., J)
        length = real.sum(-1, keepdim=True).clamp(min=1)  # (..., 1) J of each sentence
        j = torch.arange(1, words.shape[-1] + 1, device=words.device)  # (J,)
        if self.cfg.encoding == "pe":
            weights = torch.stack([1 - j / length, 2 * j / length - 1], dim=-2)  # (..., 2, J) a_j, c_j
        else:
            weights = torch.ones(*words.shape[:-1], 1, words.shape[-1], device=words.device)  # (..., 1, J)
        weights = weights * real[..., None, :]  # padding words weigh nothing
        bag = torch.zeros(*words.shape[:-1], weights.shape[-2], self.emb.shape[1], device=words.device)
        bag.scatter_add_(-1, words[..., None, :].expand_as(weights), weights)  # (..., C, V+T)
        if time is not None:
            index = (self.vocab_size + time.clamp(max=self.memory_size - 1))[..., None]  # (..., 1)
            bag[..., 0, :].scatter_(-1, index, 1.0)
        return bag

    def _embed(self, bag: Tensor, tables: Tensor) -> Tensor:
        """Bags (s, N, C, V+T) times tables (S, V+T, n, d) -> embeddings (S, N, n, d)."""
        s, n, c, v = bag.shape
        out = torch.matmul(bag.reshape(s, n * c, v), tables.reshape(tables.shape[0], v, -1))  # (S, N*C, n*d)
        out = out.view(-1, n, c, tables.shape[2], tables.shape[3])  # (S, N, C, n, d)
        if c == 1:
            return out[:, :, 0]
        return out[:, :, 0] + self.e * out[:, :, 1]  # l_kj = a_j + e_k c_j

    def forward(self, batch: Batch) -> Result:
        plain = batch.story.dim() == 3
        if plain:  # one batch for every seed
            batch = batch.index(None)  # (1, B, ...)
        cfg, K = self.cfg, self.cfg.hops
        S = self.seeds
        _, B, M, J = batch.story.shape

        story_bag = self._bags(batch.story, batch.time if cfg.temporal else None)  # (s, B, M, C, V+T)
        memory = self._embed(story_bag.flatten(1, 2), self.emb)  # (S, B*M, tables, d)
        memory = memory.view(S, B, M, *memory.shape[2:])  # (S, B, M, tables, d)
        query_bag = self._bags(batch.query, None)  # (s, B, C, V+T)
        u = self._embed(query_bag, self.emb[:, :, self._table(0, "query"), None])[:, :, 0]  # (S, B, d) u^1
        W = torch.matmul(self.answer_bag, self.emb[:, :, self._table(0, "answer")])  # (S, A, d)

        real = torch.arange(M, device=u.device) < batch.length[..., None]  # (s, B, M)
        visited = torch.zeros(S, B, M, dtype=torch.bool, device=u.device)  # memories chosen by earlier hops
        attention, scores_k, allowed_k, states = [], [], [], []
        for k in range(K):
            m = memory[:, :, :, self._table(k, "A")]  # (S, B, M, d) m_i
            c = memory[:, :, :, self._table(k, "C")]  # (S, B, M, d) c_i
            score = torch.matmul(m, u[..., None])[..., 0]  # (S, B, M) u^k · m_i
            allowed = real & ~visited if cfg.masking == "hard" else real.expand(S, B, M)  # (S, B, M)
            if cfg.masking == "soft":
                score = score - self.log_penalty.exp()[:, None, None] * visited
            score = score.masked_fill(~allowed, -1e30)  # exp() of it is exactly 0
            p = (score if self.linear else score.softmax(-1)) * allowed  # (S, B, M) p_i
            o = torch.matmul(p[..., None, :], c)[..., 0, :]  # (S, B, d) o = Σ p_i c_i
            u = (torch.matmul(self.H[:, None], u[..., None])[..., 0] if cfg.tying == "layerwise" else u) + o  # u^{k+1}
            if cfg.masking != "off":
                visited = visited.scatter(-1, p.argmax(-1, keepdim=True), True) & real
            attention.append(p)
            scores_k.append(score)
            allowed_k.append(allowed)
            states.append(u)
        attention = torch.stack(attention, 2)  # (S, B, K, M)
        states = torch.stack(states, 2)  # (S, B, K, d) u^2..u^{K+1}
        hop_logits = torch.matmul(states, W.transpose(1, 2)[:, None])  # (S, B, K, A) â_k

        if cfg.stopping:
            h_raw = torch.sigmoid(torch.matmul(states, self.halt_w[:, None, :, None])[..., 0] + self.halt_b[:, None, None])  # (S, B, K)
            h = torch.cat([h_raw[..., :-1], torch.ones_like(h_raw[..., -1:])], -1)  # (S, B, K) h_K = 1
            go_on = torch.cumprod(torch.cat([torch.ones_like(h[..., :1]), 1 - h[..., :-1]], -1), -1)  # Π_{j<k}(1-h_j)
            halt_probs = h * go_on  # (S, B, K) π_k
            stop = (h_raw > cfg.halt_threshold) | (torch.arange(K, device=u.device) == K - 1)  # (S, B, K)
            hops_used = stop.float().argmax(-1) + 1  # (S, B) first hop that says stop
            halted = h_raw.gather(-1, (hops_used - 1)[..., None])[..., 0] > cfg.halt_threshold  # (S, B)
            attention = attention * (torch.arange(K, device=u.device) < hops_used[..., None])[..., None]
        else:
            halt_probs = F.one_hot(torch.full((S, B), K - 1, device=u.device), K).float()  # (S, B, K)
            hops_used = torch.full((S, B), K, device=u.device)  # (S, B)
            halted = torch.zeros(S, B, dtype=torch.bool, device=u.device)
        logits = hop_logits.gather(2, (hops_used - 1)[..., None, None].expand(S, B, 1, hop_logits.shape[-1]))[:, :, 0]  # (S, B, A)

        loss = None
        if bool((batch.answer >= 0).any()):
            loss = self._loss(batch, hop_logits, halt_probs, torch.stack(scores_k, 2), torch.stack(allowed_k, 2))
        result = Result(logits, attention, hops_used, halted, hop_logits, halt_probs, loss)
        if plain and S == 1:
            result = Result(*(t[0] if t is not None and t.dim() > 0 else t for t in result))
        return result

    def _loss(self, batch: Batch, hop_logits: Tensor, halt_probs: Tensor, scores: Tensor, allowed: Tensor) -> Tensor:
        S, B, K, A = hop_logits.shape
        answer = batch.answer.expand(S, B)  # (S, B)
        known = (answer >= 0).float()  # (S, B) questions whose answer is a known class
        ce = F.cross_entropy(hop_logits.reshape(-1, A), answer[..., None].expand(S, B, K).reshape(-1),
                             ignore_index=-1, reduction="none").view(S, B, K)  # (S, B, K) CE(â_k)
        if self.cfg.stopping:  # expected loss over the halting distribution, and a cost per extra hop
            extra = torch.arange(K, device=ce.device, dtype=ce.dtype)  # (K,) k - 1
            per_question = (halt_probs * (ce + self.cfg.halt_cost * extra)).sum(-1)  # (S, B)
        else:
            per_question = ce[..., -1]  # (S, B)
        loss = (per_question * known).sum(-1)  # (S,) summed over the batch, as the paper's recipe (lr 0.01) expects
        if self.attention_supervision > 0:
            loss = loss + self.attention_supervision * self._supervision(batch, halt_probs, scores, allowed)
        return loss.sum()

    def _supervision(self, batch: Batch, halt_probs: Tensor, scores: Tensor, allowed: Tensor) -> Tensor:
        """Pull hop k's attention toward the k-th supporting fact, and the halting toward the
        number of supporting facts; (S,) per seed."""
        S, B, K, M = scores.shape
        n = min(K, batch.support.shape[-1])
        target = batch.support[..., :n].expand(S, B, n)  # (S, B, n) memory slot of fact k
        ok = (target >= 0) & allowed[:, :, :n].gather(-1, target.clamp(min=0)[..., None])[..., 0]  # (S, B, n)
        ce = F.cross_entropy(scores[:, :, :n].reshape(-1, M), target.clamp(min=0).reshape(-1),
                             reduction="none").view(S, B, n)  # (S, B, n)
        loss = (ce * ok).sum((1, 2))  # (S,)
        if self.cfg.stopping:
            want = (batch.n_support.expand(S, B).clamp(1, K) - 1)[..., None]  # (S, B, 1) hops the facts need
            loss = loss - halt_probs.gather(-1, want)[..., 0].clamp(min=1e-8).log().sum(-1)
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

