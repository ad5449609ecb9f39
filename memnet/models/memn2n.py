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
W is the sum of its words' rows of C^K (a phrase such as 'n,e' is one word of its own).

The switches, each a field of memnet.config.MemN2NConfig:
- null_memory: the softmax has one more entry, an empty memory with score 0 that reads
  nothing, so a hop that finds nothing worth reading can say so (the paper's code has this
  in effect: its padding slots are zero vectors inside its softmax).
- linear start (the trainer sets `linear`): p_i = u^k · m_i, no softmax, for the first epochs.
- stopping: a halting unit h_k = σ(w_h · u^{k+1} + b_h) gives the halting distribution
  π_k = h_k Π_{j<k} (1 - h_j) (h_K = 1). Training minimises the expected answer loss
  Σ_k π_k CE(â_k) plus halt_cost · Σ_k π_k (k - 1); inference stops at the first hop whose
  h_k passes halt_threshold, or at K (PonderNet, Banino et al. 2021, in spirit).
  halt_training right: the halting unit learns instead whether hop k's answer is right,
  BCE(h_k, [argmax â_k = answer]) for k < K, on the states with their gradient stopped (the
  halting steers nothing), and the loss trains every hop's answer: the one the rule gives (from
  the first hop whose h_k passes halt_threshold, or K) at weight 1, every other at early_answers
  (hop 1's at early_answers_hop1 where that is set).
  Inference stops as above: at the first hop whose answer is probably right.
  halt_confidence τ > 0: at inference the rule stops at hop k only where also max_a â_k,a >= τ,
  and else goes on to the next hop whose h_k passes halt_threshold: the halting unit learns on
  training questions, whose answers the model knows by heart (every hop right on them), so it
  stops at hop 1 where on new questions a later hop answers better (qa10: 97.0% after hop 1,
  98.8% after hop 2); an answer it is unsure of is the sign it sees. Training is unchanged.
  halt_training right_last: as right, and the last hop's answer also at weight 1 where the rule
  answers from an earlier hop; every other hop's answer at early_answers with its inputs'
  gradient stopped, so that it trains the answer layer (W, the answer module) to read that
  hop's state and steers no hop: an early answer can become worth stopping on without pulling
  its hop away from the chain, and the last hop keeps learning to answer every question.
  halt_training right_own: as right, and every answer but the one the rule gives steers its own
  hop alone: it is read from the hop computed again from its input with the gradient stopped
  (u^k, the question, and p^{k-1} for the pointer in time), so that it trains that hop's attention
  and read-out and the answer layer, and no earlier hop: hop 2's answer can teach hop 2 to find
  the answer (qa2 stops there) without pulling hop 1 away from the first fact of a longer chain (qa3).
- masking: hop k cannot attend to a memory an earlier hop chose (its argmax): `hard` removes
  those memories from the softmax, `soft` lowers their scores by a learned penalty e^x, `second`
  removes hop 1's choice from hop 2 and lowers the chosen memories' scores for the hops after it,
  so that a chain's second hop must move on while a later hop may come back (a 1-fact question
  answered by the last hop). mask_linear_start false: no penalty during linear start, where p_i
  is the score itself and a lowered score would read -e^x times the chosen memory.
  With second_switch (model.second_alternate) the model keeps a `second` entry in its state: 1
  where this restart masks as `second` although `masking` says soft.
- attention stick (mixed: σ(g_k) times it plus 1 - σ(g_k) times the softmax, g_k learned per hop
  from 0): stick-breaking instead of the softmax (and of linear start's p = score),
  from slot 0, the most recent memory, back: p_i = β_i Π_{j<i} (1 - β_j), β_i = σ(score_i),
  what is left reading nothing. A hop takes the latest memory that matches however far back it
  lies ("where is the apple?": the last fact that names it), where a softmax spreads over every
  memory that matches and only recency in T(i) tells them apart.
- answer_rows own: hop k's answer reads W^k, the answer words' rows of its own output table C^k
  (the paper's W^T = C^K for the last hop), instead of C^K's for every hop: a hop that read the
  answer's sentence, made of C^k's rows, gives its word untrained, so that the stopping rule
  needs no early answer pulled toward answering to stop on it (adjacent tying only).
- question_table own: u^1 = Σ_j l_j B q_j with a B of its own (a copy of A^1 at the start),
  instead of the paper's B = A^1: tied, a word of the question adds a positive term to the score
  of every memory that names it at the same place, which pulls hop 1 to an earlier fact naming the
  question's place (qa6: "Is Daniel in the bedroom?"); untied, B can learn to ask for the person.
  question_table offset: B = A^1 + B', B' from zero, the question's gradient into B' alone: tied
  at the start, and B follows A^1 as the memories train it, so that the pull stays where a task
  needs it (qa14: "Where was Bill before the school?" hop 1 wants the fact that names the school),
  while B' can take a word of the question away from the memories that name it (qa6).
- answer_from readout: â_k = softmax(W o^k), the answer from what hop k read alone (the
  halting unit then reads o^k too). With u^{k+1}, an earlier hop's read-out reaches the answer
  directly, so on a chain (qa16) hop 1 learns to read a colour, not the chain's first fact.
- answer_from question: â_k = softmax(W (u^1 + o^k)), the answer from the question and what
  hop k read (the halting unit reads the same): the read-out's clean chain with the question
  that yes/no questions (qa6, qa9, qa10) need; the earlier hops steer hop k's attention only.
- answer_hidden: an answer module of H hidden units: each hop's logits add V relu(U [u^1; o^1;
  ...; o^k; 0 ...] + b), a nonlinear answer from the question and every read-out so far, for
  what a linear map of one state cannot answer (whose role a fact gives an entity, qa5). V
  starts at zero. answer_reads current: U [u^1; o^k] + b, the question and hop k's read-out
  alone (no earlier hop's read-out reaches hop k's answer, as with answer_from question);
  answer_reads product: U [u^1; o^k; u^1 ⊙ o^k] + b, with their elementwise product, so
  that one unit can ask whether the read-out agrees with the question (is the box bigger?).
  answer_reads sum: U [u^1; o^k; s^k] + b, with s^k = Σ_i σ(score^k_i + b_k) relu(Σ_j l_j · C^k x_ij),
  hop k's memories summed, each let through by a gate on its own score (b_k from zero): a
  softmax reads a mean, which cannot say how many facts matched; a sum can (how many objects is
  Mary carrying? qa7; what is she carrying? qa8). Each summand is the sentence's words alone,
  without T(i) (a count should not depend on when the facts were told), through a ReLU (so
  that facts add up instead of cancelling).
- relative_time D: a pointer in time. Hop k > 1's score of memory i adds
  Σ_j p^{k-1}_j w^k[clip(age_i - age_j, -D, D)], a learned weight per age difference from
  what the last hop read (w starts at zero), so that a hop can ask for the memory just
  before or after the one the last hop found ("where was the apple before the kitchen?",
  qa3), which T(i), a weight per absolute age, cannot say. relative_query: the weights also read
  the hop's state, w^k + r^k u^k (r of (2D+1) x d, from zero), so that what the earlier hops read
  chooses the direction: after "Daniel discarded the apple" the location just before it, after
  "John picked up the apple" his latest (qa2).
- attention_supervision: a loss pulling hop k's scores toward the k-th supporting fact, and
  the halting toward the number of supporting facts; with answer_reads sum, every hop's gates
  also learn by binary cross-entropy which memories are supporting facts.

This file is the model's definition: evaluation, inspection and the GPU train it as it is.
On the CPU the trainer may use a compiled kernel that computes the same numbers faster
(memnet/kernels, tested against this file).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memnet.data import Batch
from memnet.models.result import Result


class MemN2N(nn.Module):
    has_linear_start = True  # the trainer may remove the attention softmax for the first epochs

    def __init__(self, *, vocab_size: int, answer_words: list[list[int]], memory_size: int, dim: int = 20,
                 hops: int = 3, encoding: str = "pe", temporal: bool = True, tying: str = "adjacent",
                 masking: str = "off", answer_from: str = "state", null_memory: bool = True, stopping: bool = False,
                 halt_cost: float = 0.01, halt_threshold: float = 0.5, halt_init: float = -2.0,
                 mask_init: float = 0.0, answer_hidden: int = 0, answer_reads: str = "all",
                 relative_time: int = 0, relative_query: bool = False, attention_supervision: float = 0.0,
                 halt_training: str = "expected", early_answers: float = 0.05, early_answers_hop1: float = -1.0,
                 answer_rows: str = "last", question_table: str = "tied", halt_confidence: float = 0.0,
                 attention: str = "softmax", stick_init: float = 0.0, second_switch: bool = False,
                 mask_linear_start: bool = True):
        super().__init__()
        self.dim, self.hops, self.memory_size = dim, hops, memory_size
        self.encoding, self.tying, self.masking, self.answer_from = encoding, tying, masking, answer_from
        self.penalised = masking in ("soft", "second")  # a learned penalty on the chosen memories' scores
        self.mask_linear_start = mask_linear_start  # that penalty during linear start too
        self.null_memory, self.stopping, self.halt_cost, self.halt_threshold = null_memory, stopping, halt_cost, halt_threshold
        self.attention_supervision, self.halt_init, self.mask_init = attention_supervision, halt_init, mask_init
        self.answer_hidden, self.answer_reads, self.relative_time = answer_hidden, answer_reads, relative_time
        self.relative_query = bool(relative_time and relative_query)
        self.halt_training, self.early_answers, self.answer_rows = halt_training, early_answers, answer_rows
        self.early_answers_hop1 = early_answers if early_answers_hop1 < 0 else early_answers_hop1
        self.halt_confidence, self.stick, self.mixed = halt_confidence, attention == "stick", attention == "mixed"
        self.stick_init = stick_init
        self.own_hops = stopping and halt_training == "right_own"  # early answers from hops with their input detached
        self.linear = False  # linear start: no attention softmax (set by the trainer)
        # the attention of every hop, the hops after the one the rule stopped at too (set by an
        # ensemble that stops on its members' rules together: its hops need not be this member's)
        self.every_hop = False
        # adjacent: tables [A^1 = B, C^1 = A^2, ..., C^K = W^T]; layer-wise: [B, A, C, W^T]
        self.n_tables = hops + 1 if tying == "adjacent" else 4
        self.tables = nn.Parameter(torch.zeros(self.n_tables, vocab_size, dim))  # (n_tables, V, d)
        # question_table own: the question's B apart from A^1 (a copy of it at the start); offset: B' of
        # B = A^1 + B' (from zero)
        self.question_table = nn.Parameter(torch.zeros(vocab_size, dim)) if question_table != "tied" else None  # (V, d)
        self.question_offset = question_table == "offset"
        self.temporal = nn.Parameter(torch.zeros(self.n_tables, memory_size, dim)) if temporal else None  # (n_tables, memory, d) T(i)
        self.H = nn.Parameter(torch.zeros(dim, dim)) if tying == "layerwise" else None  # (d, d)
        if stopping:
            self.halt_w = nn.Parameter(torch.zeros(dim))  # (d,) w_h
            self.halt_b = nn.Parameter(torch.zeros(1))  # (1,) b_h
        if self.penalised:
            self.log_penalty = nn.Parameter(torch.zeros(1))  # (1,) a visited memory's score drops by e^x
        if self.mixed:
            self.stick_gate = nn.Parameter(torch.zeros(hops))  # (K,) g_k: hop k's stick-breaking share σ(g_k)
        if answer_hidden:  # the answer module: logits += V relu(U x + b), x as answer_reads says
            inputs = {"all": hops + 1, "current": 2, "product": 3, "sum": 3}[answer_reads]
            self.answer_in = nn.Parameter(torch.zeros(inputs * dim, answer_hidden))  # ((K+1) d, 2d or 3d, H) U
            self.answer_in_b = nn.Parameter(torch.zeros(answer_hidden))  # (H,) b
            self.answer_out = nn.Parameter(torch.zeros(answer_hidden, len(answer_words)))  # (H, A) V
        self.summed = bool(answer_hidden and answer_reads == "sum")
        if self.summed:
            self.sum_bias = nn.Parameter(torch.zeros(hops))  # (K,) b_k, the gates' bias of each hop
        if relative_time:  # row k - 2 holds w^k[D + age difference], for hops k = 2..K
            self.relative = nn.Parameter(torch.zeros(hops - 1, 2 * relative_time + 1))  # (K-1, 2D+1)
        if self.relative_query:  # row k - 2 holds r^k[D + age difference]
            self.relative_q = nn.Parameter(torch.zeros(hops - 1, 2 * relative_time + 1, dim))  # (K-1, 2D+1, d)
        answer_bag = torch.zeros(len(answer_words), vocab_size)  # (A, V) the words of each answer class
        for a, words in enumerate(answer_words):
            for w in words:
                answer_bag[a, w] += 1.0
        self.register_buffer("answer_bag", answer_bag, persistent=False)
        self.register_buffer("e", torch.arange(1, dim + 1) / dim, persistent=False)  # (d,) e_k = k/d
        # second_switch (model.second_alternate): 1 where this restart masks as `second` (its state
        # keeps it, so the weights answer as they trained); None: the masking is `masking`'s alone
        self.register_buffer("second", torch.zeros(()) if second_switch else None)
        self.reset_parameters(torch.Generator().manual_seed(0))

    @property
    def blocks_hop2(self) -> bool:
        """Whether hop 2 may not attend to hop 1's choice (masking second, or a switched restart)."""
        return self.masking == "second" or (self.second is not None and bool(self.second))

    def reset_parameters(self, generator: torch.Generator, std: float = 0.1, temporal_zero: bool = False,
                         stick_start: float | None = None) -> None:
        """Weights from N(0, std), T(i) from zero with `temporal_zero`; the halting unit starts
        by taking every hop (b_h = halt_init, -2 by default), soft masking with a penalty of e^mask_init (1 by default),
        mixed attention's gates g_k at `stick_start` (default stick_init, 0 by default), the pointer in time at zero."""
        V, d, n = self.tables.shape[1], self.dim, self.n_tables

        def normal(*shape: int) -> Tensor:
            return torch.randn(*shape, generator=generator) * std

        with torch.no_grad():  # drawn as (rows, tables * d), the layout the kernels keep
            self.tables.copy_(normal(V, n * d).view(V, n, d).transpose(0, 1))
            if self.question_table is not None:
                self.question_table.copy_(torch.zeros_like(self.tables[0]) if self.question_offset else self.tables[0])
            if self.temporal is not None:
                T = self.memory_size
                self.temporal.copy_(torch.zeros(n, T, d) if temporal_zero else normal(T, n * d).view(T, n, d).transpose(0, 1))
            if self.H is not None:
                self.H.copy_(normal(d, d))
            if self.stopping:
                self.halt_w.copy_(normal(d))
                self.halt_b.fill_(self.halt_init)
            if self.penalised:
                self.log_penalty.fill_(self.mask_init)
            if self.mixed:
                self.stick_gate.fill_(self.stick_init if stick_start is None else stick_start)
            if self.relative_time:
                self.relative.zero_()
            if self.relative_query:
                self.relative_q.zero_()
            if self.answer_hidden:  # V from zero: the module adds nothing to the answer at the start
                self.answer_in.copy_(normal(*self.answer_in.shape))
                self.answer_in_b.zero_(), self.answer_out.zero_()
            if self.summed:
                self.sum_bias.zero_()

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

    def attend(self, score: Tensor, allowed: Tensor, hop: int) -> Tensor:
        """Hop `hop`'s p_i from scores (B, M) over the allowed memories; others get exactly 0."""
        score = score.masked_fill(~allowed, -1e30)  # exp() of it is exactly 0
        if self.stick or self.mixed:  # slot 0 is the most recent: log p_i = log σ(s_i) + Σ_{j < i} log(1 - σ(s_j))
            rest = F.logsigmoid(-score)  # (B, M) log(1 - β_j): 0 where not allowed
            stick = (F.logsigmoid(score) + rest.cumsum(-1) - rest).exp()
            if self.stick:
                return stick.masked_fill(~allowed, 0.0)
        if self.linear:
            p = score
        elif self.null_memory:  # one more entry with score 0, which reads nothing
            p = torch.cat([torch.zeros_like(score[:, :1]), score], -1).softmax(-1)[:, 1:]  # (B, M)
        else:
            p = score.softmax(-1)  # (B, M)
        if self.mixed:
            share = torch.sigmoid(self.stick_gate[hop])
            p = share * stick + (1 - share) * p
        return p.masked_fill(~allowed, 0.0)  # nothing allowed: all 0

    def forward(self, batch: Batch) -> Result:
        B, M, _ = batch.story.shape
        real = torch.arange(M, device=batch.story.device) < batch.length[:, None]  # (B, M) memories, not padding
        visited = torch.zeros_like(real)  # (B, M) memories an earlier hop chose
        l_q = self.weights(batch.query)
        if self.question_table is None:
            question = self.embed(batch.query, l_q, 0)  # (B, d) u^1 = Σ_j l_j B q_j, B = A^1
        else:
            question = (l_q * self.question_table[batch.query]).sum(-2)  # (B, d) own: Σ_j l_j B q_j
            if self.question_offset:  # B = A^1 + B', the question's gradient into B' alone
                question = question + (l_q * self.tables[0].detach()[batch.query]).sum(-2)
        u = question
        l = self.weights(batch.story)  # (B, M, J, d)
        # each table applied to every memory once (adjacent tying: C^k is A^{k+1})
        memories = {t: self.embed(batch.story, l, t, batch.time)  # (B, M, d)
                    for t in sorted({self.table(k, role) for k in range(self.hops) for role in "AC"})}
        if self.summed:  # what the sums add up: relu(Σ_j l_j C^k x_ij), each sentence's words without its age
            summands = {t: torch.relu(self.embed(batch.story, l, t)) for t in {self.table(k, "C") for k in range(self.hops)}}
        W = self.answer_bag @ self.tables[-1]  # (A, d) W: the answer words' rows of C^K
        if self.answer_rows == "own":  # (K, A, d) W^k: the answer words' rows of C^k
            W = torch.stack([self.answer_bag @ self.tables[self.table(k, "C")] for k in range(self.hops)])
        states, reads, ps, scores, allowed_per_hop, gates, sums, own_reads = [], [], [], [], [], [], [], []
        answered = bool((batch.answer >= 0).any())  # a loss to compute
        own_hops = self.own_hops and answered  # right_own's second pass serves the loss alone
        offsets = None
        if self.relative_time:  # (B, M, M) index into w^k of age_i - age_j
            D = self.relative_time
            offsets = (batch.time[:, :, None] - batch.time[:, None, :]).clamp(-D, D) + D
        for k in range(self.hops):
            m, c = memories[self.table(k, "A")], memories[self.table(k, "C")]  # (B, M, d) m_i, c_i
            before = ps[-1] if k > 0 else None  # p^{k-1}
            score = self.hop_score(m, u, before, offsets, visited, k)  # (B, M)
            blocked = self.masking == "hard" or (k == 1 and self.blocks_hop2)
            allowed = real & ~visited if blocked else real  # (B, M)
            p = self.attend(score, allowed, k)  # (B, M) p_i
            o = torch.einsum("bm,bmd->bd", p, c)  # (B, d) o^k = Σ_i p_i c_i
            if own_hops:  # right_own: o^k again from the hop's input (u^k, p^{k-1}) with its gradient stopped
                mine = self.hop_score(m, u.detach(), before.detach() if k > 0 else None, offsets, visited, k)
                own_reads.append(torch.einsum("bm,bmd->bd", self.attend(mine, allowed, k), c))
            u_next = (u @ self.H.T if self.H is not None else u) + o  # (B, d) u^{k+1}
            if self.masking != "off":
                visited = visited | (chosen(p) & real)
            states.append(o if self.answer_from == "readout" else question + o if self.answer_from == "question" else u_next)
            if self.summed:  # s^k = Σ_i σ(score_i + b_k) relu(C^k x_i) over the memories hop k may attend to
                gates.append((score + self.sum_bias[k]).masked_fill(~allowed, -1e30))  # (B, M)
                sums.append(torch.einsum("bm,bmd->bd", torch.sigmoid(gates[-1]), summands[self.table(k, "C")]))  # (B, d)
            reads.append(o), ps.append(p), scores.append(score.masked_fill(~allowed, -1e30)), allowed_per_hop.append(allowed)
            u = u_next
        states = torch.stack(states, 1)  # (B, K, d) u^2 .. u^{K+1}, o^1 .. o^K or u^1 + o^1 .. u^1 + o^K
        hop_logits = self.answer_logits(states, W)  # (B, K, A) â_k before the softmax
        if self.answer_hidden:
            hop_logits = hop_logits + self.answer_module(question, torch.stack(reads, 1),
                                                         torch.stack(sums, 1) if self.summed else None)
        attention = torch.stack(ps, 1)  # (B, K, M)
        gates = torch.stack(gates, 1) if self.summed else None  # (B, K, M) the sums' gate logits
        logits, attention, hops_used, halted, halt_probs, stops = self.halt(states, hop_logits, attention)
        loss = None
        if answered:
            apart = None  # right_last: each hop's logits from its inputs with their gradient stopped
            if self.stopping and self.halt_training == "right_last":
                apart = self.answer_logits(states.detach(), W)  # (B, K, A)
                if self.answer_hidden:
                    apart = apart + self.answer_module(question.detach(), torch.stack(reads, 1).detach(),
                                                       torch.stack(sums, 1).detach() if self.summed else None)
            if self.own_hops:  # right_own: each hop's logits from its read-out and the question, their inputs detached
                own = torch.stack(own_reads, 1)  # (B, K, d)
                asked = question.detach()
                apart = self.answer_logits(own if self.answer_from == "readout" else asked[:, None] + own, W)
                if self.answer_hidden:
                    apart = apart + self.answer_module(asked, own)
            loss = self.loss(batch, logits, states, hop_logits, halt_probs, hops_used, torch.stack(scores, 1),
                             torch.stack(allowed_per_hop, 1), gates, apart)
        return Result(logits, attention, hops_used, halted, hop_logits, halt_probs, loss,
                      torch.sigmoid(gates) if gates is not None else None, stops=stops)

    def hop_score(self, m: Tensor, u: Tensor, before: Tensor | None, offsets: Tensor | None, visited: Tensor,
                  k: int) -> Tensor:
        """Hop k's scores (B, M) of the memories m (B, M, d) from its state u^k (B, d): u^k · m_i,
        plus the pointer in time from the last hop's attention `before` (B, M), less soft masking's
        penalty on the visited memories."""
        score = torch.einsum("bmd,bd->bm", m, u)  # (B, M) u^k · m_i
        if self.relative_time and k > 0:  # + Σ_j p^{k-1}_j w(age_i - age_j), w = w^k (+ r^k u^k): (B, 2D+1)
            w = self.relative[k - 1].expand(u.shape[0], -1)
            if self.relative_query:
                w = w + u @ self.relative_q[k - 1].T
            score = score + torch.einsum("bj,bij->bi", before, w.gather(1, offsets.flatten(1)).view(offsets.shape))
        if self.penalised and (self.mask_linear_start or not self.linear):
            score = score - self.log_penalty.exp() * visited
        return score

    @staticmethod
    def answer_logits(states: Tensor, W: Tensor) -> Tensor:
        """(B, K, A): each hop's state (B, K, d) through W (A, d), or W^k (K, A, d) with answer_rows own."""
        return states @ W.T if W.dim() == 2 else torch.einsum("bkd,kad->bka", states, W)

    def answer_module(self, question: Tensor, reads: Tensor, sums: Tensor | None = None) -> Tensor:
        """(B, K, A): hop k's logits from the question and the read-outs (B, K, d) of hops 1..k
        (answer_reads all), of hop k alone (current), of hop k and its product with the
        question (product), or of hop k and its gated sum (sum: sums (B, K, d))."""
        B, K, d = reads.shape
        if self.answer_reads == "current":
            x = torch.cat([question[:, None].expand(B, K, d), reads], -1)  # (B, K, 2d)
        elif self.answer_reads == "sum":
            x = torch.cat([question[:, None].expand(B, K, d), reads, sums], -1)  # (B, K, 3d)
        elif self.answer_reads == "product":
            x = torch.cat([question[:, None].expand(B, K, d), reads, question[:, None] * reads], -1)  # (B, K, 3d)
        else:
            seen = torch.ones(K, K, device=reads.device).tril()  # (K, K) hop k has read o^j for j <= k
            x = torch.cat([question[:, None].expand(B, K, d), (seen[None, :, :, None] * reads[:, None]).reshape(B, K, K * d)], -1)
        return torch.relu(x @ self.answer_in + self.answer_in_b) @ self.answer_out  # (B, K, A)

    def halt(self, states: Tensor, hop_logits: Tensor, attention: Tensor) -> tuple[Tensor, ...]:
        """The stopping rule: (logits, attention, hops_used, halted, halt_probs, stops); without it,
        every question takes all K hops (stops None)."""
        B, K, A = hop_logits.shape
        arange_k = torch.arange(K, device=states.device)  # (K,)
        if not self.stopping:
            halt_probs = (arange_k == K - 1).float().expand(B, K)  # (B, K)
            hops_used = torch.full((B,), K, device=states.device)  # (B,)
            return hop_logits[:, -1], attention, hops_used, torch.zeros_like(hops_used, dtype=torch.bool), halt_probs, None
        h_raw = torch.sigmoid(states @ self.halt_w + self.halt_b)  # (B, K) h_k
        h = torch.where(arange_k == K - 1, 1.0, h_raw)  # (B, K) h_K = 1
        go_on = torch.cumprod(torch.cat([torch.ones_like(h[:, :1]), 1 - h[:, :-1]], -1), -1)  # (B, K) Π_{j<k}(1-h_j)
        halt_probs = h * go_on  # (B, K) π_k
        stop = h_raw > self.halt_threshold  # (B, K)
        if self.halt_confidence and not self.training:  # at inference, where the hop's answer is this sure too
            stop = stop & (hop_logits.softmax(-1).amax(-1) >= self.halt_confidence)
        stop = stop | (arange_k == K - 1)
        hops_used = stop.float().argmax(-1) + 1  # (B,) the first hop that says stop
        halted = h_raw.gather(1, (hops_used - 1)[:, None])[:, 0] > self.halt_threshold  # (B,)
        if not self.every_hop:
            attention = attention * (arange_k < hops_used[:, None])[..., None]  # hops not taken: zeros
        logits = hop_logits.gather(1, (hops_used - 1)[:, None, None].expand(B, 1, A))[:, 0]  # (B, A)
        return logits, attention, hops_used, halted, halt_probs, stop

    def loss(self, batch: Batch, logits: Tensor, states: Tensor, hop_logits: Tensor, halt_probs: Tensor,
             hops_used: Tensor, scores: Tensor, allowed: Tensor, gates: Tensor | None,
             apart: Tensor | None = None) -> Tensor:
        """Summed over the batch (not averaged), as the paper's recipe with lr 0.01 expects.
        apart (B, K, A): with right_last, each hop's logits from inputs whose gradient is stopped; with
        right_own, from its read-out made again from its input with the gradient stopped."""
        B, K, A = hop_logits.shape
        if self.stopping:
            targets = batch.answer[:, None].expand(B, K).reshape(-1)
            ce = F.cross_entropy(hop_logits.reshape(-1, A), targets, ignore_index=-1,
                                 reduction="none").view(B, K)  # (B, K) CE(â_k)
            if self.halt_training in ("right", "right_last", "right_own"):  # the answer the rule gives at 1, every other hop's at early_answers
                given = torch.arange(K, device=ce.device) == (hops_used - 1)[:, None]  # (B, K) the hop answered from
                if apart is not None:  # right_last: the last hop's at 1 too, the others' gradient reaching no hop;
                    # right_own: the others' reaching their own hop alone
                    if self.halt_training == "right_last":
                        given = given | (torch.arange(K, device=ce.device) == K - 1)
                    ce = torch.where(given, ce, F.cross_entropy(apart.reshape(-1, A), targets, ignore_index=-1,
                                                                reduction="none").view(B, K))
                early = torch.full((K,), self.early_answers, device=ce.device, dtype=ce.dtype)
                early[0] = self.early_answers_hop1
                weight = torch.where(given, 1.0, early)  # (B, K)
                loss = (ce * weight).sum() + self.halt_right(batch, states, hop_logits)
            else:  # the expected loss over the halting distribution, and a cost per extra hop
                extra = torch.arange(K, device=ce.device, dtype=ce.dtype)  # (K,) hops beyond the first
                loss = (halt_probs * (ce + self.halt_cost * extra)).sum()
        else:
            loss = F.cross_entropy(logits, batch.answer, ignore_index=-1, reduction="sum")
        if self.attention_supervision > 0:
            loss = loss + self.attention_supervision * self.supervision(batch, halt_probs, scores, allowed, gates)
        return loss

    def halt_right(self, batch: Batch, states: Tensor, hop_logits: Tensor) -> Tensor:
        """Σ_{k<K} BCE(h_k, [argmax â_k = answer]), h_k from the states with their gradient
        stopped: the halting unit learns whether each hop's answer is right and steers nothing."""
        K = states.shape[1]
        z = states[:, :K - 1].detach() @ self.halt_w + self.halt_b  # (B, K-1)
        right = (hop_logits[:, :K - 1].argmax(-1) == batch.answer[:, None]).float()  # (B, K-1)
        keep = (batch.answer >= 0)[:, None].float()
        return (F.binary_cross_entropy_with_logits(z, right, reduction="none") * keep).sum()

    def supervision(self, batch: Batch, halt_probs: Tensor, scores: Tensor, allowed: Tensor,
                    gates: Tensor | None) -> Tensor:
        """Cross-entropy of hop k's scores (B, K, M) toward the k-th supporting fact (where that
        hop may attend to it), -log π at the number of supporting facts, and with answer_reads
        sum, every hop's gates (B, K, M) toward [memory i is a supporting fact], where it may attend."""
        n = min(self.hops, batch.support.shape[1])
        target = batch.support[:, :n]  # (B, n) memory slot of fact k; -1: none or forgotten
        ok = (target >= 0) & allowed[:, :n].gather(-1, target.clamp(min=0)[..., None])[..., 0]  # (B, n)
        ce = F.cross_entropy(scores[:, :n].reshape(-1, scores.shape[-1]), target.clamp(min=0).reshape(-1),
                             reduction="none").view(target.shape)  # (B, n)
        loss = (ce * ok).sum()
        if self.stopping and self.halt_training == "expected":
            want = (batch.n_support.clamp(1, self.hops) - 1)[:, None]  # (B, 1) the hop the facts need
            loss = loss - halt_probs.gather(1, want).clamp(min=1e-8).log().sum()
        if gates is not None:
            B, K, M = gates.shape
            bce = F.binary_cross_entropy_with_logits(gates.clamp(min=-100.0), batch.facts(M)[:, None].expand(B, K, M),
                                                     reduction="none")  # (B, K, M)
            loss = loss + (bce * allowed).sum()
        return loss


def chosen(p: Tensor) -> Tensor:
    """(B, M) bool: each row's argmax (the first of equals), where it is above 0."""
    best = p.argmax(-1, keepdim=True)  # (B, 1)
    return torch.zeros_like(p, dtype=torch.bool).scatter(-1, best, p.gather(-1, best) > 0)
