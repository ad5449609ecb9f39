"""A transformer reader (Vaswani et al. 2017, arXiv:1706.03762) over the memory network's input,
and its Universal Transformer variant (Dehghani et al. 2019, arXiv:1807.03819).

Each sentence becomes one vector exactly as in the memory network (memnet.model): position
encoding over its words, m_i = Σ_j l_j · E x_ij + T(i), with T(i) the temporal encoding of the
memory's age i; the question is u = Σ_j l_j · E q_j + T_q. The sequence [u, m_0, .., m_{M-1}]
then goes through L layers of multi-head self-attention (post-LayerNorm, as in the paper):

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V     per head, d_k = d / heads
    x = LayerNorm(x + W_O [head_1; ..; head_H])
    x = LayerNorm(x + W_2 relu(W_1 x + b_1) + b_2)
    â_l = W_a u_l + b_a                                   u_l: the question's state after layer l

The 1/sqrt(d_k) keeps the dot products of random d_k-dimensional vectors at unit variance;
`model.scale: false` drops it so the softmax saturation it prevents can be measured
(`saturation`). The question attends to the memories only (its own state already flows
through the residual), so its row is a distribution over sentences like a hop's p_i: layer l
is the transformer's "hop l". Memories attend to every memory and to the question. Padding
gets exactly zero attention.

`model.type: universal` shares one layer's weights across all L steps and adds a learned
step encoding before each, as the Universal Transformer does; with `model.stopping` the
question's state drives a halting unit after every layer (the memory network's rule, see
memnet.model): adaptive computation per question, not the paper's per-position ACT.

The model holds one seed, as every model does (restarts are several models, see memnet.train).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memnet.data import Batch
from memnet.models.result import Result


class Reading(NamedTuple):
    """The Result plus the question's attention per layer and head (what Result averages)."""

    result: Result
    heads: Tensor  # (B, L, H, M) the question's attention over memories per layer and head
    scores: Tensor  # (B, L, H, M) the question's attention scores before the softmax (padding: -1e30)


def attention(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor, scale: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """Scaled dot-product attention, written out so its weights can be returned.

    q, k, v (..., T, d_k); allowed (..., T, T) bool, True where row i may attend to key j.
    Returns output (..., T, d_k), weights (..., T, T) and scores (..., T, T).
    """
    scores = torch.matmul(q, k.transpose(-1, -2))  # (..., T, T) q_i · k_j
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, -1e30)  # exp() of it is exactly 0
    weights = scores.softmax(-1) * allowed  # rows with nothing allowed stay all zero
    return torch.matmul(weights, v), weights, scores


def layer_norm(x: Tensor, gain: Tensor, bias: Tensor) -> Tensor:
    """LayerNorm over the last dimension with a learned gain and bias (d,)."""
    return F.layer_norm(x, x.shape[-1:], gain, bias)


def saturation(heads: Tensor, length: Tensor) -> dict[str, float]:
    """How peaked the question's attention is: mean of each row's largest weight and mean
    entropy (nats), against the uniform row's entropy; heads (B, L, H, M), length (B,)."""
    rows = length > 0
    p = heads[rows].detach()  # (N, L, H, M)
    entropy = -(p * p.clamp(min=1e-30).log()).sum(-1)  # (N, L, H)
    return {"mean_max_weight": float(p.max(-1).values.mean()), "mean_entropy": float(entropy.mean()),
            "uniform_entropy": float(length[rows].float().log().mean())}


class Transformer(nn.Module):
    has_linear_start = False  # no softmax-free phase: the trainer skips linear start

    def __init__(self, *, vocab_size: int, n_answers: int, memory_size: int, universal: bool = False, dim: int = 20,
                 layers: int = 2, heads: int = 2, ff_dim: int = 80, scale: bool = True, encoding: str = "pe",
                 temporal: bool = True, stopping: bool = False, halt_cost: float = 0.01, halt_threshold: float = 0.5,
                 attention_supervision: float = 0.0):
        super().__init__()
        self.universal, self.dim, self.layers, self.heads, self.scale = universal, dim, layers, heads, scale
        self.encoding, self.temporal, self.memory_size = encoding, temporal, memory_size
        self.stopping, self.halt_cost, self.halt_threshold = stopping, halt_cost, halt_threshold
        self.attention_supervision = attention_supervision
        self.linear = False
        d, f = dim, ff_dim
        n = 1 if universal else layers  # layers with their own weights

        def p(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.zeros(*shape))  # values come from reset_parameters

        self.emb = p(vocab_size, d)  # E, word embeddings shared by sentences and question
        self.time = p(memory_size, d)  # T(i): a memory's age
        self.question = p(d)  # T_q: marks the question's position
        if universal:
            self.step = p(layers, d)  # step encoding added before each application of the layer
        self.ln0_gain, self.ln0_bias = p(d), p(d)  # LayerNorm of the input sentences
        self.wq, self.wk, self.wv, self.wo = p(n, d, d), p(n, d, d), p(n, d, d), p(n, d, d)
        self.ln1_gain, self.ln1_bias = p(n, d), p(n, d)
        self.w1, self.b1, self.w2, self.b2 = p(n, d, f), p(n, f), p(n, f, d), p(n, d)
        self.ln2_gain, self.ln2_bias = p(n, d), p(n, d)
        self.wa, self.ba = p(d, n_answers), p(n_answers)  # W_a, b_a: answer from the question's state
        if stopping:
            self.halt_w, self.halt_b = p(d), p(1)  # halting unit h_l = σ(w_h · u_l + b_h)
        self.reset_parameters(torch.Generator().manual_seed(0))

    def reset_parameters(self, generator: torch.Generator, std: float = 0.1) -> None:
        """Embeddings from N(0, std); weight matrices N(0, 1/fan_in), which keeps activations at
        unit scale; LayerNorm gains start at 1 and biases at 0."""
        small = ("emb", "time", "question", "step", "halt_w")
        matrices = ("wq", "wk", "wv", "wo", "w1", "w2", "wa")
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name in small:
                    p.copy_(torch.randn(p.shape, generator=generator) * std)
                elif name in matrices:
                    p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[-2]))
                else:
                    p.fill_(1.0 if name.endswith("gain") else 0.0)

    def _sentences(self, words: Tensor) -> Tensor:
        """Word ids (..., J) -> sentence vectors (..., d): Σ_j l_j · E x_j, with the position
        encoding l_kj = (1 - j/J) - (k/d)(1 - 2j/J) over each sentence's own length J."""
        real = words != 0  # (..., J)
        x = self.emb[words]  # (..., J, d)
        if self.encoding == "bow":
            return (x * real[..., None]).sum(-2)
        J = real.sum(-1, keepdim=True).clamp(min=1)[..., None]  # (..., 1, 1)
        j = torch.arange(1, words.shape[-1] + 1, device=words.device)[:, None]  # (J, 1)
        k = torch.arange(1, self.dim + 1, device=words.device) / self.dim  # (d,)
        l = (1 - j / J) - k * (1 - 2 * j / J)  # (..., J, d)
        return (l * real[..., None] * x).sum(-2)

    def _layer(self, x: Tensor, allowed: Tensor, i: int) -> tuple[Tensor, Tensor, Tensor]:
        """One encoder layer with weights i: x (B, T, d) -> x, weights and scores (B, H, T, T)."""
        B, T, d = x.shape
        H = self.heads

        def heads(w: Tensor) -> Tensor:
            return (x @ w[i]).view(B, T, H, d // H).transpose(1, 2)  # (B, H, T, d_k)

        out, weights, scores = attention(heads(self.wq), heads(self.wk), heads(self.wv), allowed, self.scale)
        out = out.transpose(1, 2).reshape(B, T, d) @ self.wo[i]  # (B, T, d) W_O [head_1; ..]
        x = layer_norm(x + out, self.ln1_gain[i], self.ln1_bias[i])
        hidden = torch.relu(x @ self.w1[i] + self.b1[i])  # (B, T, f)
        x = layer_norm(x + hidden @ self.w2[i] + self.b2[i], self.ln2_gain[i], self.ln2_bias[i])
        return x, weights, scores

    def read(self, batch: Batch) -> Reading:
        """The Result and the question's attention per layer and head."""
        L = self.layers
        B, M, _ = batch.story.shape
        dev = batch.story.device

        memory = self._sentences(batch.story)  # (B, M, d) Σ_j l_j E x_ij
        if self.temporal:
            memory = memory + self.time[batch.time.clamp(max=self.memory_size - 1)]  # + T(i)
        u = self._sentences(batch.query) + self.question  # (B, d)
        x = torch.cat([u[:, None], memory], 1)  # (B, T, d), T = 1 + M: question first
        x = layer_norm(x, self.ln0_gain, self.ln0_bias)  # unit scale: the first layer's scores start informative

        real = torch.arange(M, device=dev) < batch.length[:, None]  # (B, M)
        keys = torch.cat([torch.ones_like(real[:, :1]), real], -1)  # (B, T) question and real memories
        allowed = keys[:, None, :].expand(-1, M + 1, -1).clone()  # (B, T, T) row i may read key j
        allowed[:, 0, 0] = False  # the question reads memories only: its own state flows through the residual
        allowed = allowed[:, None]  # (B, 1, T, T) the same for every head

        states, heads, scores = [], [], []
        for l in range(L):
            if self.universal:
                x = x + self.step[l]
            x, w, sc = self._layer(x, allowed, 0 if self.universal else l)
            states.append(x[:, 0])  # (B, d) u_l
            heads.append(w[:, :, 0, 1:])  # (B, H, M) the question's row over memories
            scores.append(sc[:, :, 0, 1:])
        states = torch.stack(states, 1)  # (B, L, d)
        heads, scores = torch.stack(heads, 1), torch.stack(scores, 1)  # (B, L, H, M)
        hop_logits = states @ self.wa + self.ba  # (B, L, A) â_l
        logits, hops_used, halted, halt_probs = self._halt(states, hop_logits)
        loss = None
        if bool((batch.answer >= 0).any()):
            loss = self._loss(batch, hop_logits, halt_probs, heads.mean(2))
        steps = torch.arange(L, device=dev)
        heads = heads * (steps < hops_used[:, None])[..., None, None]  # layers not taken read nothing
        return Reading(Result(logits, heads.mean(2), hops_used, halted, hop_logits, halt_probs, loss), heads, scores)

    def forward(self, batch: Batch) -> Result:
        return self.read(batch).result

    def _halt(self, states: Tensor, hop_logits: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """memnet.models.memn2n's halting rule on the question's state after each layer:
        (logits, hops_used, halted, halt_probs)."""
        B, L, A = hop_logits.shape
        steps = torch.arange(L, device=states.device)
        if self.stopping:
            h_raw = torch.sigmoid(states @ self.halt_w + self.halt_b)  # (B, L)
            h = torch.cat([h_raw[:, :-1], torch.ones_like(h_raw[:, -1:])], -1)  # h_L = 1
            go_on = torch.cumprod(torch.cat([torch.ones_like(h[:, :1]), 1 - h[:, :-1]], -1), -1)  # Π_{j<l}(1-h_j)
            halt_probs = h * go_on  # (B, L) π_l
            stop = (h_raw > self.halt_threshold) | (steps == L - 1)  # (B, L)
            hops_used = stop.float().argmax(-1) + 1  # (B,)
            halted = h_raw.gather(-1, (hops_used - 1)[:, None])[:, 0] > self.halt_threshold  # (B,)
        else:
            halt_probs = F.one_hot(torch.full((B,), L - 1, device=states.device), L).float()  # (B, L)
            hops_used = torch.full((B,), L, device=states.device)
            halted = torch.zeros(B, dtype=torch.bool, device=states.device)
        logits = hop_logits.gather(1, (hops_used - 1)[:, None, None].expand(B, 1, A))[:, 0]  # (B, A)
        return logits, hops_used, halted, halt_probs

    def _loss(self, batch: Batch, hop_logits: Tensor, halt_probs: Tensor, attention: Tensor) -> Tensor:
        """Summed over questions, as memnet.models.memn2n's loss (the trainer's lr expects it)."""
        B, L, A = hop_logits.shape
        answer = batch.answer  # (B,)
        ce = F.cross_entropy(hop_logits.reshape(-1, A), answer[:, None].expand(B, L).reshape(-1),
                             ignore_index=-1, reduction="none").view(B, L)  # (B, L) CE(â_l)
        if self.stopping:
            extra = torch.arange(L, device=ce.device, dtype=ce.dtype)  # (L,) l - 1
            per_question = (halt_probs * (ce + self.halt_cost * extra)).sum(-1)  # (B,)
        else:
            per_question = ce[:, -1]  # (B,)
        loss = (per_question * (answer >= 0)).sum()
        if self.attention_supervision > 0:  # layer l's head-averaged attention toward the l-th supporting fact
            n = min(L, batch.support.shape[-1])
            target = batch.support[:, :n]  # (B, n)
            p = attention[:, :n].gather(-1, target.clamp(min=0)[..., None])[..., 0]  # (B, n)
            loss = loss - self.attention_supervision * (p.clamp(min=1e-8).log() * (target >= 0)).sum()
        return loss
