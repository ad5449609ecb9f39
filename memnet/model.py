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

With null_memory (the default), the softmax has one more entry, an empty memory with score
0 that reads nothing, so p_i sums to less than 1 when a hop finds nothing worth reading: the
paper's code has this in effect (its padding slots are zero vectors inside its softmax), and
the yes/no tasks (qa6, qa9, qa10) need it. Slot 0 of the memory tensors, the question's,
plays that part.

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
- answer_from readout: â_k = softmax(W o^k), the answer from what hop k read alone. With
  u^{k+1} an earlier hop's read-out reaches the answer directly, so on a chain (qa16) hop 1
  learns to read a colour instead of the fact that starts the chain. The halting unit then
  reads o^k too.
- temporal_zero_init: T(i) starts at zero. A random T(i) makes "the most recent colour"
  (right half the time on qa16) the easiest thing to learn, a local optimum.
- alternate_init: odd seeds (restarts) start as the paper's (N(0, 0.1), random T(i)), even
  seeds as the config says; the best seed on validation then picks, per task, between the
  two (T(i) from zero solves the induction chain, the paper's start suits qa2, qa3, qa11).

Speed shapes the code: a sentence embedding under position encoding is rank 2,
Σ_j l_kj A x_j = (Σ_j a_j A x_j) + e_k (Σ_j c_j A x_j) with a_j = 1 - j/J, c_j = 2j/J - 1,
e_k = k/d, so all memories of all hops and the question come from ONE matrix product of
weighted bag-of-words rows (built once per dataset, see MemN2N.bags) with the stacked tables
[A^1, C^1 = A^2, ..., C^K]; T(i) is one more column of those rows (the age, one-hot, added
at every step: random noise changes ages every epoch) and one more row block of the tables.
The hops and that product run in _Reader, whose backward is written by hand: a CPU step is
bound by per-operation overhead, and autograd's small nodes cost more than the arithmetic.
Every parameter has a leading seed dimension S, so restarts train side by side as one model,
each seed with its own initialisation. Training itself runs in memnet.fast on the CPU, the
same step compiled with Numba (tested against this one); this module is the reference, the
model evaluation and inspection run, and the trainer's step on other devices (or with
train.backend=torch).
"""
from __future__ import annotations

import dataclasses
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
PAPER_INIT_STD = 0.1  # the paper's N(0, 0.1), for alternate_init's odd seeds


class MemN2N(nn.Module):
    has_linear_start = True  # the trainer may remove the attention softmax for the first epochs (self.linear)

    def __init__(self, cfg: ModelConfig, vocab_size: int, n_answers: int, *, answer_words: list[list[int]],
                 memory_size: int = 50, seeds: int = 1, attention_supervision: float = 0.0):
        super().__init__()
        assert cfg.encoding in ("bow", "pe"), f"model.encoding: expected bow or pe, found {cfg.encoding!r}"
        assert cfg.tying in ("adjacent", "layerwise"), f"model.tying: expected adjacent or layerwise, found {cfg.tying!r}"
        assert cfg.masking in ("off", "hard", "soft"), f"model.masking: expected off, hard or soft, found {cfg.masking!r}"
        assert cfg.answer_from in ("state", "readout"), f"model.answer_from: expected state or readout, found {cfg.answer_from!r}"
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
        self.register_buffer("last_hop", (torch.arange(K) == K - 1).float(), persistent=False)  # (K,) π without stopping
        self.reset_parameters([torch.Generator().manual_seed(s) for s in range(S)])

    def reset_parameters(self, generators: list[torch.Generator]) -> None:
        """Draw every seed's parameters from its own generator: seed s trains as if alone."""
        cfg = self.cfg
        with torch.no_grad():
            for name, p in self.named_parameters():
                for s, g in enumerate(generators):
                    paper = cfg.alternate_init and s % 2 == 1  # odd seeds start as the paper's
                    if name == "halt_b":  # start by taking every hop: halting must be learnt
                        p[s].fill_(-2.0)
                    elif name == "log_penalty" or (name == "temporal" and cfg.temporal_zero_init and not paper):
                        p[s].zero_()
                    else:
                        p[s].copy_(torch.randn(p.shape[1:], generator=g) * (PAPER_INIT_STD if paper else cfg.init_std))

    def _table(self, k: int, role: str) -> int:
        """Which table hop k (0-based) reads as A or C."""
        if self.cfg.tying == "adjacent":
            return k if role == "A" else k + 1
        return 1 if role == "A" else 2

    def bags(self, batch: Batch) -> Tensor:
        """What the model reads of each sentence's words, as rows of one matrix product with the
        tables: (..., M+1, C*V), slot 0 the question, slots 1..M the memories. Columns: the words
        weighted by a_j = 1 - j/J (channel 0) and c_j = 2j/J - 1 (channel 1; bag of words:
        channel 0 only, weight 1). A memory's age (temporal encoding, one more "word") changes
        with random noise at every epoch, so _Reader adds it at every step (`ages`)."""
        L = max(batch.story.shape[-1], batch.query.shape[-1])
        words = torch.cat([F.pad(batch.query, (0, L - batch.query.shape[-1]))[..., None, :],
                           F.pad(batch.story, (0, L - batch.story.shape[-1]))], -2)  # (..., M+1, L)
        real = words != 0  # (..., M+1, L)
        r = torch.arange(1, L + 1, device=words.device) / real.sum(-1, keepdim=True).clamp(min=1)  # (..., M+1, L) j/J
        if self.cfg.encoding == "pe":
            weights = (self.pe_base + self.pe_slope * r[..., None, :]) * real[..., None, :]  # (..., M+1, 2, L) a_j, c_j; padding weighs 0
        else:
            weights = real[..., None, :].to(self.emb.dtype)  # (..., M+1, 1, L)
        bag = words.new_zeros(*words.shape[:-1], weights.shape[-2], self.emb.shape[1], dtype=self.emb.dtype)
        return bag.scatter_add_(-1, words[..., None, :].expand_as(weights), weights).flatten(-2)  # (..., M+1, C*V)

    def prepare(self, batch: Batch) -> Batch:
        """The batch with its bags (see `bags`) computed at once, for data that many steps
        index; unchanged where they would take more than 512 MB (the model then computes them
        at every step)."""
        width = self.emb.shape[1] * (2 if self.cfg.encoding == "pe" else 1)
        if batch.story[..., 0].numel() * width * 4 > 2 ** 29:
            return batch
        return dataclasses.replace(batch, bags=self.bags(batch))

    def forward(self, batch: Batch) -> Result:
        plain = batch.story.dim() == 3
        if plain:  # the same questions for every seed
            batch = batch.index(None)  # fields (1, B, ...)
        cfg, S, K = self.cfg, self.seeds, self.cfg.hops
        bags = self.bags(batch) if batch.bags is None else batch.bags  # (s, B, M+1, C*V)
        penalty = self.log_penalty.exp() if cfg.masking == "soft" else None  # (S,)
        keep_scores = self.attention_supervision > 0
        hop_logits, states, attention, scores, allowed = _Reader.apply(
            self.emb, getattr(self, "temporal", None), getattr(self, "H", None), penalty,
            bags, batch.time, batch.length, self, keep_scores)  # (S, B, K, A), (S, B, K, d), (S, B, K, M) x 3
        B = hop_logits.shape[1]

        if cfg.stopping:
            arange_k = torch.arange(K, device=hop_logits.device)  # (K,)
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
            halt_probs = self.last_hop.expand(S, B, K)  # (S, B, K)
            hops_used = torch.full((S, B), K, device=hop_logits.device)  # (S, B)
            halted = torch.zeros(S, B, dtype=torch.bool, device=hop_logits.device)  # (S, B)
            logits = hop_logits[:, :, -1]  # (S, B, A)

        loss = None
        if self.training or bool((batch.answer >= 0).any()):  # training batches always have answers
            loss = self._loss(batch, logits, hop_logits, halt_probs, scores, allowed)
        result = Result(logits, attention, hops_used, halted, hop_logits, halt_probs, loss)
        if plain and S == 1:
            result = Result(*(t if t is None or t.dim() == 0 else t[0] for t in result))
        return result

    def _loss(self, batch: Batch, logits: Tensor, hop_logits: Tensor, halt_probs: Tensor, scores: Tensor | None,
              allowed: Tensor | None) -> Tensor:
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
            loss = loss + self.attention_supervision * self._supervision(batch, halt_probs, scores, allowed)
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


class _Reader(torch.autograd.Function):
    """Bags (see MemN2N.bags) to per-hop answer logits, with a hand-written backward.

    A training step of this small model is bound by per-operation overhead, not arithmetic:
    autograd's ~150 small nodes (and ~270 dispatched operations) cost more than the numbers
    they move. Here the forward saves what the backward needs and the backward is ~50 tensor
    operations. Inside, the batch is the last (contiguous) dimension and every tensor keeps
    its singleton dimensions, so the per-hop broadcasts and sums over d and M vectorise along
    B without reshapes; the outputs are permuted views in the Result layout.

        x_t (S, d, M+1, B)   table t applied to every slot: slot 0 the question (u^1 = B q
                             from table 0), slots 1..M m_i = A^k x_i + T_A(i), c_i likewise
        u   (S, d, 1, B)     the controller state u^k
        p   (S, 1, M+1, B)   one hop's attention (slot 0, the question, always gets 0)
    """

    @staticmethod
    def forward(ctx, emb: Tensor, temporal: Tensor | None, H: Tensor | None, penalty: Tensor | None,
                bags: Tensor, time: Tensor, length: Tensor, net: MemN2N, keep_scores: bool):
        ctx.set_materialize_grads(False)
        cfg, K, d = net.cfg, net.cfg.hops, net.cfg.dim
        S, V, _ = emb.shape
        s, B, M1, CV = bags.shape
        rows = [emb, emb * net.e_tables] if cfg.encoding == "pe" else [emb]  # [A; e * A] (see the module docstring)
        bag = bags.transpose(1, 2)  # (s, M+1, B, C*V)
        if temporal is not None:  # a memory's age i as one more word, one-hot; T(i) its rows of the tables
            age = time.clamp(max=net.memory_size - 1).transpose(1, 2)[..., None]  # (s, M, B, 1)
            ages = int(age.max()) + 1 if age.numel() else 1
            one_hot = bag.new_zeros(s, M1, B, ages)  # (s, M+1, B, ages); slot 0, the question, has none
            one_hot[:, 1:].scatter_(-1, age, 1.0)
            bag = torch.cat([bag, one_hot], -1)  # (s, M+1, B, C*V + ages)
            rows.append(temporal[:, :ages])
        table = torch.cat(rows, 1) if len(rows) > 1 else emb  # (S, C*V + ages, tables*d)
        bag = bag.reshape(s, M1 * B, -1).expand(S, -1, -1)  # (S, (M+1)*B, C*V + ages)
        x = torch.bmm(table.transpose(1, 2), bag.transpose(1, 2)).view(S, net.n_tables, d, M1, B).unbind(1)
        u = x[0][:, :, :1]  # (S, d, 1, B) u^1 = B q
        W = torch.bmm(net.answer_bag.expand(S, -1, -1), emb[:, :, -d:])  # (S, A, d) W = rows of C^K

        slot = torch.arange(M1, device=emb.device)[:, None]  # (M+1, 1)
        real = (slot > 0) & (slot <= length.view(s, 1, 1, B))  # (s, 1, M+1, B) memories 1..length
        blocked = ~real  # slots this hop may not attend to
        visited = torch.zeros(S, 1, M1, B, dtype=torch.bool, device=emb.device)  # chosen by earlier hops
        us, outs, ps, blocks, visits, scores = [], [], [], [], [], []
        for k in range(K):
            m, c = x[net._table(k, "A")], x[net._table(k, "C")]  # (S, d, M+1, B) m_i, c_i
            score = (m * u).sum(1, keepdim=True)  # (S, 1, M+1, B) u^k · m_i
            if cfg.masking == "hard":
                blocked = ~real | visited
            elif cfg.masking == "soft":
                score = score - penalty.view(S, 1, 1, 1) * visited
            score = score.masked_fill(blocked, -1e30)  # exp() of it is exactly 0
            if cfg.null_memory:  # slot 0 as an empty memory: score 0 in the softmax, p_0 then zeroed (reads nothing)
                score = score.masked_fill(slot == 0, 0.0)
            p = (score if net.linear else score.softmax(2)).masked_fill(blocked, 0.0)  # (S, 1, M+1, B) p_i; nothing allowed: 0
            us.append(u), ps.append(p), blocks.append(blocked), visits.append(visited), scores.append(score)
            o = (c * p).sum(2, keepdim=True)  # (S, d, 1, B) o = Σ_i p_i c_i
            outs.append(o)
            u = (torch.bmm(H, u.view(S, d, B)).view(S, d, 1, B) if H is not None else u) + o  # u^{k+1}
            if cfg.masking != "off":
                visited = visited.scatter(2, p.argmax(2, keepdim=True), True) & real
        states = torch.cat(outs if cfg.answer_from == "readout" else us[1:] + [u], 2)  # (S, d, K, B) u^2 .. u^{K+1}, or o^1 .. o^K
        hop_logits = torch.bmm(W, states.view(S, d, K * B)).view(S, -1, K, B)  # (S, A, K, B) â_k
        attention = torch.cat(ps, 1)[:, :, 1:].permute(0, 3, 1, 2)  # (S, B, K, M)
        ctx.mark_non_differentiable(attention)
        ctx.net, ctx.linear, ctx.CV = net, net.linear, CV
        ctx.saved = (x, W, states, bag, H, penalty, us, ps, blocks, visits)
        score_out = torch.cat(scores, 1)[:, :, 1:].permute(0, 3, 1, 2) if keep_scores else None  # (S, B, K, M)
        allowed = ~torch.cat(blocks, 1)[:, :, 1:].expand(S, -1, -1, -1).permute(0, 3, 1, 2) if keep_scores else None
        return hop_logits.permute(0, 3, 2, 1), states.permute(0, 3, 2, 1), attention, score_out, allowed

    @staticmethod
    def backward(ctx, g_logits: Tensor | None, g_states: Tensor | None, _attention, g_scores: Tensor | None, _allowed):
        net, CV = ctx.net, ctx.CV
        x, W, states, bag, H, penalty, us, ps, blocks, visits = ctx.saved
        S, d, K, B = states.shape
        M1 = x[0].shape[2]
        g_st = torch.zeros_like(states)  # (S, d, K, B) ∂u^{k+1} (or ∂o^k, answer_from readout) from the outputs
        if g_logits is not None:
            g_logits = g_logits.permute(0, 3, 2, 1).reshape(S, -1, K * B)  # (S, A, K*B)
            g_W = torch.bmm(g_logits, states.view(S, d, K * B).transpose(1, 2))  # (S, A, d)
            g_st = torch.bmm(W.transpose(1, 2), g_logits).view(S, d, K, B)
        if g_states is not None:
            g_st = g_st + g_states.permute(0, 3, 2, 1)
        g_st = g_st.split(1, 2)  # K x (S, d, 1, B)
        if g_scores is not None:  # (S, 1, M+1, B) per hop; slot 0 is the question's
            g_scores = F.pad(g_scores.permute(0, 2, 3, 1), (0, 0, 1, 0)).split(1, 1)
        # ∂x: each table's first contribution is written, later ones added (no zero fill of a
        # tensor as large as x: at 10 seeds, memory traffic is what a step costs)
        g_x = torch.empty(S, net.n_tables, d, M1, B, dtype=states.dtype, device=states.device)
        g_xt, written = g_x.unbind(1), set()  # tables x (S, d, M+1, B)

        def add(t: int, a: Tensor, b: Tensor) -> None:
            if t in written:
                g_xt[t].addcmul_(a, b)
            else:
                torch.mul(a, b, out=g_xt[t])
                written.add(t)
        g_H = torch.zeros_like(H) if H is not None else None
        g_penalty = torch.zeros_like(penalty) if penalty is not None else None
        readout = net.cfg.answer_from == "readout"  # the outputs are o^k, else u^{k+1}
        g_u = torch.zeros_like(g_st[0]) if readout else g_st[K - 1]  # ∂u^{K+1}
        for k in reversed(range(K)):
            if readout:
                g_o = g_u + g_st[k]  # ∂o^k: through u^{k+1}, and from the output o^k
            else:
                if k < K - 1:
                    g_u = g_u + g_st[k]  # ∂u^{k+1}, which is ∂o
                g_o = g_u
            a, c, p, u = net._table(k, "A"), net._table(k, "C"), ps[k], us[k]
            add(c, p, g_o)  # ∂c_i = p_i ∂o
            g_p = (x[c] * g_o).sum(1, keepdim=True)  # (S, 1, M+1, B) ∂p_i = c_i · ∂o
            if ctx.linear:
                g_score = g_p.masked_fill(blocks[k], 0.0)
            else:  # blocked slots have p_i = 0 and get nothing
                g_score = torch._softmax_backward_data(g_p, p, 2, p.dtype)  # p_i (∂p_i - Σ_j p_j ∂p_j)
            if g_scores is not None:
                g_score = g_score + g_scores[k].masked_fill(blocks[k], 0.0)
            if penalty is not None:
                g_penalty -= (g_score * visits[k]).sum((1, 2, 3))
            add(a, g_score, u)  # ∂m_i = ∂score_i u^k
            if H is not None:
                g_H += torch.bmm(g_u.view(S, d, B), u.view(S, d, B).transpose(1, 2))  # (S, d, d)
                g_u = torch.bmm(H.transpose(1, 2), g_u.view(S, d, B)).view(S, d, 1, B)
            g_u = g_u + (x[a] * g_score).sum(2, keepdim=True)  # (S, d, 1, B) ∂u^k
        for t in set(range(net.n_tables)) - written:  # layer-wise tying: B and W^T read no memory
            g_xt[t].zero_()
        g_xt[0][:, :, :1] += g_u  # u^1 = B q, slot 0 of table 0
        g_table = torch.bmm(g_x.view(S, -1, M1 * B), bag)  # (S, tables*d, C*V + ages) x = table^T bag^T
        V = net.emb.shape[1]
        g_emb = g_table[:, :, :V]
        if net.cfg.encoding == "pe":
            g_emb = g_emb + net.e_tables[:, None] * g_table[:, :, V:CV]
        g_emb = g_emb.transpose(1, 2).contiguous()  # (S, V, tables*d)
        if g_logits is not None:
            g_emb[:, :, -d:] += torch.bmm(net.answer_bag.t().expand(S, -1, -1), g_W)  # W = answer_bag C^K
        g_temporal = None
        if net.cfg.temporal:  # ages the bags did not hold get nothing
            g_temporal = F.pad(g_table[:, :, CV:].transpose(1, 2), (0, 0, 0, net.memory_size - (g_table.shape[2] - CV)))
        return g_emb, g_temporal, g_H, g_penalty, None, None, None, None, None


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

