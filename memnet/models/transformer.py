"""A transformer reader (Vaswani et al. 2017, arXiv:1706.03762) over the memory network's input,
and its Universal Transformer variant (Dehghani et al. 2019, arXiv:1807.03819).

Each sentence becomes one vector as in the memory network (memnet.model): position encoding
over its words, m_i = Σ_j l_j · E x_ij + T(i), with T(i) the temporal encoding of the memory's
age i; the question is u = Σ_j l_j · E q_j + T_q. `model.encoding: mask` takes the Universal
Transformer paper's encoding instead (its §3.1, after Henaff et al. 2016): a learned
multiplicative mask per word position, m_i = Σ_j f_j ⊙ E x_ij and u = Σ_j g_j ⊙ E q_j, with f
and g (max_words, d) starting at 1. The sequence [u, m_0, .., m_{M-1}] then goes through L
layers of multi-head self-attention (post-LayerNorm, as in the paper):

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
step encoding before each, as the Universal Transformer does. Two ways to stop early:
- `model.stopping`: the question's state drives a halting unit after every layer (the memory
  network's rule, see memnet.model): adaptive computation per question.
- `model.act`: the paper's dynamic halting, ACT per position (memnet.models.act): the question
  and every memory halt on their own, p_t^i = σ(W_h s_t^i + b_h), within L steps; each
  position's output is Σ_t w_t^i s_t^i. The answer is read from the question's:
  â = W_a Σ_t w_t u_t + b_a = Σ_t w_t â_t, and the loss adds ponder_cost · mean_i (N^i + R^i)
  per question. The question's steps N are the Result's hops_used.

The model holds one seed, as every model does (restarts are several models, see memnet.trainer).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memnet.data import Batch
from memnet.errors import MemnetError
from memnet.models.act import Ponder, act_step
from memnet.models.result import Result

# ACT's halting bias starts at tensor2tensor's act_halting_bias_init: p ≈ σ(1) = 0.73, so at
# first every position halts at its second step
ACT_BIAS_INIT = 1.0


class Reading(NamedTuple):
    """The Result plus the question's attention per layer and head (what Result averages)."""

    result: Result
    heads: Tensor  # (B, L, H, M) the question's attention over memories per layer and head; 0 for layers not taken
    scores: Tensor  # (B, L, H, M) the question's attention scores before the softmax (padding: -1e30)
    steps: Tensor | None = None  # (B, 1 + M) with model.act: N^i, the steps each position took (question first)


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


def masked_words(emb: Tensor, words: Tensor, mask: Tensor) -> Tensor:
    """Word ids (..., J) -> sentence vectors (..., d): Σ_j f_j ⊙ E x_j, with the embedding E
    (V, d) and the learned mask f (max_words, d); padding (id 0) adds nothing."""
    real = words != 0  # (..., J)
    W = mask.shape[0]
    if bool(real[..., W:].any()):
        raise MemnetError(f"a sentence has more than model.max_words = {W} words (the word positions the learned "
                          "masks cover); train with a larger model.max_words")
    n = min(words.shape[-1], W)
    return (mask[:n] * emb[words[..., :n]] * real[..., :n, None]).sum(-2)


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
                 max_words: int = 20, temporal: bool = True, stopping: bool = False, halt_cost: float = 0.01,
                 halt_threshold: float = 0.5, act: bool = False, act_epsilon: float = 0.01, ponder_cost: float = 0.01,
                 attention_supervision: float = 0.0):
        super().__init__()
        self.universal, self.dim, self.layers, self.heads, self.scale = universal, dim, layers, heads, scale
        self.encoding, self.temporal, self.memory_size = encoding, temporal, memory_size
        self.stopping, self.halt_cost, self.halt_threshold = stopping, halt_cost, halt_threshold
        self.act, self.act_epsilon, self.ponder_cost = act, act_epsilon, ponder_cost
        self.attention_supervision = attention_supervision
        self.linear = False
        d, f = dim, ff_dim
        n = 1 if universal else layers  # layers with their own weights

        def p(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.zeros(*shape))  # values come from reset_parameters

        self.emb = p(vocab_size, d)  # E, word embeddings shared by sentences and question
        if encoding == "mask":
            self.story_mask, self.query_mask = p(max_words, d), p(max_words, d)  # f_j, g_j
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
        if act:
            self.act_w, self.act_b = p(d), p(1)  # W_h, b_h: ACT's p_t^i = σ(W_h s_t^i + b_h), every position
        self.reset_parameters(torch.Generator().manual_seed(0))

    def reset_parameters(self, generator: torch.Generator, std: float = 0.1) -> None:
        """Embeddings from N(0, std); weight matrices N(0, 1/fan_in), which keeps activations at
        unit scale; LayerNorm gains and the word masks start at 1 (the masks: bag of words, as the
        paper's code), biases at 0, ACT's halting bias at ACT_BIAS_INIT."""
        small = ("emb", "time", "question", "step", "halt_w", "act_w")
        matrices = ("wq", "wk", "wv", "wo", "w1", "w2", "wa")
        ones = ("story_mask", "query_mask")
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name in small:
                    p.copy_(torch.randn(p.shape, generator=generator) * std)
                elif name in matrices:
                    p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[-2]))
                elif name == "act_b":
                    p.fill_(ACT_BIAS_INIT)
                else:
                    p.fill_(1.0 if name.endswith("gain") or name in ones else 0.0)

    def _sentences(self, words: Tensor, mask: Tensor | None = None) -> Tensor:
        """Word ids (..., J) -> sentence vectors (..., d). pe: Σ_j l_j · E x_j, with the position
        encoding l_kj = (1 - j/J) - (k/d)(1 - 2j/J) over each sentence's own length J; mask:
        Σ_j f_j ⊙ E x_j with the learned mask (max_words, d) given."""
        if self.encoding == "mask":
            return masked_words(self.emb, words, mask)
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

    def _embed(self, batch: Batch) -> tuple[Tensor, Tensor, Tensor]:
        """The sequence [u, m_0, .., m_{M-1}] (B, T, d), T = 1 + M; which keys each row may read
        (B, 1, T, T); the real positions, the question and its memories (B, T)."""
        B, M, _ = batch.story.shape
        masks = (self.story_mask, self.query_mask) if self.encoding == "mask" else (None, None)
        memory = self._sentences(batch.story, masks[0])  # (B, M, d) Σ_j l_j E x_ij
        if self.temporal:
            memory = memory + self.time[batch.time.clamp(max=self.memory_size - 1)]  # + T(i)
        u = self._sentences(batch.query, masks[1]) + self.question  # (B, d)
        x = torch.cat([u[:, None], memory], 1)  # (B, T, d) question first
        x = layer_norm(x, self.ln0_gain, self.ln0_bias)  # unit scale: the first layer's scores start informative

        real = torch.arange(M, device=x.device) < batch.length[:, None]  # (B, M)
        keys = torch.cat([torch.ones_like(real[:, :1]), real], -1)  # (B, T) question and real memories
        allowed = keys[:, None, :].expand(-1, M + 1, -1).clone()  # (B, T, T) row i may read key j
        allowed[:, 0, 0] = False  # the question reads memories only: its own state flows through the residual
        return x, allowed[:, None], keys  # allowed (B, 1, T, T): the same for every head

    def _layers(self, x: Tensor, allowed: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """L layers (universal: the one layer L times). The question's state (B, L, d), and its
        attention and scores over memories (B, L, H, M), after each."""
        states, heads, scores = [], [], []
        for l in range(self.layers):
            if self.universal:
                x = x + self.step[l]
            x, w, sc = self._layer(x, allowed, 0 if self.universal else l)
            states.append(x[:, 0])  # (B, d) u_l
            heads.append(w[:, :, 0, 1:])  # (B, H, M) the question's row over memories
            scores.append(sc[:, :, 0, 1:])
        return torch.stack(states, 1), torch.stack(heads, 1), torch.stack(scores, 1)

    def _act(self, x: Tensor, allowed: Tensor, real: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Ponder]:
        """The shared layer with ACT per position (memnet.models.act), for up to L steps or until
        every real position has halted. The question's state (B, L, d) and its attention and
        scores (B, L, H, M) after each step, its ACT weights w_t (B, L), and the ACT record. A
        step no position ran keeps the states; its scores are -1e30."""
        L = self.layers
        ponder = Ponder.start(x, real)
        states, heads, scores, weights = [], [], [], []
        for t in range(L):
            if not bool(ponder.running.any()):
                break
            new, w, sc = self._layer(x + self.step[t], allowed, 0)  # (B, T, d) s_t, every position
            p = torch.sigmoid(new @ self.act_w + self.act_b)  # (B, T) p_t^i
            ponder, x, weight = act_step(ponder, x, new, p, last=t == L - 1, epsilon=self.act_epsilon)
            states.append(x[:, 0])  # (B, d) u_t; the question's last state once it has halted
            heads.append(w[:, :, 0, 1:])  # (B, H, M)
            scores.append(sc[:, :, 0, 1:])
            weights.append(weight[:, 0])  # (B,) the question's w_t
        for _ in range(L - len(states)):  # steps no position needed
            states.append(x[:, 0])
            heads.append(torch.zeros_like(heads[0]))
            scores.append(torch.full_like(scores[0], -1e30))
            weights.append(torch.zeros_like(weights[0]))
        return (torch.stack(states, 1), torch.stack(heads, 1), torch.stack(scores, 1), torch.stack(weights, 1),
                ponder)

    def read(self, batch: Batch) -> Reading:
        """The Result and the question's attention per layer and head."""
        x, allowed, real = self._embed(batch)
        ponder = None
        if self.act:
            states, heads, scores, halt_probs, ponder = self._act(x, allowed, real)
        else:
            states, heads, scores = self._layers(x, allowed)  # (B, L, d), (B, L, H, M) twice
        hop_logits = states @ self.wa + self.ba  # (B, L, A) â_l
        if ponder is None:
            logits, hops_used, halted, halt_probs = self._halt(states, hop_logits)
        else:
            logits = ponder.output[:, 0] @ self.wa + self.ba  # (B, A) â = W_a Σ_t w_t u_t + b_a
            hops_used, halted = ponder.steps[:, 0], ponder.halted[:, 0]  # the question's N, and what stopped it
        loss = None
        if bool((batch.answer >= 0).any()):
            per_question = self._answer_loss(batch, logits, hop_logits, halt_probs)
            if ponder is not None:  # + τ mean_i (N^i + R^i) over the question and its real memories
                per_question = per_question + self.ponder_cost * ponder.cost().sum(-1) / real.sum(-1)
            loss = self._loss(batch, per_question, heads.mean(2))
        steps = torch.arange(self.layers, device=x.device)
        heads = heads * (steps < hops_used[:, None])[..., None, None]  # layers not taken read nothing
        result = Result(logits, heads.mean(2), hops_used, halted, hop_logits, halt_probs, loss)
        return Reading(result, heads, scores, None if ponder is None else ponder.steps)

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

    def _answer_loss(self, batch: Batch, logits: Tensor, hop_logits: Tensor, halt_probs: Tensor) -> Tensor:
        """Each question's answer loss (B,): CE of the answer (with ACT: of the ACT-weighted
        state's); with stopping, the expected CE over the halting distribution plus the cost of
        the extra layers."""
        B, L, A = hop_logits.shape
        answer = batch.answer  # (B,)
        if self.act:
            return F.cross_entropy(logits, answer, ignore_index=-1, reduction="none")
        ce = F.cross_entropy(hop_logits.reshape(-1, A), answer[:, None].expand(B, L).reshape(-1),
                             ignore_index=-1, reduction="none").view(B, L)  # (B, L) CE(â_l)
        if self.stopping:
            extra = torch.arange(L, device=ce.device, dtype=ce.dtype)  # (L,) l - 1
            return (halt_probs * (ce + self.halt_cost * extra)).sum(-1)
        return ce[:, -1]

    def _loss(self, batch: Batch, per_question: Tensor, attention: Tensor) -> Tensor:
        """Summed over questions, as memnet.models.memn2n's loss (the trainer's lr expects it)."""
        L = attention.shape[1]
        loss = (per_question * (batch.answer >= 0)).sum()
        if self.attention_supervision > 0:  # layer l's head-averaged attention toward the l-th supporting fact
            n = min(L, batch.support.shape[-1])
            target = batch.support[:, :n]  # (B, n)
            p = attention[:, :n].gather(-1, target.clamp(min=0)[..., None])[..., 0]  # (B, n)
            loss = loss - self.attention_supervision * (p.clamp(min=1e-8).log() * (target >= 0)).sum()
        return loss
