"""The bAbI format: official files parse and round-trip; bad input gets a clear error."""
import errno
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from memnet import babi
from memnet.babi import BabiFormatError, Line, Story


def test_all_official_files_parse_and_write_back_byte_identical(babi_dir):
    files = sorted((babi_dir / "en").glob("qa*.txt")) + sorted((babi_dir / "en-valid").glob("qa*.txt"))
    assert len(files) == 100
    questions = {}
    for path in files:
        stories = babi.read_file(path)
        questions[path] = sum(len(s.questions) for s in stories)
        task = int(re.match(r"qa(\d+)", path.name).group(1))
        assert babi.format_stories(stories, babi.space_before_tab(task)) == path.read_text(encoding="utf-8"), path
    for path, n in questions.items():
        if path.name.endswith("_valid.txt"):  # en-valid splits the 1k training stories 90/10
            assert n + questions[path.with_name(path.name.replace("_valid", "_train"))] == 1000, path
        elif path.parent.name == "en" or path.name.endswith("_test.txt"):
            assert n == 1000, path


def test_reads_both_layouts(babi_fixtures):
    assert babi.find_task_file(babi_fixtures / "en", 16, "train").name == "qa16_basic-induction_train.txt"
    assert babi.find_task_file(babi_fixtures / "en-valid", 1, "valid").name == "qa1_valid.txt"
    assert babi.find_task_file(babi_fixtures / "en", 16, "valid") is None
    assert babi.folder_tasks(babi_fixtures / "en") == [1, 16]
    assert babi.folder_tasks(babi_fixtures / "en-valid") == [1]


def test_official_folders_list_all_twenty_tasks(babi_dir):
    assert babi.folder_tasks(babi_dir / "en") == list(range(1, 21))
    assert babi.folder_tasks(babi_dir / "en-valid") == list(range(1, 21))


def test_question_fields():
    (story,) = babi.parse_lines(["1 Greg is a swan.", "2 Julius is a swan.", "3 Julius is green.",
                                  "4 What color is Greg? \tgreen\t1 2 3", "5 What is Mary carrying? \tapple,football\t3"])
    q = story.questions[0]
    assert (q.id, q.text, q.answer, q.support) == (4, "What color is Greg?", "green", (1, 2, 3))
    assert babi.answer_words(story.questions[1].answer) == ["apple", "football"]
    (sample, _) = babi.samples([story])
    assert [f.id for f in sample.facts] == [1, 2, 3]
    assert sample.support_positions == (0, 1, 2)


def test_ids_restart_per_story():
    stories = babi.parse_lines(["1 A is b.", "2 Where is A? \tb\t1", "1 C is d.", "2 Where is C? \td\t1"])
    assert [len(s.lines) for s in stories] == [2, 2]


BAD = [
    (["1 Mary went home.", "2 Where is Mary?\thome"], 2, "3 tab-separated fields"),
    (["x Mary went home."], 1, "integer ID"),
    (["1 Mary went home.", "3 John left."], 2, "id 2"),
    (["1 Mary went home.", "2 Where is Mary? \thome\t7"], 2, "earlier lines"),
    (["1 Mary went home.", "2 Where is Mary? \thome\t1", "3 Where? \thome\t2"], 3, "point at facts"),
    (["1 Mary went home.", "2 Where is Mary? \t\t1"], 2, "non-empty answer"),
    (["1 Mary went home.", "2 Where is Mary? \thome\tone"], 2, "integers"),
    (["2 Mary went home."], 1, "starting at id 1"),
]


@pytest.mark.parametrize("lines,lineno,expected", BAD)
def test_bad_lines_name_file_line_and_expectation(lines, lineno, expected):
    with pytest.raises(BabiFormatError) as e:
        babi.parse_lines(lines, "x.txt")
    assert e.value.lineno == lineno
    assert str(e.value).startswith(f"x.txt:{lineno}: expected ")
    assert expected in str(e.value)


def test_not_utf8(tmp_path):
    path = tmp_path / "qa1_train.txt"
    path.write_bytes(b"1 Mary went home.\n2 Mary \xff went.\n")
    with pytest.raises(BabiFormatError, match=r"qa1_train.txt:2: expected UTF-8") as e:
        babi.read_file(path)
    assert str(e.value) == f"{path}:2: expected UTF-8 text, found byte 0xff"


def test_write_is_atomic_and_round_trips(tmp_path):
    stories = [Story([Line(1, "Mary went home."), Line(2, "Where is Mary?", "home", (1,))])]
    path = tmp_path / "out" / "qa1_single-supporting-fact_train.txt"
    babi.write_file(path, stories)
    assert path.read_text() == "1 Mary went home.\n2 Where is Mary? \thome\t1\n"
    assert babi.read_file(path) == stories
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left behind


def test_parse_tasks():
    assert babi.parse_tasks("16") == [16]
    assert babi.parse_tasks("1-3,16") == [1, 2, 3, 16]
    assert babi.parse_tasks("chain") == ["chain"]
    for bad in ("0", "21", "1-", "x", "3-1"):
        with pytest.raises(ValueError, match="task"):
            babi.parse_tasks(bad)


# Every error, word for word: the file and line, what was expected, what was found.
MESSAGES = [
    (["x Mary went home."], 1, "a line 'ID text' with an integer ID", "'x Mary went home.'"),
    (["2 Mary went home."], 1, "a story starting at id 1", "id 2"),
    (["1 Mary went home.", "3 John left."], 2, "id 2 (ids increase by one within a story)", "id 3"),
    (["1 Mary went home.", "2 Where is Mary?\thome"], 2,
     "question<TAB>answer<TAB>supporting ids (3 tab-separated fields)", "2 field(s) in 'Where is Mary?\\thome'"),
    (["1 Mary went home.", "2 \thome\t1"], 2, "a question before the first tab", "an empty question"),
    (["1 Mary went home.", "2 Where is Mary? \t \t1"], 2, "a non-empty answer", "an empty answer"),
    (["1 Mary went home.", "2 Where is Mary? \thome\t1,"], 2, "supporting ids as integers separated by spaces", "'1,'"),
    (["1 Mary went home.", "2 John left.", "3 Where is Mary? \thome\t1 4"], 3,
     "supporting ids among the story's earlier lines 1..2", "id 4"),
    (["1 Mary went home.", "2 Where is Mary? \thome\t1", "3 Where? \thome\t2"], 3,
     "supporting ids that point at facts", "id 2, which is a question"),
    (["1 Mary went home.", "2   "], 2, "a sentence after the id", "nothing"),
]


@pytest.mark.parametrize("lines,lineno,expected,found", MESSAGES)
def test_each_error_says_where_what_was_expected_and_what_was_found(lines, lineno, expected, found):
    with pytest.raises(BabiFormatError) as e:
        babi.parse_lines(lines, "x.txt")
    assert (e.value.path, e.value.lineno, e.value.expected, e.value.found) == ("x.txt", lineno, expected, found)
    assert str(e.value) == f"x.txt:{lineno}: expected {expected}, found {found}"


def test_an_error_without_a_file_names_the_input():
    with pytest.raises(BabiFormatError) as e:
        babi.parse_lines(["1 Mary went home.", "Where is Mary?"])
    assert str(e.value) == "<input>:2: expected a line 'ID text' with an integer ID, found 'Where is Mary?'"


def test_a_long_line_is_shown_cut_at_60_characters():
    for text, shown in [("x" * 60, "x" * 60), ("x" * 61, "x" * 60 + "..."), ("y" * 200, "y" * 60 + "...")]:
        with pytest.raises(BabiFormatError) as e:
            babi.parse_lines([text])
        assert e.value.found == repr(shown)


def test_blank_lines_are_skipped_but_counted():
    stories = babi.parse_lines(["", "1 A is b.", "   ", "2 Where is A? \tb\t1", "", "1 C is d."])
    assert stories == [Story([Line(1, "A is b."), Line(2, "Where is A?", "b", (1,))]), Story([Line(1, "C is d.")])]
    with pytest.raises(BabiFormatError) as e:
        babi.parse_lines(["", "1 A is b.", "", "3 C is d."], "x.txt")
    assert str(e.value) == "x.txt:4: expected id 2 (ids increase by one within a story), found id 3"


def test_line_ends_are_stripped_and_nothing_else(tmp_path):
    # Windows line ends, and a fact that ends in a capital X (only "\r" and "\n" are line ends)
    expected = [Story([Line(1, "The box is in room X"), Line(2, "Where is the box?", "X", (1,))])]
    assert babi.parse_lines(["1 The box is in room X\r\n", "2 Where is the box? \tX\t1\r\n"]) == expected
    path = tmp_path / "qa1_train.txt"
    path.write_bytes(b"1 The box is in room X\r\n2 Where is the box? \tX\t1\r\n")
    assert babi.read_file(path) == expected


def test_a_question_without_supporting_ids_ends_in_a_tab_and_round_trips():
    text = "1 Where is Mary? \tkitchen\t"  # what format_line writes for support ()
    stories = babi.parse_lines([text])
    assert stories == [Story([Line(1, "Where is Mary?", "kitchen", ())])]
    assert babi.format_stories(stories) == text + "\n"
    with pytest.raises(BabiFormatError) as e:  # a tab after the supporting ids is a fourth field
        babi.parse_lines(["1 Mary went home.", "2 Where is Mary? \thome\t1\t"], "x.txt")
    assert e.value.found == "4 field(s) in 'Where is Mary? \\thome\\t1\\t'"


def test_reading_a_folder_says_so(tmp_path):
    with pytest.raises(BabiFormatError) as e:
        babi.read_file(tmp_path)
    assert (e.value.path, e.value.lineno) == (tmp_path, None)
    assert str(e.value) == f"{tmp_path}: expected a regular file, found a folder"


@pytest.mark.parametrize("error,found", [(PermissionError(errno.EACCES, "Permission denied"), "Permission denied"),
                                         (OSError("the disk went away"), "the disk went away")])
def test_a_file_that_cannot_be_read_says_why(tmp_path, monkeypatch, error, found):
    path = tmp_path / "qa1_train.txt"
    path.write_text("1 Mary went home.\n")

    def fail(self):
        raise error

    monkeypatch.setattr(Path, "read_bytes", fail)  # root reads a chmod 000 file: fail the read itself
    with pytest.raises(BabiFormatError) as e:
        babi.read_file(path)
    assert (e.value.path, e.value.lineno) == (path, None)
    assert str(e.value) == f"{path}: expected a readable file, found {found}"


def test_load_split_reads_either_layout_or_names_the_missing_file(babi_fixtures):
    en, en_valid = babi_fixtures / "en", babi_fixtures / "en-valid"
    stories = babi.load_split(en, 16, "train")
    assert stories == babi.read_file(en / "qa16_basic-induction_train.txt") and len(stories) > 1
    assert babi.load_split(en_valid, 1, "valid") == babi.read_file(en_valid / "qa1_valid.txt")
    with pytest.raises(BabiFormatError) as e:
        babi.load_split(en, 16, "valid")
    assert (e.value.path, e.value.lineno) == (en, None)
    assert str(e.value) == f"{en}: expected a valid file for task 16 (qa16_basic-induction_valid.txt), found no such file"


def test_tokenize_lowercases_and_drops_punctuation():
    assert babi.tokenize("What colour is Greg?") == ["what", "colour", "is", "greg"]
    assert babi.tokenize("Bill's 2 APPLES, and-the box.") == ["bill", "s", "2", "apples", "and", "the", "box"]


def test_the_official_space_before_the_tab_is_the_default():
    stories = [Story([Line(1, "Mary went home."), Line(2, "Where is Mary?", "home", (1,))])]
    q = stories[0].lines[1]
    assert babi.format_line(q) == "2 Where is Mary? \thome\t1"
    assert babi.format_line(q, space=False) == "2 Where is Mary?\thome\t1"
    assert babi.format_stories(stories) == "1 Mary went home.\n2 Where is Mary? \thome\t1\n"
    assert babi.format_stories(stories, space=False) == "1 Mary went home.\n2 Where is Mary?\thome\t1\n"


def test_write_file_without_the_space(tmp_path):
    stories = [Story([Line(1, "Mary went home."), Line(2, "Where is Mary?", "home", (1,))])]
    path = tmp_path / "qa16_basic-induction_train.txt"
    babi.write_file(path, iter(stories), space=babi.space_before_tab(16))
    assert path.read_text() == "1 Mary went home.\n2 Where is Mary?\thome\t1\n"
    assert babi.read_file(path) == stories


def test_parse_tasks_forms():
    assert babi.parse_tasks("qa16") == [16]
    assert babi.parse_tasks("QA1-3") == [1, 2, 3]
    assert babi.parse_tasks("1-20") == list(range(1, 21))
    assert babi.parse_tasks("20") == [20]
    assert babi.parse_tasks("chain,1") == ["chain", 1]
    assert babi.parse_tasks(" 16 , Chain ") == [16, "chain"]
    with pytest.raises(ValueError) as e:
        babi.parse_tasks("1,x")
    assert str(e.value) == "task: expected a number 1-20, a range like 1-20, a list like 1,2,16, or 'chain'; found 'x'"
    with pytest.raises(ValueError) as e:
        babi.parse_tasks("5-21")
    assert str(e.value) == "task: expected numbers between 1 and 20; found '5-21'"


# --------------------------------------------------------------- property-based: parse or clear error

words = st.text(alphabet="abcdefghij ABC.?", min_size=1, max_size=12).filter(lambda s: s.strip())
fact = st.builds(lambda t: ("fact", t), words)
question = st.builds(lambda t, a, k: ("q", t, a, k), words, st.text(alphabet="abc,", min_size=1, max_size=5).filter(lambda s: s.strip(",")), st.integers(1, 3))


@st.composite
def valid_files(draw):
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        kinds = []
        for i, item in enumerate(draw(st.lists(st.one_of(fact, question), min_size=1, max_size=6)), start=1):
            facts = [j for j, k in enumerate(kinds, start=1) if k == "fact"]
            if item[0] == "q" and facts:
                support = " ".join(str(facts[(n * 7) % len(facts)]) for n in range(item[3]))
                lines.append(f"{i} {item[1].strip()} \t{item[2]}\t{support}")
                kinds.append("q")
            else:
                lines.append(f"{i} {item[1].strip()}")
                kinds.append("fact")
    return "\n".join(lines) + "\n"


def _mutate(text: str, data) -> bytes:
    raw = bytearray(text.encode())
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["flip", "delete", "insert"]))
        pos = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if op == "delete" and raw:
            del raw[pos]
        elif op == "flip" and raw:
            raw[pos] = data.draw(st.sampled_from(b"\t\n 0123456789x\xff\xc3"))
        else:
            raw.insert(pos, data.draw(st.sampled_from(b"\t\n 19x\xfe")))
    return bytes(raw)


@settings(max_examples=150, deadline=None)
@given(valid_files())
def test_valid_files_round_trip(text):
    stories = babi.parse_lines(text.split("\n"))
    assert babi.parse_lines(babi.format_stories(stories).split("\n")) == stories


@settings(max_examples=300, deadline=None)
@given(valid_files(), st.data())
def test_mutated_files_parse_or_raise_the_format_error(tmp_path_factory, text, data):
    path = tmp_path_factory.mktemp("h") / "qa1_train.txt"
    path.write_bytes(_mutate(text, data))
    try:
        stories = babi.read_file(path)
    except BabiFormatError as e:
        assert str(e).startswith(f"{path}:")
        assert "expected" in str(e) and "found" in str(e)
        return
    for story in stories:  # whatever parsed keeps the format's invariants
        assert [line.id for line in story.lines] == list(range(1, len(story.lines) + 1))
        ids = {line.id: line for line in story.lines}
        for q in story.questions:
            assert q.answer and all(s < q.id and not ids[s].is_question for s in q.support)


# ---------------------------------------------------------------- spaces where tabs belong

@pytest.mark.parametrize("line, shown", [
    ("2 What color is Greg? yellow 1", "'What color is Greg? yellow 1'"),  # no tab at all: it would read as a fact
    ("2 Where is Mary?  kitchen,milk 1 1", "'Where is Mary?  kitchen,milk 1 1'"),
    ("2 Where is Mary?\tkitchen 1", "'Where is Mary?\\tkitchen 1'"),  # the second tab a space
])
def test_spaces_where_tabs_belong_say_so(line, shown):
    with pytest.raises(BabiFormatError) as e:
        babi.parse_lines(["1 Mary went to the kitchen.", line], "qa1_train.txt")
    assert str(e.value) == (f"qa1_train.txt:2: a question line's fields are separated by tabs; found spaces in {shown} "
                            "(expected question<TAB>answer<TAB>supporting ids)")


def test_a_question_mark_without_an_answer_after_it_is_no_spacing_error():
    stories = babi.parse_lines(["1 Is it? Mary asked."])
    assert stories[0].lines == [babi.Line(1, "Is it? Mary asked.")]
    with pytest.raises(BabiFormatError, match="3 tab-separated fields"):  # an answer, no supporting ids: not spaces
        babi.parse_lines(["1 Mary went home.", "2 Where is Mary?\thome"])
