"""Two trained readers and a gate over the question's words, as one model (model.type mixture).

    g(q) = σ(w · x(q) + c)                       x(q): which vocabulary words the question has
    p(a | story, q) = g(q) p_A(a) + (1 − g(q)) p_B(a)

With `confidence` the gate also reads how sure each reader is of its own answer: x(q) gains
max_a p_A(a) and max_a p_B(a), so that where the question's words leave the choice open, the
reader that is surer of its answer can take it.

The batch comes encoded with reader A's vocabulary; reader B reads the same words through its
own ids (`words`). Attention, hops and halting are reader A's (the memory network, whose hops
are what inspect shows); the answer, and each hop's answer, is the mixture's, and `share` says
how much of it is reader A's. experiments/readers/mix.py fits w and c. The mixture's config
(MixtureConfig) holds both readers' configs and reader B's vocabulary, so its checkpoint loads
through the registry like any model's (from_config).

Reader B may keep fewer memories than A (its data.memory_size): it then reads the most recent of
A's (`recent`), as it was trained. Reader A may itself be a mixture: (A ⊕ B) ⊕ C, a cascade
(mix_readers.py --then), whose attention is the innermost reader A's.
"""
from __future__ import annotations

import dataclasses
import json

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from memnet import config
from memnet.data import Batch, Vocab
from memnet.models import build_model
from memnet.models.result import Result


def question_words(batch: Batch, vocab_size: int) -> Tensor:
    """(N, V) float: 1 where the question has the word (padding and <unk> left out)."""
    x = torch.zeros(len(batch), vocab_size, device=batch.query.device)
    x.scatter_(1, batch.query, 1.0)
    x[:, :2] = 0
    return x


def confidences(logp_a: Tensor, logp_b: Tensor) -> Tensor:
    """(N, 2): each reader's probability of its own answer, max_a p(a), from log-probabilities (N, A)."""
    return torch.stack([logp_a.max(-1).values, logp_b.max(-1).values], dim=1).exp()


def gate_inputs(batch: Batch, vocab_size: int, logp_a: Tensor, logp_b: Tensor, confidence: bool) -> Tensor:
    """(N, V) the question's words, (N, V + 2) with `confidence`: the readers' top probabilities after them."""
    x = question_words(batch, vocab_size)
    return torch.cat([x, confidences(logp_a, logp_b)], dim=1) if confidence else x


def mixed(z: Tensor, logp_a: Tensor, logp_b: Tensor) -> Tensor:
    """log(g p_A + (1 − g) p_B) for g = σ(z), z (N,) and log-probabilities (N, A) or (N, K, A)
    (p_B may be (N, 1, A)): log g and log(1 − g) as log-sigmoids, finite where g rounds to 0 or 1."""
    z = z.reshape(z.shape + (1,) * (logp_a.dim() - 1))
    return torch.logaddexp(logp_a + F.logsigmoid(z), logp_b + F.logsigmoid(-z))


def recent(batch: Batch, memory_size: int) -> Batch:
    """The batch with only its `memory_size` most recent memories (slots 0..memory_size-1), as
    memnet.data encodes the same questions with that memory size; a supporting fact beyond it has slot -1."""
    if batch.story.shape[1] <= memory_size:
        return batch
    return dataclasses.replace(batch, story=batch.story[:, :memory_size], time=batch.time[:, :memory_size],
                               length=batch.length.clamp(max=memory_size),
                               support=batch.support.masked_fill(batch.support >= memory_size, -1))


def word_map(a: Vocab, b: Vocab) -> Tensor:
    """(len(a),) long: each of vocabulary a's word ids as vocabulary b's id (1, <unk>, where b
    lacks the word; padding stays 0)."""
    return torch.tensor([0] + [b.stoi.get(w, 1) for w in a.itos[1:]], dtype=torch.long)


class Mixture(nn.Module):
    def __init__(self, a: nn.Module, b: nn.Module, words: Tensor, names: tuple[str, str] = ("A", "B"),
                 confidence: bool = False, memory_b: int | None = None):
        super().__init__()
        self.a, self.b, self.names, self.confidence = a, b, names, confidence
        self.memory_b = memory_b  # reader B's memory size, where it keeps fewer memories than A
        self.register_buffer("words", words)  # (V_A,) A's word ids in B's vocabulary
        # w: one weight per question word (and with confidence, per reader's top probability)
        self.register_buffer("gate_w", torch.zeros(len(words) + 2 * confidence))
        self.register_buffer("gate_c", torch.zeros(()))  # c: g = 1/2 before fitting
        self.linear = False

    def gate(self, batch: Batch, logp_a: Tensor, logp_b: Tensor) -> Tensor:
        """(N,) z, the gate's logit: g = σ(z) is reader A's share; logp_a and logp_b (N, A) are
        the readers' answers, which the gate reads with `confidence`."""
        return gate_inputs(batch, len(self.words), logp_a, logp_b, self.confidence) @ self.gate_w + self.gate_c

    def as_b(self, batch: Batch) -> Batch:
        """The batch in reader B's word ids (and memories)."""
        batch = dataclasses.replace(batch, story=self.words[batch.story], query=self.words[batch.query])
        return recent(batch, self.memory_b) if self.memory_b else batch

    def combine(self, batch: Batch, a: Result, b: Result) -> Result:
        """The mixture's Result from each reader's on the same questions."""
        logp_a, logp_b = a.logits.log_softmax(-1), b.logits.log_softmax(-1)
        z = self.gate(batch, logp_a, logp_b)
        return a._replace(logits=mixed(z, logp_a, logp_b),
                          hop_logits=mixed(z, a.hop_logits.log_softmax(-1), logp_b[:, None]),
                          loss=None, share=torch.sigmoid(z))

    def forward(self, batch: Batch) -> Result:
        return self.combine(batch, self.a(batch), self.b(self.as_b(batch)))


def from_config(cfg: config.Config, vocab: Vocab) -> Mixture:
    """The mixture a MixtureConfig describes, its gate at g = 1/2 until its weights are loaded;
    `vocab` is reader A's."""
    a, b = (config.from_dict(json.loads(text)) for text in (cfg.model.a, cfg.model.b))
    b_vocab = Vocab.from_dict(json.loads(cfg.model.b_vocab))
    return Mixture(build_model(a, vocab), build_model(b, b_vocab), word_map(vocab, b_vocab), (a.model.type, b.model.type),
                   cfg.model.confidence, b.data.memory_size)
