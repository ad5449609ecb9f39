"""memnet.data on small hand-made samples: the vocabulary, the exact tensors a Batch holds
(word ids, padding, the memory window, ages, support slots, answers, tasks), trimming,
concatenation, and the train/valid split carved from a training file."""
import pytest
import torch

from memnet import babi, checkpoint
from memnet.babi import CHAIN, Line, Sample
from memnet.data import (PAD, UNK, Batch, Vocab, concat, encode_samples, encode_tasks, normalize_answer,
                         read_splits, task_name, task_number)
from memnet.errors import MemnetError

# ids: 0 <pad>, 1 <unk>, 2 greg, 3 is, 4 where, 5 went, 6 home, 7 lily, 8 garden
WORDS = [PAD, UNK, "greg", "is", "where", "went", "home", "lily", "garden"]
VOCAB = Vocab(WORDS, ["garden", "home"])

GREG = Sample((Line(1, "Greg went home."), Line(2, "Lily went garden."), Line(3, "Bob!")),
              Line(4, "Where is Greg?", "home", (3, 1)))  # fact 1 falls out of a 2-slot memory
LILY = Sample((Line(1, "Lily went garden."), Line(2, "Greg went home.")),
              Line(3, "Where is Lily?", " Garden ", (1,)))
NOBODY = Sample((), Line(1, "Where?", "nowhere", ()))  # no facts yet; an answer no class has


def long(rows):
    return torch.tensor(rows, dtype=torch.long)


def assert_fields(batch, **expected):
    for name, value in expected.items():
        got = getattr(batch, name)
        assert got.dtype == torch.long, name
        assert got.tolist() == value, name


# ------------------------------------------------------------------------------------- encoding

def test_encode_samples_gives_the_exact_tensors():
    batch = encode_samples([GREG, LILY, NOBODY], VOCAB, memory_size=2)
    assert batch.story.shape == (3, 2, 3) and batch.query.shape == (3, 3)
    assert_fields(
        batch,
        # most recent fact first, the 2 most recent only; "bob" is <unk>; short sentences and
        # missing memories padded with 0
        story=[[[1, 0, 0], [7, 5, 8]],
               [[2, 5, 6], [7, 5, 8]],
               [[0, 0, 0], [0, 0, 0]]],
        query=[[4, 3, 2], [4, 3, 7], [4, 0, 0]],
        length=[2, 2, 0],
        answer=[1, 0, -1],  # " Garden " is the class garden; "nowhere" is no class
        support=[[0, -1], [1, -1], [-1, -1]],  # fact 3 is slot 0, fact 1 fell out of memory
        n_support=[2, 1, 0],  # the facts the file names, in memory or not
        task=[0, 0, 0],  # the default task
        time=[[0, 1], [0, 1], [0, 1]],  # each slot's age
    )
    assert len(batch) == 3


def test_a_larger_memory_keeps_every_fact_and_its_age():
    batch = encode_samples([GREG], VOCAB, memory_size=5)
    assert_fields(batch, story=[[[1, 0, 0], [7, 5, 8], [2, 5, 6]]], length=[3], support=[[0, 2]],
                  time=[[0, 1, 2]])


def test_the_task_number_of_a_batch():
    assert_fields(encode_samples([LILY, NOBODY], VOCAB, 2, task=16), task=[16, 16])
    assert_fields(encode_samples([LILY, NOBODY], VOCAB, 2, task="3"), task=[3, 3])
    assert_fields(encode_samples([LILY, NOBODY], VOCAB, 2, task=CHAIN), task=[0, 0])
    assert (task_number(CHAIN), task_number(7), task_number("12")) == (0, 7, 12)
    assert (task_name(0), task_name(16)) == (CHAIN, "16")


def test_a_question_before_any_fact_has_one_empty_slot():
    batch = encode_samples([NOBODY], VOCAB, memory_size=3)
    assert_fields(batch, story=[[[0]]], query=[[4]], length=[0], answer=[-1], support=[[-1]], n_support=[0],
                  task=[0], time=[[0]])


def test_no_samples_is_an_empty_batch_of_long_tensors():
    batch = encode_samples([], VOCAB, memory_size=3)
    shapes = {name: tuple(getattr(batch, name).shape) for name in
              ("story", "query", "length", "answer", "support", "n_support", "task", "time")}
    assert shapes == {"story": (0, 1, 1), "query": (0, 1), "length": (0,), "answer": (0,), "support": (0, 1),
                      "n_support": (0,), "task": (0,), "time": (0, 1)}
    assert all(getattr(batch, name).dtype == torch.long for name in shapes)
    assert len(batch) == 0


def test_encode_tasks_is_every_task_in_one_batch():
    batch = encode_tasks({1: [LILY], 2: [], CHAIN: [NOBODY]}, VOCAB, memory_size=2)
    assert_fields(batch, story=[[[2, 5, 6], [7, 5, 8]], [[0, 0, 0], [0, 0, 0]]], task=[1, 0], length=[2, 0])
    assert encode_tasks({1: []}, VOCAB, 2) is None


# ------------------------------------------------------------------------------------- trimming

def padded_batch() -> Batch:
    """Two rows with more slots and columns than they fill, as rows taken out of a larger batch are."""
    story = torch.zeros(2, 4, 5, dtype=torch.long)
    story[0, 0, :3] = long([3, 4, 5])
    story[0, 1, :1] = long([3])
    story[1, 0, :2] = long([1, 3])  # <unk> is a word, not padding
    return Batch(story=story, query=long([[6, 7, 8, 0, 0], [6, 0, 0, 0, 0]]), length=long([2, 1]),
                 answer=long([0, 1]), support=long([[1, -1], [0, -1]]), n_support=long([1, 1]),
                 task=long([3, 3]), time=torch.arange(4).expand(2, 4).clone())


def test_trim_drops_only_padding():
    batch = padded_batch()
    trimmed = batch.trim()
    assert trimmed.story.shape == (2, 2, 3) and trimmed.query.shape == (2, 3) and trimmed.time.shape == (2, 2)
    assert torch.equal(trimmed.story, batch.story[:, :2, :3])
    assert trimmed.story.count_nonzero() == batch.story.count_nonzero()  # every word kept
    assert torch.equal(trimmed.query, batch.query[:, :3])
    assert trimmed.query.count_nonzero() == batch.query.count_nonzero()
    assert trimmed.time.tolist() == [[0, 1], [0, 1]]
    for name in ("length", "answer", "support", "n_support", "task"):
        assert torch.equal(getattr(trimmed, name), getattr(batch, name)), name


def test_trim_keeps_one_slot_and_column_of_a_batch_without_facts():
    batch = encode_samples([NOBODY], VOCAB, 3)
    batch.story = torch.zeros(1, 3, 4, dtype=torch.long)  # as a row of a wider batch
    batch.query = long([[4, 0, 0]])
    batch.time = torch.arange(3).expand(1, 3).clone()
    trimmed = batch.trim()
    assert (trimmed.story.shape, trimmed.query.shape, trimmed.time.shape) == ((1, 1, 1), (1, 1), (1, 1))
    assert trimmed.query.tolist() == [[4]]


def test_trim_memory_drops_only_empty_slots():
    batch = padded_batch()
    trimmed = batch.trim_memory()
    assert trimmed.story.shape == (2, 2, 5) and trimmed.time.shape == (2, 2)
    assert torch.equal(trimmed.story, batch.story[:, :2])
    assert trimmed.time.tolist() == [[0, 1], [0, 1]]
    assert torch.equal(trimmed.query, batch.query)  # words untouched
    for name in ("length", "answer", "support", "n_support", "task"):
        assert torch.equal(getattr(trimmed, name), getattr(batch, name)), name
    assert trimmed.trim_memory() is trimmed  # nothing left to drop: the batch itself, no copy


def test_trim_memory_keeps_one_slot_of_a_batch_without_facts():
    batch = encode_samples([NOBODY, NOBODY, NOBODY], VOCAB, 3)
    batch.story, batch.time = torch.zeros(3, 4, 1, dtype=torch.long), torch.arange(4).expand(3, 4).clone()
    trimmed = batch.trim_memory()
    assert trimmed.story.shape == (3, 1, 1) and trimmed.time.tolist() == [[0]] * 3


def test_index_split_and_to():
    batch = encode_samples([GREG, LILY, NOBODY], VOCAB, memory_size=2)
    assert batch.index(torch.tensor([2, 0])).query.tolist() == [[4, 0, 0], [4, 3, 2]]
    assert batch.index(slice(1, 2)).answer.tolist() == [0]
    assert [len(b) for b in batch.split(2)] == [2, 1]
    moved = batch.to("meta")  # a device other than the CPU, without a GPU
    assert all(t.device.type == "meta" for t in moved._fields())


# ------------------------------------------------------------------------------------- concat

def test_concat_pads_to_the_largest_batch():
    small = encode_samples([NOBODY], VOCAB, memory_size=2)  # story (1, 1, 1), support (1, 1)
    large = encode_samples([GREG], VOCAB, memory_size=2)  # story (1, 2, 3), support (1, 2)
    batch = concat([small, large])
    assert_fields(
        batch,
        story=[[[0, 0, 0], [0, 0, 0]], [[1, 0, 0], [7, 5, 8]]],
        query=[[4, 0, 0], [4, 3, 2]],
        length=[0, 2],
        answer=[-1, 1],
        support=[[-1, -1], [0, -1]],  # the narrower batch's supports padded with -1 (none)
        n_support=[0, 2],
        task=[0, 0],
        time=[[0, 1], [0, 1]],
    )
    wide = encode_samples([LILY], VOCAB, memory_size=2, task=5)  # story (1, 2, 3), support (1, 1)
    assert_fields(concat([wide, large]), support=[[1, -1], [0, -1]], task=[5, 0])
    assert_fields(concat([large, small]), story=[[[1, 0, 0], [7, 5, 8]], [[0, 0, 0], [0, 0, 0]]],
                  query=[[4, 3, 2], [4, 0, 0]], support=[[0, -1], [-1, -1]])


# ------------------------------------------------------------------------------------- vocabulary

def test_build_collects_words_answers_and_question_forms():
    vocab = Vocab.build([GREG, LILY, NOBODY])
    assert vocab.itos == [PAD, UNK, "bob", "garden", "greg", "home", "is", "lily", "nowhere", "went", "where"]
    assert vocab.answers == ["garden", "home", "nowhere"]
    assert vocab.forms == ["where", "where is X"]
    assert len(vocab) == 11


def test_vocab_forms_are_kept_as_given():
    assert Vocab(WORDS, [], ("where is X",)).forms == ["where is X"]
    assert Vocab(WORDS, []).forms is None and Vocab(WORDS, [], None).forms is None
    assert Vocab(WORDS, [], []).forms == []


def test_vocab_round_trips_through_a_dict():
    with_forms = Vocab(WORDS, ["garden", "home"], ["where is X"])
    d = with_forms.to_dict()
    assert d == {"itos": WORDS, "answers": ["garden", "home"], "question_forms": ["where is X"]}
    back = Vocab.from_dict(d)
    assert (back.itos, back.answers, back.forms, back.stoi) == (WORDS, ["garden", "home"], ["where is X"],
                                                                with_forms.stoi)
    # a vocabulary saved before question forms existed has none, and writes none
    old = VOCAB.to_dict()
    assert old == {"itos": WORDS, "answers": ["garden", "home"]}
    assert Vocab.from_dict(old).forms is None
    assert Vocab.from_dict({**old, "question_forms": []}).forms == []


def test_a_malformed_vocab_dict_is_refused():
    with pytest.raises(KeyError):
        Vocab.from_dict({"answers": ["home"]})
    with pytest.raises(KeyError):
        Vocab.from_dict({"itos": WORDS})
    with pytest.raises(TypeError):
        Vocab.from_dict({"itos": 5, "answers": []})


def test_a_checkpoint_with_a_malformed_vocab_is_a_memnet_error(tmp_path):
    from memnet import config
    from memnet.models import build_model

    cfg = config.load(None, {})
    model = build_model(cfg, VOCAB)
    path = tmp_path / "model.pt"
    checkpoint.save(path, model, cfg, VOCAB, step=0, best_metric=0.0)
    payload = checkpoint.read(path)
    del payload["vocab"]["itos"]
    checkpoint.write(path, payload)
    with pytest.raises(MemnetError, match="KeyError"):
        checkpoint.load(path)


def test_encode_decode_and_unknown_words():
    assert VOCAB.encode("Where is Bob?") == [4, 3, 1]
    assert VOCAB.decode([4, 3, 1, 0, 0]) == "where is <unk>"
    assert VOCAB.unknown([GREG, NOBODY]) == ["bob"]


def test_answer_words():
    vocab = Vocab([PAD, UNK, "apple", "n,e", "n"], ["apple,pear", "apple", "n,e", "pear"])
    # an unknown answer word is <unk>; a phrase the vocabulary holds is one word
    assert vocab.answer_words() == [[2, 1], [2], [3], [1]]


def test_normalize_answer():
    assert normalize_answer(" Apple , Football ") == "apple,football"
    assert normalize_answer("apple,,football,") == "apple,football"
    assert normalize_answer("Kitchen") == "kitchen"


# ------------------------------------------------------------------------------------- read_splits

def write_stories(path, count):
    """`count` one-question stories; story i is the one about place<i>."""
    path.write_text("".join(f"1 Mary went to the place{i}.\n2 Where is Mary?\tplace{i}\t1\n" for i in range(count)))


def places(samples):
    return [int(s.question.answer.removeprefix("place")) for s in samples]


def test_read_splits_carves_a_fixed_tenth_of_train_as_valid(tmp_path):
    write_stories(tmp_path / "qa1_train.txt", 10)
    write_stories(tmp_path / "qa1_test.txt", 2)
    splits = read_splits(tmp_path, [1])
    # the stories shuffled in a fixed order (random.Random(0)); its last tenth is valid, for every run alike
    assert places(splits["valid"][1]) == [6]
    assert places(splits["train"][1]) == [0, 1, 2, 3, 4, 5, 7, 8, 9]
    assert places(splits["test"][1]) == [0, 1]


def test_read_splits_keeps_at_least_one_valid_story(tmp_path):
    write_stories(tmp_path / "qa1_train.txt", 3)
    splits = read_splits(tmp_path, [1])  # a tenth of 3 rounds to none: one story all the same
    assert places(splits["valid"][1]) == [1]
    assert places(splits["train"][1]) == [0, 2]
    assert splits["test"][1] == []  # no test file


def test_read_splits_reads_a_valid_file_when_there_is_one(tmp_path):
    write_stories(tmp_path / "qa1_train.txt", 3)
    (tmp_path / "qa1_valid.txt").write_text("1 Bill went to the hall.\n2 Where is Bill?\thall\t1\n")
    splits = read_splits(tmp_path, [1])
    assert places(splits["train"][1]) == [0, 1, 2]
    assert [s.question.answer for s in splits["valid"][1]] == ["hall"]


def test_read_splits_of_a_missing_folder(tmp_path):
    with pytest.raises(MemnetError, match=r"nowhere: no such data folder"):
        read_splits(tmp_path / "nowhere", [1])
