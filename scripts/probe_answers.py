"""How far a task's answer can go when its supporting facts are given: the answer side of a
task without the attention (issue 15: is qa19 lost in finding its facts, or in answering?).

Each question keeps only its supporting facts, in reasoning order: no story, no hops. Each
sentence becomes one vector as in the Universal Transformer paper, Σ_j f_j ⊙ E x_j, with one
learned mask f per slot (the question, fact 1, fact 2, ...) and one word embedding E, and an
MLP (two hidden layers, dropout 0.1) answers from the slots' vectors, with `--products` also
from the elementwise product of every pair of slots (a sum of embeddings fed to an MLP sees
that two sentences name the same room only through such a product). The answer is scored
- whole: one score per answer phrase ('n,e' is one class), as memnet's model scores it;
- positions: one score per word at each place of a phrase, a phrase scoring the sum of its
  words' ('n,e': n first plus e second; a shorter phrase's later places score 'none').
Adam (lr 0.001, batch 32), label smoothing 0.1; every 10 epochs the splits are scored, and the
line reports the evaluation best on valid (the first of equals).

    .venv/bin/python scripts/probe_answers.py --tasks 17,19 --answer positions --products
"""
from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memnet import babi, official
from memnet.data import Vocab, normalize_answer
from memnet.errors import MemnetError

ROOT = Path(__file__).resolve().parents[1]
MAX_WORDS = 12  # bAbI's longest sentence has 11 words
NONE = "<none>"  # the word of a place a shorter phrase does not reach


def phrase_parts(classes: list[str]) -> tuple[Tensor, list[str]]:
    """Each answer class as its words by place: (A, P) indices into the place vocabulary
    returned beside it (its words, then NONE)."""
    split = [c.split(",") for c in classes]
    words = sorted({w for parts in split for w in parts}) + [NONE]
    P = max(len(parts) for parts in split)
    return torch.tensor([[words.index(p) for p in parts] + [words.index(NONE)] * (P - len(parts))
                         for parts in split]), words


class Probe(nn.Module):
    def __init__(self, *, vocab_size: int, slots: int, dim: int, hidden: int, products: bool, n_classes: int,
                 parts: Tensor | None):
        super().__init__()
        self.products = products
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)  # E
        self.mask = nn.Parameter(torch.ones(slots, MAX_WORDS, dim))  # f_j per slot, from 1: bag of words
        pairs = slots * (slots - 1) // 2 if products else 0
        if parts is not None:  # scores per place and word, a phrase the sum over its places
            self.register_buffer("parts", parts, persistent=False)  # (A, P)
            n_out = parts.shape[1] * (int(parts.max()) + 1)
        else:
            self.parts = None
            n_out = n_classes
        self.mlp = nn.Sequential(nn.Linear((slots + pairs) * dim, hidden), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_out))

    def forward(self, words: Tensor) -> Tensor:
        """words (B, slots, MAX_WORDS) -> answer class scores (B, A)."""
        v = (self.embed(words) * self.mask).sum(2)  # (B, slots, d) Σ_j f_j ⊙ E x_j (padding embeds to 0)
        x = [v[:, s] for s in range(v.shape[1])]
        if self.products:
            x += [a * b for a, b in itertools.combinations(x, 2)]
        out = self.mlp(torch.cat(x, -1))  # (B, n_out)
        if self.parts is None:
            return out
        A, P = self.parts.shape
        by_place = out.view(len(out), P, -1)  # (B, P, W) a score per place and word
        return by_place[:, torch.arange(P)[None, :], self.parts].sum(-1)  # (B, A) Σ_p score(p, word_p)


def encode(samples: list[babi.Sample], vocab: Vocab, slots: int) -> tuple[Tensor, Tensor]:
    """(N, slots, MAX_WORDS) word ids of the question and its facts (missing slots: padding),
    and (N,) answer classes (-1: an answer training never saw, always wrong)."""
    words = torch.zeros(len(samples), slots, MAX_WORDS, dtype=torch.long)
    for n, s in enumerate(samples):
        sentences = [s.question.text] + [s.facts[i].text for i in s.support_positions]
        for k, text in enumerate(sentences[:slots]):
            ids = vocab.encode(text)[:MAX_WORDS]
            words[n, k, :len(ids)] = torch.tensor(ids)
    answers = torch.tensor([vocab.answer_index.get(normalize_answer(s.question.answer), -1) for s in samples])
    return words, answers


def probe(folder: Path, task: int, args: argparse.Namespace) -> dict:
    """Train the probe on one task; its accuracies (%) at the evaluation best on valid."""
    splits = {split: list(babi.samples(babi.load_split(folder, task, split))) for split in ("train", "valid", "test")}
    vocab = Vocab.build(splits["train"])  # memnet's words and answer classes
    slots = 1 + max(len(s.support_positions) for s in splits["train"])
    data = {split: encode(samples, vocab, slots) for split, samples in splits.items()}
    parts = phrase_parts(vocab.answers)[0] if args.answer == "positions" else None

    torch.manual_seed(args.seed)
    model = Probe(vocab_size=len(vocab), slots=slots, dim=args.dim, hidden=args.hidden, products=args.products,
                  n_classes=len(vocab.answers), parts=parts)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    order = torch.Generator().manual_seed(args.seed)
    words, answers = data["train"]
    best: dict = {"valid": -1.0}
    start = time.time()
    for epoch in range(1, args.epochs + 1):
        model.train()
        for batch in torch.randperm(len(words), generator=order).split(32):
            loss = F.cross_entropy(model(words[batch]), answers[batch], label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch % 10 == 0 or epoch == args.epochs:
            model.eval()
            with torch.no_grad():
                acc = {split: 100 * float((model(w).argmax(-1) == a).double().mean()) for split, (w, a) in data.items()}
            if acc["valid"] > best["valid"]:
                best = {**acc, "epoch": epoch}
    return {"task": task, "answer": args.answer, "products": args.products, "seed": args.seed, "epochs": args.epochs,
            "dim": args.dim, "hidden": args.hidden, "facts": slots - 1, **best, "seconds": round(time.time() - start, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--data", type=official.data_dir_arg, default=official.official_dir(ROOT) / "en-valid",
                        help="bAbI folder with train/valid/test files (default: en-valid of the official data)")
    parser.add_argument("--tasks", default="19", help="tasks: 19, 17,19, 1-20 ... (default: 19)")
    parser.add_argument("--answer", choices=["whole", "positions"], default="whole",
                        help="one score per answer phrase, or per word at each place of it (default: whole)")
    parser.add_argument("--products", action="store_true", help="the MLP also reads the products of every pair of slots")
    parser.add_argument("--epochs", type=int, default=300, help="epochs (default: 300)")
    parser.add_argument("--dim", type=int, default=32, help="embedding width (default: 32)")
    parser.add_argument("--hidden", type=int, default=128, help="units in each hidden layer (default: 128)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and the data order (default: 0)")
    parser.add_argument("--results", help="JSONL file each task's record is appended to")
    args = parser.parse_args(argv)
    try:
        tasks = [int(t) for t in babi.parse_tasks(args.tasks)]
    except ValueError as e:
        parser.error(f"--tasks: {e}")
    torch.set_num_threads(1)
    for task in tasks:
        try:
            r = probe(Path(args.data), task, args)
        except MemnetError as e:  # a missing or malformed split file: say which, no traceback
            raise SystemExit(f"probe_answers: {e}") from None
        print(f"qa{task:<2d} answer {r['answer']}{' + products' if r['products'] else ''} | train {r['train']:5.1f}% | "
              f"valid {r['valid']:5.1f}% | test {r['test']:5.1f}% (epoch {r['epoch']} of {r['epochs']}) | "
              f"{r['facts']} facts | seed {r['seed']} | {r['seconds']:.0f} s", flush=True)
        if args.results:
            with open(args.results, "a", encoding="utf-8") as f:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
