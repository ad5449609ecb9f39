"""The png attention heatmap (`memnet inspect --format png`), read back from its matplotlib
Figure on a hand-made table: what each cell, tick, title and legend entry says, which cells are
boxed, the colours and value range, the figure's size and the png written. No golden images."""
from dataclasses import replace

import matplotlib
import matplotlib.image
import numpy
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D

from memnet import inspect
from memnet.inspect import CHOSEN_COLOUR, PNG_TEXT, Table, heatmap, heatmap_figure, render

LONG = "John travelled to the office after he had picked up the football in the garden."  # 80 characters
ESCAPE = "Sandra has $5 and\x1b[2J $x^{ left."


def table(**changes) -> Table:
    """Three memories, two hops taken of three; hop 2 masked the memory hop 1 chose."""
    values = dict(question="Where is $Mary$?", answer="kitchen", memories=[(1, "Mary moved."), (2, ESCAPE), (4, LONG)],
                  attention=[[0.125, 0.745, 0.0625], [0.6, 0.0, 0.95]], chosen=[1, 2], masked=[[], [1]], support=[2, 0],
                  prediction="hallway", probability=0.4375, hops_used=2, max_hops=3, stop_reason="halted",
                  hop_answers=[("kitchen", 0.25), ("hallway", 0.4375)], label="test #7")
    values.update(changes)
    return Table(**values)


CUT = LONG[:PNG_TEXT - 1] + "…"
ROWS = ["1 Mary moved.  [gold 2]", r"2 Sandra has $5 and\x1b[2J $x^{ left.", f"4 {CUT}  [gold 1]"]


def texts(items) -> list[str]:
    return [t.get_text() for t in items]


def cells(ax) -> dict[tuple[float, float], object]:
    """The texts drawn in the cells, by (hop, row)."""
    return {t.get_position(): t for t in ax.texts}


def test_the_image_is_the_attention_per_row_and_hop_on_a_fixed_scale():
    fig = heatmap_figure(table())
    heat, bar = fig.axes
    (image,) = heat.images
    data = numpy.asarray(image.get_array())
    assert data.shape == (3, 2)  # rows are memories, columns hops
    assert data.tolist() == [[0.125, 0.6], [0.745, 0.0], [0.0625, 0.95]]  # the table's values, not float32 copies
    assert image.get_cmap().name == "Blues" and image.get_clim() == (0, 1)  # 0 white, 1 dark whatever the weights
    no_zero = heatmap_figure(table(attention=[[0.125, 0.745, 0.0625], [0.6, 0.25, 0.125]])).axes[0].images[0]
    assert no_zero.get_clim() == (0, 1)  # not stretched from the smallest weight to the largest
    assert heat.get_aspect() == "auto"  # cells stretch to the figure, not square
    assert image.colorbar is not None and image.colorbar.ax is bar
    assert bar.get_ylabel() == "attention weight" and bar.get_ylim() == (0.0, 1.0)


def test_each_cell_prints_its_weight_masked_ones_marked():
    heat = heatmap_figure(table()).axes[0]
    drawn = cells(heat)
    assert {pos: t.get_text() for pos, t in drawn.items()} == {
        (0, 0): "0.12", (0, 1): "0.74", (0, 2): "0.06",
        (1, 0): "0.60", (1, 1): "~0.00", (1, 2): "0.95"}  # 0.745 shows as in the text table (0.74), not 0.75
    text_cell = render([table()], "text").splitlines()[3]
    assert "[0.74]" in text_cell
    for t in drawn.values():
        assert (t.get_ha(), t.get_va(), t.get_fontsize()) == ("center", "center", 9)
    # white on the dark cells (weight over 0.6), black elsewhere
    colours = {pos: to_rgba(t.get_color()) for pos, t in drawn.items()}
    white, black = to_rgba("white"), to_rgba("black")
    assert colours == {(0, 0): black, (0, 1): white, (0, 2): black, (1, 0): black, (1, 1): black, (1, 2): white}


def test_no_mask_no_tilde_and_a_chosen_cell_is_not_marked_masked():
    heat = heatmap_figure(table(masked=[[], []])).axes[0]
    assert sorted(t.get_text() for t in heat.texts) == ["0.00", "0.06", "0.12", "0.60", "0.74", "0.95"]
    heat = heatmap_figure(table(masked=[[0], [0, 1]])).axes[0]
    assert {pos: t.get_text() for pos, t in cells(heat).items() if t.get_text().startswith("~")} == {
        (0, 0): "~0.12", (1, 0): "~0.60", (1, 1): "~0.00"}


def test_the_chosen_cell_of_each_hop_is_boxed():
    heat = heatmap_figure(table()).axes[0]
    boxes = heat.patches
    assert [(b.get_xy(), b.get_width(), b.get_height()) for b in boxes] == [((-0.5, 0.5), 1, 1), ((0.5, 1.5), 1, 1)]
    for b in boxes:
        assert not b.get_fill() and b.get_edgecolor() == to_rgba(CHOSEN_COLOUR) and b.get_linewidth() == 2
    assert to_rgba(CHOSEN_COLOUR) != to_rgba("black")  # a colour, not the text's
    heat = heatmap_figure(table(chosen=[0, 0])).axes[0]
    assert [b.get_xy() for b in heat.patches] == [(-0.5, -0.5), (0.5, -0.5)]


def test_ticks_name_the_sentences_and_the_hops():
    heat = heatmap_figure(table()).axes[0]
    assert list(heat.get_yticks()) == [0, 1, 2] and texts(heat.get_yticklabels()) == ROWS
    assert list(heat.get_xticks()) == [0, 1]
    assert texts(heat.get_xticklabels()) == ["hop 1\n→ kitchen", "hop 2\n→ hallway"]
    assert heat.xaxis.get_ticks_position() == "top"
    layer = heatmap_figure(table(step="layer")).axes[0]
    assert texts(layer.get_xticklabels()) == ["layer 1\n→ kitchen", "layer 2\n→ hallway"]


def test_the_title_says_question_prediction_and_gold():
    heat = heatmap_figure(table()).axes[0]
    assert heat.get_title(loc="left") == "Where is $Mary$?  predicted: hallway (0.44), gold: kitchen"
    assert heat.get_title(loc="center") == ""  # on the left, over the row labels
    assert heat._left_title.get_fontsize() == 10
    unknown = heatmap_figure(table(answer=None)).axes[0]
    assert unknown.get_title(loc="left") == "Where is $Mary$?  predicted: hallway (0.44), gold: ?"
    cut = heatmap_figure(table(question=LONG + "?", answer="\x1b]0;x\x07")).axes[0]
    assert cut.get_title(loc="left") == f"{CUT}  predicted: hallway (0.44), gold: \\x1b]0;x\\x07"


def test_text_is_drawn_literally():
    """A '$' in a story is not mathtext, and a matplotlibrc that asks for LaTeX is not obeyed."""
    with matplotlib.rc_context({"text.usetex": True}):
        heat = heatmap_figure(table()).axes[0]
    drawn = [heat._left_title, *heat.get_xticklabels(), *heat.get_yticklabels()]
    assert all(not t.get_parse_math() for t in drawn)
    assert all(not t.get_usetex() for t in [*drawn, *heat.texts])


def test_the_legend_says_what_the_marks_mean():
    heat = heatmap_figure(table()).axes[0]
    legend = heat.get_legend()
    assert texts(legend.get_texts()) == ["chosen memory: the hop's argmax", "~0.00: masked, chosen by an earlier hop",
                                         "[gold k]: the k-th supporting fact, in reasoning order",
                                         "→ answer: the answer had it stopped after that hop"]
    assert all(t.get_fontsize() == 8 for t in legend.get_texts())
    assert not legend.get_frame_on() and legend.handlelength == 1
    assert texts(heatmap_figure(table(step="layer")).axes[0].get_legend().get_texts())[::3] == [
        "chosen memory: the layer's argmax", "→ answer: the answer had it stopped after that layer"]


def test_the_legend_marks():
    """The chosen mark is the box of the cells (an empty red square); the others are text only."""
    chosen, *words = inspect._legend(Line2D, "hop")
    assert (chosen.get_marker(), chosen.get_markersize(), chosen.get_linestyle()) == ("s", 11, "None")
    assert to_rgba(chosen.get_markerfacecolor())[3] == 0  # hollow
    assert to_rgba(chosen.get_markeredgecolor()) == to_rgba(CHOSEN_COLOUR)
    assert len(words) == 3
    for line in words:
        assert (line.get_marker(), line.get_linestyle()) == ("None", "None")  # no mark, no line: just the words
    legend = heatmap_figure(table()).axes[0].get_legend()
    assert [h.get_marker() for h in legend.legend_handles] == ["s", "None", "None", "None"]


def drawn(fig):
    FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    return fig.canvas.get_renderer()


def test_the_legend_sits_under_the_heatmap_and_everything_fits_the_png():
    fig = heatmap_figure(table())
    renderer = drawn(fig)
    heat = fig.axes[0]
    legend = heat.get_legend()
    box, area = legend.get_window_extent(renderer), heat.get_window_extent(renderer)
    assert box.y1 <= area.y0 and abs(box.x0 - area.x0) < 0.05 * area.width  # under it, left-aligned
    anchor = legend.get_bbox_to_anchor()
    assert (anchor.x0, anchor.y0) == pytest.approx(tuple(heat.transAxes.transform((0, -0.02))))
    fits(fig)


def fits(fig):
    """Every text of the figure lies inside it (none cut off at the edge of the png)."""
    renderer = drawn(fig)
    heat, bar = fig.axes
    page = fig.bbox
    for artist in [heat._left_title, *heat.get_xticklabels(), *heat.get_yticklabels(), heat.get_legend(),
                   bar.yaxis.label, *bar.get_yticklabels()]:
        extent = artist.get_window_extent(renderer)
        assert page.x0 <= extent.x0 and extent.x1 <= page.x1 and page.y0 <= extent.y0 and extent.y1 <= page.y1, artist


def size(t: Table) -> tuple[float, float]:
    return tuple(heatmap_figure(t).get_size_inches())


def test_the_figure_grows_with_the_rows_and_the_hops():
    short = dict(question="Q?", prediction="x", answer="y")  # a title shorter than the cells
    longest = max(len(r) for r in ROWS)
    assert size(table(**short)) == pytest.approx((2.6 + 0.08 * longest + 1.1 * 2, 2.4 + 0.38 * 3))
    one_hop = table(**short, attention=[[0.125, 0.745, 0.0625]], chosen=[1], masked=[[]], hops_used=1,
                    hop_answers=[("kitchen", 0.25)])
    two_rows = table(**short, memories=[(1, "Mary moved."), (4, LONG)], attention=[[0.5, 0.5], [0.25, 0.75]],
                     chosen=[0, 1], masked=[[], [0]], support=[1])
    assert size(one_hop) == pytest.approx((2.6 + 0.08 * longest + 1.1, 2.4 + 0.38 * 3))
    assert size(two_rows) == pytest.approx((2.6 + 0.08 * len(ROWS[2]) + 2.2, 2.4 + 0.38 * 2))
    tiny = table(**short, memories=[(1, "a"), (2, "b"), (4, "c")], support=[])
    assert size(tiny)[0] == pytest.approx(2.6 + 0.08 * 3 + 2.2)


def test_the_figure_is_wide_enough_for_its_title():
    """The title starts over the first cell: a long one widens the figure rather than being cut off."""
    title = "Where is $Mary$?  predicted: hallway (0.44), gold: kitchen"
    assert size(table()) == pytest.approx((1.0 + 0.08 * len(title) + 0.08 * len(ROWS[2]), 2.4 + 0.38 * 3))
    one_hop = table(question=LONG, attention=[[0.125, 0.745, 0.0625]], chosen=[1], masked=[[]], hops_used=1,
                    hop_answers=[("kitchen", 0.25)], memories=[(1, "a"), (2, "b"), (4, "c")], support=[])
    fig = heatmap_figure(one_hop)
    title = f"{CUT}  predicted: hallway (0.44), gold: kitchen"
    assert tuple(fig.get_size_inches()) == pytest.approx((1.0 + 0.08 * len(title) + 0.08 * 3, 2.4 + 0.38 * 3))
    fits(fig)


DECLINED = "the model is not sure (its best answer has p=0.44, under --min-probability 0.50)"


def test_a_declined_answer_is_called_a_guess():
    """As the text table does: `memnet inspect --story` declines an answer the model is not sure of."""
    fig = heatmap_figure(table(declined=DECLINED))
    title = "Where is $Mary$?  predicted: hallway (0.44), gold: kitchen"
    first = f"cannot answer: {DECLINED}; its best guess:"
    assert fig.axes[0].get_title(loc="left") == f"{first}\n{title}"
    assert tuple(fig.get_size_inches()) == pytest.approx((1.0 + 0.08 * len(first) + 0.08 * len(ROWS[2]),
                                                          2.4 + 0.38 * 3 + 0.2))
    fits(fig)
    long = heatmap_figure(table(declined="\x1b" + "x" * 200)).axes[0].get_title(loc="left").split("\n")[0]
    assert long == "cannot answer: \\x1b" + "x" * (2 * PNG_TEXT - 5) + "…; its best guess:"


def test_heatmap_writes_a_png_at_120_dpi(tmp_path):
    path = tmp_path / "a.png"
    fig = heatmap(table(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = fig.get_size_inches()
    rows, columns, channels = matplotlib.image.imread(path).shape
    assert (rows, columns) == pytest.approx((height * 120, width * 120), abs=1) and channels == 4
    assert texts(fig.axes[0].get_yticklabels()) == ROWS  # the figure it drew


def test_heatmap_writes_a_png_whatever_the_rc_settings(tmp_path):
    """A matplotlibrc that saves pdf by default, or asks for LaTeX (not installed here), changes nothing."""
    with matplotlib.rc_context({"savefig.format": "pdf", "text.usetex": True}):
        heatmap(table(), tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_font_sizes_are_the_figures_own():
    """The width rule counts characters at the title's 10 points: a matplotlibrc's font size does not change it."""
    with matplotlib.rc_context({"font.size": 14}):
        heat = heatmap_figure(table()).axes[0]
    assert heat._left_title.get_fontsize() == 10
    assert {t.get_fontsize() for t in heat.texts} == {9} and {t.get_fontsize() for t in heat.get_legend().get_texts()} == {8}
