"""The item reader: one read of the story for each item an answer can hold, for answers that are
sets of things.

A memory network, the pair reader and the word reader each score every answer phrase as one
class: 'apple,football' is a class of its own, learned from the few questions that have it
(58 lists among qa8's 900 training questions), and a softmax over the classes sets it against
'apple' and 'football'. Here an answer is the set of its items (the parts of a phrase between
commas, as the bAbI format writes a list; a one-word answer is a set of one), and each item k
is asked for on its own, with a read of the story of its own:

    m_i = Σ_w f_w ⊙ E x_iw + T(i)        u = Σ_w g_w ⊙ E q_w        (a learned mask per word position)
    α_k = softmax_i((u + c_k) · m_i)      o_k = Σ_i α_ki m_i          (c_k: item k's own vector)
    y_k = MLP([u; c_k; o_k; u ⊙ o_k; c_k ⊙ o_k])                      (one score: item k is in the answer)

A phrase a with the set of items S_a scores every item, in or out, and the order of its items by
where the story first names each: t_k is the age of the oldest memory holding item k's word (-1
where none does), older first where β > 0 (β learned from 0, so the order is learned, this way,
the other, or none):

    z(a) = Σ_{k ∈ S_a} log σ(y_k) + Σ_{k ∉ S_a} log σ(−y_k) + β Σ_p (t_{a_p} − t_{a_{p+1}})
    p(a) = softmax_a z(a) over the answer phrases of training

So every question trains every item: what says an apple is carried is learned from all the
questions, whether their answer is 'apple', 'apple,milk' or 'nothing', and a list is as likely
as its items are. Phrases with one set of items (orders of a list) differ only by β's term.
(bAbI writes a list's items in the order of the first supporting fact naming each, 58 of 58 lists
of qa8's training split; the order the story first names them agrees on 53. Ordered instead by
the age of what each item's read weighs, the reader did worse on valid: experiments/README.md.)
Nothing here reads a task: an answer word that is never part of a list ('nothing', 'yes', a
place) is an item like any other, and its score learns when it is the answer.

The Result's one "hop" is the reads of the answer's items averaged (the argmax phrase's).
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


def answer_items(answers: list[str]) -> tuple[list[str], Tensor, Tensor]:
    """(items, member (A, K), places (A, P)): the distinct parts of the answer phrases, sorted;
    1 where item k is in phrase a; each phrase's items by place, -1 after its last."""
    split = [a.split(",") for a in answers]
    items = sorted({w for parts in split for w in parts})
    index = {w: k for k, w in enumerate(items)}
    member = torch.zeros(len(answers), len(items))
    P = max((len(parts) for parts in split), default=1)
    places = torch.full((len(answers), P), -1, dtype=torch.long)
    for a, parts in enumerate(split):
        for p, w in enumerate(parts):
            member[a, index[w]] = 1.0
            places[a, p] = index[w]
    return items, member, places


class ItemReader(OwnDropout, nn.Module):
    has_linear_start = False  # no softmax-free phase: the trainer skips linear start

    def __init__(self, *, vocab_size: int, answers: list[str], memory_size: int, dim: int = 32, hidden: int = 64,
                 item_words: list[int], max_words: int = 20, temporal: bool = True, dropout: float = 0.0):
        super().__init__()
        self.dim, self.memory_size, self.temporal, self.dropout = dim, memory_size, temporal, dropout
        self.linear = False  # the trainer's linear-start switch; this model has none
        self.items, member, places = answer_items(answers)
        self.register_buffer("member", member, persistent=False)  # (A, K)
        self.register_buffer("places", places, persistent=False)  # (A, P)
        d, h, K = dim, hidden, len(self.items)

        def p(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.zeros(*shape))  # values come from reset_parameters

        self.emb = p(vocab_size, d)  # E
        self.story_mask, self.query_mask = p(max_words, d), p(max_words, d)  # f_w, g_w
        self.time = p(memory_size, d)  # T(i): a memory's age
        self.item = p(K, d)  # c_k
        self.y1, self.y1_b, self.y2, self.y2_b = p(5 * d, h), p(h), p(h), p(())  # the item's score
        self.order = p(())  # β
        if len(item_words) != K:
            raise ValueError(f"item_words: expected a word id for each of the {K} items, found {len(item_words)}")
        # (K,) each item's word id, 0 where it is no word of the vocabulary (no memory names it)
        self.register_buffer("item_words", torch.tensor(item_words, dtype=torch.long), persistent=False)
        self.reset_parameters(torch.Generator().manual_seed(0))

    def reset_parameters(self, generator: torch.Generator, std: float = 1.0) -> None:
        """E and c from N(0, std), T(i) from 0, the word masks from 1 (bag of words), weight matrices
        N(0, 1/fan_in), biases and β 0; with dropout, its own random numbers seeded from `generator`
        last (without, nothing more is drawn)."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name in ("emb", "item"):
                    p.copy_(torch.randn(p.shape, generator=generator) * std)
                elif name.endswith("_mask"):
                    p.fill_(1.0)
                elif name in ("y1", "y2"):
                    p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[0]))
                else:
                    p.zero_()
        self.seed_noise(generator if self.dropout else None)

    def read(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """Each item's attention α (B, K, M) (0 on padding) and score y (B, K)."""
        m = masked_words(self.emb, batch.story, self.story_mask)  # (B, M, d)
        if self.temporal:
            m = m + self.time[batch.time.clamp(max=self.memory_size - 1)]
        u = masked_words(self.emb, batch.query, self.query_mask)  # (B, d)
        B, M, d = m.shape
        K = self.item.shape[0]
        q = u[:, None] + self.item  # (B, K, d)
        real = (torch.arange(M, device=m.device) < batch.length[:, None])[:, None]  # (B, 1, M)
        alpha = (q @ m.transpose(1, 2)).masked_fill(~real, -1e30).softmax(-1) * real  # (B, K, M)
        o = alpha @ m  # (B, K, d)
        uu, c = u[:, None].expand(B, K, d), self.item.expand(B, K, d)
        x = self.drop(F.relu(torch.cat([uu, c, o, uu * o, c * o], -1) @ self.y1 + self.y1_b))
        return alpha, x @ self.y2 + self.y2_b

    def forward(self, batch: Batch) -> Result:
        alpha, y = self.read(batch)
        B = y.shape[0]
        z = F.logsigmoid(y) @ self.member.T + F.logsigmoid(-y) @ (1 - self.member).T  # (B, A) the set's score
        places = self.places  # (A, P)
        if places.shape[1] > 1:  # β Σ_p (t of place p − t of place p+1), over the places a phrase fills
            t = self.first_named(batch)[:, places.clamp(min=0)]  # (B, A, P)
            both = (places[:, :-1] >= 0) & (places[:, 1:] >= 0)  # (A, P-1)
            z = z + self.order * ((t[..., :-1] - t[..., 1:]) * both).sum(-1)
        logits = z.log_softmax(-1)  # (B, A)
        chosen = self.member[logits.argmax(-1)]  # (B, K) the items of each answer given
        attention = (chosen[..., None] * alpha).sum(1) / chosen.sum(-1, keepdim=True).clamp(min=1)  # (B, M)
        answered = batch.answer >= 0
        loss = None
        if bool(answered.any()):
            loss = -(logits.gather(1, batch.answer.clamp(min=0)[:, None])[:, 0] * answered).sum()
        return Result(logits=logits, attention=attention[:, None],
                      hops_used=torch.ones(B, dtype=torch.long, device=y.device),
                      halted=torch.zeros(B, dtype=torch.bool, device=y.device), hop_logits=logits[:, None],
                      halt_probs=logits.new_ones(B, 1), loss=loss)

    def first_named(self, batch: Batch) -> Tensor:
        """(B, K) the age of the oldest memory in which each item's word stands (-1: none)."""
        M = batch.story.shape[1]
        real = torch.arange(M, device=batch.story.device) < batch.length[:, None]  # (B, M)
        words = self.item_words  # (K,)
        named = (batch.story[:, None] == words[None, :, None, None]).any(-1)  # (B, K, M)
        named = named & real[:, None] & (words > 0)[None, :, None]
        return torch.where(named, batch.time[:, None], -1).amax(-1).float()  # (B, K)
