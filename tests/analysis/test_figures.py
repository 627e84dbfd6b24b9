"""Every figure is written as a non-empty PNG and PDF for a golden dataset, and only the figures asked for.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_figures.py -q
"""

from __future__ import annotations

import struct

import pytest

from toolcanary.analysis.__main__ import main

NAMES = ["f1_training", "f2_aggregates", "f3_categories", "f4_abstention_vs_tool_call"]


def png_size(path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


@pytest.mark.slow
def test_all_figures_are_written_as_png_and_pdf(golden, capsys):
    folder = golden()
    assert main(["--data", str(folder), "--fig", "all"]) == 0
    written = sorted(p.name for p in (folder / "figures").iterdir())
    assert written == sorted(f"{n}.{s}" for n in NAMES for s in ("png", "pdf"))
    for name in NAMES:
        width, height = png_size(folder / "figures" / f"{name}.png")
        # 7 in wide at 200 dpi, give or take the tight bounding box: legible when printed at paper size
        assert 1200 < width < 1500 and 400 < height < 1600, (name, width, height)
        pdf = (folder / "figures" / f"{name}.pdf").read_bytes()
        assert pdf.startswith(b"%PDF") and len(pdf) > 5_000
    assert not list(folder.glob(".make_figures-*"))
    assert "wrote" in capsys.readouterr().err


def test_only_the_requested_figure_is_written(golden):
    folder = golden(train_steps=0)
    assert main(["--data", str(folder), "--fig", "f4"]) == 0
    assert sorted(p.name for p in (folder / "figures").iterdir()) == [
        "f4_abstention_vs_tool_call.pdf", "f4_abstention_vs_tool_call.png"]


@pytest.mark.slow
def test_figures_draw_a_run_without_repeats_and_many_steps(golden):
    # no repeated step: no error bars and no noise floor, which must not break the drawing
    folder = golden(steps=tuple(range(0, 1001, 10)), repeats={}, train_steps=1000)
    assert main(["--data", str(folder), "--fig", "f2", "--fig", "f1", "--fig", "f3"]) == 0
    for name in ("f1_training", "f2_aggregates", "f3_categories"):
        assert (folder / "figures" / f"{name}.png").stat().st_size > 10_000
