"""The pair reader: attention over ordered pairs of memories, for answers that join two facts.

A memory network's hop reads one memory, chosen from what the earlier hops read. On qa19
("How do you go from the kitchen to the garden?") the start is named by two to four facts
on most questions, and which of them leads on only the goal's fact tells: hop 1 cannot
choose (docs/results.md, "The answer with the facts given"). The pair reader chooses both
facts at once, scoring every ordered pair (i, j) of memories:

    m_i = Σ_w f_w ⊙ E x_iw + T(i)        u = Σ_w g_w ⊙ E q_w        (a learned mask per word position)
    φ_ij = [u; m_i; m_j; u ⊙ m_i; u ⊙ m_j; m_i ⊙ m_j]
    p_ij = softmax_ij( s(φ_ij) )                          s: an MLP to one score; i = j allowed (one fact)
    p(a) = Σ_ij p_ij softmax(â(φ_ij))(a)                  â: an MLP to the answer scores

The product m_i ⊙ m_j is what lets the score see that two sentences name the same place. With
`places`, â scores each word at each place of an answer phrase and a phrase scores the sum of
its words' ('n,e' = n first + e second), as the probe that answers qa19 from its two facts does
(scripts/probe_answers.py); else one score per phrase. With `place_facts` each place reads one
fact of the pair instead of the whole pair, place 1 the first and every later place the second,

    â_ij(a) = f([u; m_i; u ⊙ m_i])(a_1) + Σ_{p>1} g([u; m_j; u ⊙ m_j])(a_p)        f, g: MLPs to a score per word

as a path's k-th step comes from its k-th fact (qa19): a pair's answer can then be right only
through its facts, not through a memory of the whole story, which is what lets the reader find
qa19's pairs without supervision.

The Result's two "hops" are the pair's first and second fact: hop 1's attention over memory i
is Σ_j p_ij, hop 2's is Σ_i p_ij, so hop accuracy and attention tables read as a memory network's.
Attention supervision trains p toward the pair of the first two supporting facts (a fact
with itself where there is one). The cost is quadratic in the memories: M² pairs per question,
the first layers computing per pair only the part that reads m_i ⊙ m_j.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memnet.data import Batch
from experiments.readers.dropout import OwnDropout
from memnet.models.result import Result
from memnet.models.transformer import masked_words

NONE = "<none>"  # the word of a place a shorter phrase does not reach


def phrase_places(answers: list[str]) -> Tensor:
    """(A, P) each answer phrase's word at each place, as indices into sorted words then NONE:
    'n,e' -> [n, e]; 'n' -> [n, NONE] when the longest phrase has two places."""
    split = [a.split(",") for a in answers]
    words = sorted({w for parts in split for w in parts}) + [NONE]
    P = max((len(parts) for parts in split), default=1)
    index = {w: i for i, w in enumerate(words)}
    return torch.tensor([[index[p] for p in parts] + [index[NONE]] * (P - len(parts)) for parts in split],
                        dtype=torch.long).view(len(answers), P)


class PairReader(OwnDropout, nn.Module):
    has_linear_start = False  # no softmax-free phase: the trainer skips linear start

    def __init__(self, *, vocab_size: int, answers: list[str], memory_size: int, dim: int = 32, hidden: int = 128,
                 max_words: int = 20, temporal: bool = True, places: bool = True, place_facts: bool = False,
                 dropout: float = 0.1, attention_supervision: float = 0.0):
        super().__init__()
        self.dim, self.memory_size, self.temporal, self.dropout = dim, memory_size, temporal, dropout
        self.attention_supervision = attention_supervision
        self.linear = False  # the trainer's linear-start switch; this model has none
        d, h = dim, hidden
        if places:
            self.register_buffer("places", phrase_places(answers), persistent=False)  # (A, P)
            n_out = self.places.shape[1] * (int(self.places.max()) + 1)
        else:
            self.places = None
            n_out = len(answers)

        def p(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.zeros(*shape))  # values come from reset_parameters

        self.emb = p(vocab_size, d)  # E
        self.story_mask, self.query_mask = p(max_words, d), p(max_words, d)  # f_w, g_w
        self.time = p(memory_size, d)  # T(i): a memory's age
        self.s1, self.s1_b, self.s2, self.s2_b, self.s3 = p(6 * d, h), p(h), p(h, h), p(h), p(h)  # the pair's score
        self.place_facts = place_facts
        if place_facts:  # a score per word from one fact: f for place 1, g for the later places
            if self.places is None:
                raise ValueError("place_facts scores an answer by places: it needs places")
            words = n_out // self.places.shape[1]
            self.f1, self.f1_b, self.f2, self.f2_b = p(3 * d, h), p(h), p(h, words), p(words)
            self.g1, self.g1_b, self.g2, self.g2_b = p(3 * d, h), p(h), p(h, words), p(words)
        else:
            self.a1, self.a1_b, self.a2, self.a2_b = p(6 * d, h), p(h), p(h, h), p(h)
            self.a3, self.a3_b = p(h, n_out), p(n_out)
        self.reset_parameters(torch.Generator().manual_seed(0))

    def reset_parameters(self, generator: torch.Generator, std: float = 1.0) -> None:
        """Embeddings from N(0, std), T(i) from 0, the word masks from 1 (bag of words), weight
        matrices N(0, 1/fan_in), biases 0; the dropout's own random numbers seeded from `generator`
        too, so a restart trains the same whatever ran before it (torch's global generator would not)."""
        self.seed_noise(generator)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name == "emb":
                    p.copy_(torch.randn(p.shape, generator=generator) * std)
                elif name.endswith("_mask"):
                    p.fill_(1.0)
                elif name in ("s1", "s2", "s3", "a1", "a2", "a3", "f1", "f2", "g1", "g2"):
                    p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[0]))
                else:
                    p.zero_()

    def sentences(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """The memories m (B, M, d) and the question u (B, d)."""
        m = masked_words(self.emb, batch.story, self.story_mask)
        if self.temporal:
            m = m + self.time[batch.time.clamp(max=self.memory_size - 1)]
        return m, masked_words(self.emb, batch.query, self.query_mask)

    def read(self, batch: Batch) -> tuple[Tensor, Tensor, Tensor]:
        """The pairs' probabilities p (B, M, M) (0 where i or j is padding), each pair's answer
        scores â_ij (B, M, M, A) and which pairs are real (B, M, M)."""
        m, u = self.sentences(batch)
        B, M, d = m.shape
        um, mm = u[:, None] * m, m[:, :, None] * m[:, None, :]  # u ⊙ m_i (B, M, d), m_i ⊙ m_j (B, M, M, d)

        def first_layer(w: Tensor, b: Tensor) -> Tensor:
            """φ_ij @ w + b (B, M, M, h), with only m_i ⊙ m_j's part computed per pair."""
            wu, wi, wj, wui, wuj, wij = w.split(d)
            return ((u @ wu + b)[:, None, None] + (m @ wi + um @ wui)[:, :, None] + (m @ wj + um @ wuj)[:, None, :]
                    + mm @ wij)

        score = F.relu(F.relu(first_layer(self.s1, self.s1_b)) @ self.s2 + self.s2_b) @ self.s3  # (B, M, M)
        real = torch.arange(M, device=m.device) < batch.length[:, None]  # (B, M)
        real = real[:, :, None] & real[:, None, :]
        p = score.masked_fill(~real, -1e30).flatten(1).softmax(-1).view(B, M, M) * real
        if self.place_facts:
            return p, self.by_facts(torch.cat([u[:, None].expand(B, M, d), m, um], -1)), real
        x = self.drop(F.relu(first_layer(self.a1, self.a1_b)))
        return p, self.by_places(F.relu(x @ self.a2 + self.a2_b) @ self.a3 + self.a3_b), real

    def by_facts(self, x: Tensor) -> Tensor:
        """With place_facts: each pair's answer scores (B, M, M, A) from each memory's [u; m_i; u ⊙ m_i]
        (B, M, 3d), place 1 of a phrase read from fact i by f, its later places from fact j by g."""
        first = self.drop(F.relu(x @ self.f1 + self.f1_b)) @ self.f2 + self.f2_b  # (B, M, W) a score per word
        later = self.drop(F.relu(x @ self.g1 + self.g1_b)) @ self.g2 + self.g2_b  # (B, M, W)
        by_first = first[..., self.places[:, 0]]  # (B, M, A) each phrase's first word, read from fact i
        by_later = later[..., self.places[:, 1:]].sum(-1)  # (B, M, A) its later words, read from fact j
        return by_first[:, :, None] + by_later[:, None, :]

    def by_places(self, out: Tensor) -> Tensor:
        """The answer MLP's outputs (..., n_out) -> each answer phrase's score (..., A): with
        places, the sum over its places of its word's score there."""
        if self.places is None:
            return out
        A, P = self.places.shape
        by_place = out.unflatten(-1, (P, -1))  # (..., P, W) a score per place and word
        return by_place[..., torch.arange(P, device=out.device), self.places].sum(-1)  # (..., A)

    def forward(self, batch: Batch) -> Result:
        p, answers, real = self.read(batch)
        B, M = p.shape[:2]
        answer = answers.log_softmax(-1) + p.clamp(min=1e-30).log()[..., None]  # (B, M, M, A) log p_ij p(a | ij)
        logits = answer.masked_fill(~real[..., None], -1e30).flatten(1, 2).logsumexp(1)  # (B, A) log p(a)
        attention = torch.stack([p.sum(2), p.sum(1)], 1)  # (B, 2, M) the first and the second of the pair
        loss = self._loss(batch, logits, p) if bool((batch.answer >= 0).any()) else None
        return Result(logits=logits, attention=attention, hops_used=torch.full((B,), 2, device=p.device),
                      halted=torch.zeros(B, dtype=torch.bool, device=p.device),
                      hop_logits=logits[:, None].expand(B, 2, -1), halt_probs=p.new_tensor([0.0, 1.0]).expand(B, 2),
                      loss=loss)

    def _loss(self, batch: Batch, logits: Tensor, p: Tensor) -> Tensor:
        """−Σ log p(answer) over the questions with one, plus attention_supervision times −Σ log p
        of the supporting pair (the first two facts; the first twice where there is one) over the
        questions whose pair is in memory."""
        answered = batch.answer >= 0
        loss = -(logits.gather(1, batch.answer.clamp(min=0)[:, None])[:, 0] * answered).sum()
        if self.attention_supervision > 0 and batch.support.shape[1] > 0:
            first = batch.support[:, 0]
            second = torch.where(batch.n_support > 1, batch.support[:, min(1, batch.support.shape[1] - 1)], first)
            known = (first >= 0) & (second >= 0)
            target = p[torch.arange(len(p)), first.clamp(min=0), second.clamp(min=0)]
            loss = loss - self.attention_supervision * (target.clamp(min=1e-30).log() * known).sum()
        return loss
