"""The word reader: every question word reads the story's words, for answers that need to know
which fact names which thing.

A memory network and the pair reader see a sentence as one vector, the sum of its words'
embeddings (with a learned weight per word position). On qa17 ("The red sphere is to the left
of the yellow square. The red sphere is below the pink rectangle. Is the pink rectangle to the
right of the yellow square?") the answer turns on which fact names which shape, and the shapes'
positions in the sentences vary with their words: from the two facts given, a reader of such
vectors stays at 38% error (docs/results.md, "The answer with the facts given"). Here each
word keeps its own vector, read in context, and each word of the question looks for its match
among the story's words:

    s_ij = BiGRU(E x_i)_j + T(i)        q_t = BiGRU(E q)_t             (2d each, T(i) from zero)
    α_t,ij = softmax_ij(q_t · s_ij)      a_t = Σ_ij α_t,ij s_ij          (the story's words, padding out)
    h_t = BiGRU([q_t; a_t; q_t ⊙ a_t; q_t − a_t])_t                     (compared word by word)
    p(a) = softmax(MLP([max_t h_t; mean_t h_t]))                        (the question's words pooled)

With `list_answers` (list_parts), a list's logit adds its items' to its own: z('apple,milk') =
y('apple,milk') + y('apple') + y('milk'), where y is the MLP's output. What tells that an item is
carried then counts toward every list holding it, learned from the questions whose answer is the
item alone, instead of from the list's own few questions; the list's own output keeps the order
('apple,milk' against 'milk,apple').

With `list_order` (list_words, the summed read needed), at inference a list's items go in the
order the story first names them among the sentences whose gate is open (logit above 0; with
attention supervision, the facts the reader takes for supporting facts): the probability of every
order of one set of items goes to the orders the facts give ('apple,milk' where the oldest open
sentence naming the apple is older than the oldest naming the milk), shared equally where several
do; where no order of the set agrees, or an item is named by no open sentence, it stays as it
was. bAbI's lists are in that order (the first supporting fact naming each item: 58 of 58 pairs
in qa8's training split), which a list's own output learns from a few dozen questions.

With `summed`, each question word also reads c_t = Σ_ij σ(q_t · s_ij + b) s_ij (b learned from
−4), appended to the compared input: how many of the story's words match, where a_t is their
mean. The comparing GRU squashes what it reads (its gates are sigmoids and tanhs), so what it
passes on of a count is bounded; with `summed_out` the answer's layer also reads mean_t c_t,
which grows with each telling of a fact. Attention supervision (`train.attention_supervision`)
acts on the summed read's gates: each sentence's gate logit, the highest of its words' for any
question word, is pulled by binary cross-entropy toward [the sentence is a supporting fact].

Each direction of a BiGRU reads only a sentence's own words (padding neither enters its state
nor depends on the batch), so a question's answer does not depend on the questions batched
with it. The reader has no hops and no order between facts other than T(i): the Result's one
"hop" is the attention of the question's words summed per sentence and averaged over them.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from memnet.data import Batch
from experiments.readers.dropout import OwnDropout
from memnet.models.result import Result


GATE_INIT = -4.0  # the summed read's gate bias at the start: each word's gate nearly shut


def list_parts(answers: list[str]) -> Tensor:
    """(A, A): [a, o] = 1 where answer o is one item of the list answer a ('apple,milk' holds
    'apple' and 'milk'); items that are no answer of their own are left out."""
    index = {a: i for i, a in enumerate(answers)}
    parts = torch.zeros(len(answers), len(answers))
    for a, answer in enumerate(answers):
        if "," in answer:
            for item in answer.split(","):
                if item in index:
                    parts[a, index[item]] = 1.0
    return parts


class BiGRU(nn.Module):
    """A bidirectional GRU over padded sequences (..., J, n) -> (..., J, 2h): each direction
    starts at its sequence's own first real word, padding kept out of the state (outputs 0 there)."""

    def __init__(self, n: int, h: int):
        super().__init__()
        self.forward_cell, self.backward_cell = nn.GRUCell(n, h), nn.GRUCell(n, h)

    def forward(self, x: Tensor, real: Tensor) -> Tensor:
        shape, J = x.shape[:-2], x.shape[-2]
        x, real = x.reshape(-1, J, x.shape[-1]), real.reshape(-1, J, 1)
        outputs = []
        for cell, steps in ((self.forward_cell, range(J)), (self.backward_cell, reversed(range(J)))):
            h = x.new_zeros(x.shape[0], cell.hidden_size)
            out = [None] * J
            for j in steps:
                h = torch.where(real[:, j], cell(x[:, j], h), h)
                out[j] = h * real[:, j]
            outputs.append(torch.stack(out, 1))
        return torch.cat(outputs, -1).view(*shape, J, -1)


class WordReader(OwnDropout, nn.Module):
    has_linear_start = False  # no softmax-free phase: the trainer skips linear start

    def __init__(self, *, vocab_size: int, n_answers: int, memory_size: int, dim: int = 32, hidden: int = 64,
                 temporal: bool = True, dropout: float = 0.0, summed: bool = False, summed_out: bool = False,
                 list_parts: Tensor | None = None, list_words: list[list[int]] | None = None,
                 attention_supervision: float = 0.0):
        super().__init__()
        if (summed_out or attention_supervision) and not summed:
            raise ValueError("summed_out and attention_supervision act on the summed read; they need summed")
        self.dim, self.memory_size, self.temporal, self.dropout, self.summed = dim, memory_size, temporal, dropout, summed
        self.summed_out, self.attention_supervision = summed_out, attention_supervision
        self.linear = False  # the trainer's linear-start switch; this model has none
        d = dim
        self.emb = nn.Parameter(torch.zeros(vocab_size, d))  # E; values come from reset_parameters
        self.time = nn.Parameter(torch.zeros(memory_size, 2 * d))  # T(i): a memory's age
        self.encode = BiGRU(d, d)  # each sentence's words in context, and the question's
        self.compare = BiGRU((10 if summed else 8) * d, d)  # each question word beside what it found
        self.out = nn.Sequential(nn.Linear((6 if summed_out else 4) * d, hidden), nn.ReLU(), nn.Linear(hidden, n_answers))
        if summed:  # registered last: without it the weights drawn are those of before
            self.gate_bias = nn.Parameter(torch.tensor(GATE_INIT))  # b, shared by every word's gate
        # (A, A) 1 where answer class o is an item of list class a (list_parts); None: each class its own output
        self.register_buffer("list_parts", list_parts, persistent=False)
        self.list_order = list_words is not None
        if self.list_order:
            if not summed:
                raise ValueError("list_order orders a list by the facts the summed read's gates open; it needs summed")
            P = max(2, *(len(w) for w in list_words))
            # (A, P) each list's item words in its order, 0 after its last; 0 everywhere for a single answer
            words = torch.tensor([w + [0] * (P - len(w)) if len(w) > 1 else [0] * P for w in list_words])
            sets = {}
            group = torch.tensor([sets.setdefault(frozenset(w) if len(w) > 1 else ("single", a), len(sets))
                                  for a, w in enumerate(list_words)])
            self.register_buffer("list_words", words, persistent=False)
            # (A, G) one-hot: the set of items of each class (a single answer is a set of its own)
            self.register_buffer("list_sets", F.one_hot(group).float(), persistent=False)
        self.reset_parameters(torch.Generator().manual_seed(0))

    def reset_parameters(self, generator: torch.Generator, std: float = 1.0) -> None:
        """Embeddings from N(0, std), T(i) from 0, every other weight from U(-1/√fan, 1/√fan)
        (torch's default for GRUs and linear layers; fan: a GRU's hidden size, a layer's inputs),
        biases too: all drawn from `generator`, so a restart trains the same whatever ran before it;
        with dropout, its own random numbers are seeded from `generator` last (without, nothing
        more is drawn, and the restart's data order stays what it was)."""
        with torch.no_grad():
            self.emb.copy_(torch.randn(self.emb.shape, generator=generator) * std)
            self.time.zero_()
            for name, p in self.named_parameters():
                if name in ("emb", "time"):
                    continue
                if name == "gate_bias":
                    p.fill_(GATE_INIT)
                    continue
                if name.startswith(("encode", "compare")):
                    fan = self.dim
                else:  # out.0 / out.2: a linear layer's inputs
                    layer = self.out[int(name.split(".")[1])]
                    fan = layer.in_features
                bound = 1 / math.sqrt(fan)
                p.copy_((torch.rand(p.shape, generator=generator) * 2 - 1) * bound)
        self.seed_noise(generator if self.dropout else None)

    def forward(self, batch: Batch) -> Result:
        story, query = batch.story, batch.query  # (B, M, J), (B, Jq) word ids, 0 for padding
        B, M, J = story.shape
        in_memory = torch.arange(M, device=story.device) < batch.length[:, None]  # (B, M)
        real_s = (story != 0) & in_memory[..., None]  # (B, M, J)
        real_q = query != 0  # (B, Jq)
        s = self.read_sentences(self.drop(self.emb[story]), real_s, in_memory)  # (B, M, J, 2d)
        if self.temporal:
            s = s + self.time[batch.time.clamp(max=self.memory_size - 1)][:, :, None] * real_s[..., None]
        q = self.encode(self.drop(self.emb[query]), real_q)  # (B, Jq, 2d)
        words = s.flatten(1, 2)  # (B, M J, 2d)
        score = torch.einsum("btd,bwd->btw", q, words).masked_fill(~real_s.flatten(1)[:, None], -1e30)
        alpha = score.softmax(-1) * real_s.flatten(1)[:, None]  # (B, Jq, M J); a story of no words reads 0
        a = alpha @ words  # (B, Jq, 2d)
        found = [q, a, q * a, q - a]
        if self.summed:  # every story word through its own gate, summed: how many match, not which on average
            opens = score + self.gate_bias  # (B, Jq, M J) each gate's logit
            gate = torch.sigmoid(opens) * real_s.flatten(1)[:, None]
            found.append(gate @ words)  # (B, Jq, 2d)
        h = self.compare(self.drop(torch.cat(found, -1)), real_q)  # (B, Jq, 2d)
        n = real_q.sum(1, keepdim=True).clamp(min=1)  # (B, 1)
        pooled = [h.masked_fill(~real_q[..., None], -1e30).amax(1), h.sum(1) / n]
        if self.summed_out:  # the sums themselves, unsquashed: twice a fact's words read twice as much
            pooled.append((found[-1] * real_q[..., None]).sum(1) / n)  # (B, 2d)
        pooled = torch.cat(pooled, -1)
        y = self.out(self.drop(pooled))  # (B, A)
        if self.list_parts is not None:  # a list's items' outputs added to its own
            y = y + y @ self.list_parts.T
        logits = y.log_softmax(-1)  # (B, A)
        if self.list_order and not self.training:
            logits = self.ordered(logits, story, opens, real_s, real_q, in_memory)
        attention = (alpha.view(B, -1, M, J).sum(-1) * real_q[..., None]).sum(1) / n  # (B, M)
        answered = batch.answer >= 0
        loss = None
        if bool(answered.any()):
            loss = -(logits.gather(1, batch.answer.clamp(min=0)[:, None])[:, 0] * answered).sum()
        if self.attention_supervision > 0:
            loss = (0 if loss is None else loss) + self.attention_supervision * self.supervision(opens, real_s, real_q, batch)
        return Result(logits=logits, attention=attention[:, None], hops_used=torch.ones(B, dtype=torch.long, device=logits.device),
                      halted=torch.zeros(B, dtype=torch.bool, device=logits.device), hop_logits=logits[:, None],
                      halt_probs=logits.new_ones(B, 1), loss=loss)

    def ordered(self, logits: Tensor, story: Tensor, opens: Tensor, real_s: Tensor, real_q: Tensor,
                in_memory: Tensor) -> Tensor:
        """logits (B, A) with each set of list items' probability moved to the orders the open
        sentences give (see the module's docstring)."""
        M = story.shape[1]
        gate = self.sentence_gates(opens, real_s, real_q)  # (B, M)
        open_ = (gate > 0) & in_memory  # (B, M)
        words = self.list_words  # (A, P)
        names = (story[:, None, None] == words[None, :, :, None, None]).any(-1)  # (B, A, P, M)
        slot = torch.arange(M, device=story.device)  # slot 0 is the most recent sentence
        oldest = torch.where(names & open_[:, None, None], slot, -1).amax(-1)  # (B, A, P) -1: named by none
        item = words > 0  # (A, P)
        known = ((oldest >= 0) | ~item).all(-1)  # (B, A) every item named by an open sentence
        older_first = ((oldest[..., :-1] > oldest[..., 1:]) | ~item[None, :, 1:]).all(-1)  # (B, A) each item named before the next
        given = item[:, 1] & known & older_first  # (B, A) a list (a second item) in the order the facts give
        p = logits.exp()
        n = given.float() @ self.list_sets  # (B, G) how many orders of each set the facts give
        moved = torch.where(given, ((p @ self.list_sets) / n.clamp(min=1)) @ self.list_sets.T, torch.zeros_like(p))
        keep = (n == 0).float() @ self.list_sets.T > 0  # (B, A) a set the facts give no order of stays as it was
        return torch.where(keep, p, moved).clamp(min=1e-30).log()

    def sentence_gates(self, opens: Tensor, real_s: Tensor, real_q: Tensor) -> Tensor:
        """(B, M): each sentence's gate logit, the highest of its words' for any real question word."""
        B, M, J = real_s.shape
        real = real_q[..., None] & real_s.flatten(1)[:, None]  # (B, Jq, M J) a question word and a story word
        return opens.masked_fill(~real, -100.0).view(B, -1, M, J).amax(-1).amax(1)

    def read_sentences(self, x: Tensor, real_s: Tensor, in_memory: Tensor) -> Tensor:
        """The encoder over the sentences in memory only, up to the last column any of them has a
        word in: (B, M, J, d) -> (B, M, J, 2d), 0 at padding. The same numbers as the encoder over
        the whole padded tensor (its outputs there are 0), at the cost of the real sentences: a
        batch of joint training pads every story to its longest (qa3's 50 sentences)."""
        B, M, J, _ = x.shape
        j = int(real_s.any(1).any(0).nonzero().max()) + 1 if bool(real_s.any()) else 1
        s = x.new_zeros(B, M, J, 2 * self.dim)
        s[:, :, :j][in_memory] = self.encode(x[:, :, :j][in_memory], real_s[:, :, :j][in_memory])
        return s

    def supervision(self, opens: Tensor, real_s: Tensor, real_q: Tensor, batch: Batch) -> Tensor:
        """Binary cross-entropy of each sentence's gate toward [it is a supporting fact], over the
        story's sentences: a sentence's gate logit is the highest of its words' for any real question
        word (B, Jq, M J) -> (B, M), so the summed read learns to count the facts that the
        question needs and only those."""
        M = real_s.shape[1]
        sentence = self.sentence_gates(opens, real_s, real_q)  # (B, M)
        bce = F.binary_cross_entropy_with_logits(sentence.clamp(min=-100.0), batch.facts(M), reduction="none")
        return (bce * real_s.any(-1)).sum()
