"""`memcli --help` without typer: the same text as typer's, at every width."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer._click as click
import typer.main

from memcli.cli import load_app, tophelp, tophelp_data
from memcli.cli.tophelp import help_width, short_help
from tests import forked


def _typer_help(width: int) -> str:
    group = typer.main.get_command(load_app())
    return group.get_help(click.Context(group, info_name="memcli", terminal_width=width)) + "\n"


def test_the_data_is_what_the_application_says() -> None:
    parts = tophelp.extract()
    stale = "memcli/cli/tophelp_data.py is stale: run `python -m memcli.cli.tophelp`"
    assert parts == {name: getattr(tophelp_data, name) for name in parts}, stale
    source = (Path(tophelp.__file__).with_name("tophelp_data.py")).read_text(encoding="utf-8")
    assert source == tophelp.data_source(parts), stale


def test_the_text_is_typers_at_every_width_click_can_choose() -> None:
    for width in range(50, 79):  # help_width's whole range, whatever the terminal
        assert tophelp.render(width) == _typer_help(width), width


def test_help_width_follows_the_terminal_between_50_and_78() -> None:
    assert [help_width(c) for c in (10, 52, 53, 79, 80, 81, 300)] == [50, 50, 51, 77, 78, 78, 78]


# ---------------------------------------------------------------- short_help at its edges

TEXT = "Show one memory. Then more words follow here."


def test_the_first_sentence_when_it_fits() -> None:
    assert short_help(TEXT, len("Show one memory.")) == "Show one memory."
    assert short_help(TEXT, 80) == "Show one memory."


def test_one_character_short_of_the_sentence_cuts_words() -> None:
    # "Show one memory." is 16 characters: at 15, "Show one..." (11) fits, "Show one memory..." does not
    assert short_help(TEXT, 15) == "Show one..."


def test_all_of_it_when_it_fits_without_a_sentence_end() -> None:
    assert short_help("no full stop here", 17) == "no full stop here"
    assert short_help("no full stop here", 16) == "no full stop..."
    assert short_help("no full stop here", 14) == "no full..."


def test_full_with_words_left_is_cut() -> None:
    # "alpha beta" is exactly 10: words follow, so it is cut to leave room for "..."
    assert short_help("alpha beta gamma", 10) == "alpha..."
    assert short_help("alpha beta", 10) == "alpha beta"


def test_it_cuts_as_click_does_on_many_texts() -> None:
    import random

    from typer._click.utils import make_default_short_help

    rng = random.Random(7)
    vocabulary = ["a", "to", "the", "store.", "memory", "merge.", "extraordinarily", "x.", "run", "archived"]
    for _ in range(3000):
        text = " ".join(rng.choice(vocabulary) for _ in range(rng.randrange(0, 12)))
        limit = rng.randrange(0, 60)
        assert short_help(text, limit) == make_default_short_help(text, limit).strip(), (text, limit)


def test_nothing_fits_but_the_dots() -> None:
    assert short_help("extraordinarily long words", 5) == "..."
    assert short_help("", 10) == ""


# ---------------------------------------------------------------- the real process


PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("TYPER=" + str("typer" in sys.modules) + "\\n"))
sys.argv = ["memcli"] + sys.argv[1:]
from memcli.cli import main
main()
"""


@pytest.mark.parametrize("argv", [["--help"], [], ["--json", "--help"], ["--store", "nowhere"]])
def test_the_process_prints_it_without_importing_typer(tmp_path: Path, argv: list[str]) -> None:
    env = {**os.environ, "COLUMNS": "64"}
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout == _typer_help(help_width(64))
    assert "TYPER=False" in done.stderr


def test_a_command_s_help_and_bad_options_still_go_to_typer(tmp_path: Path) -> None:
    for argv, code, out in ((["list", "--help"], 0, "Usage: memcli list"), (["-h"], 2, "No such option"),
                            (["--wait", "soon", "list"], 2, "--wait")):
        done = forked.run(argv, cwd=tmp_path)  # `python -m memcli`, forked from a zygote
        assert done.returncode == code and out in done.stdout + done.stderr, argv


def test_a_stream_that_cannot_take_the_text_goes_to_typer(monkeypatch: pytest.MonkeyPatch) -> None:
    class Narrow:
        encoding = "no-such-codec"

        def write(self, text: str) -> int:
            raise AssertionError("nothing is written")

    monkeypatch.setattr(sys, "stdout", Narrow())
    assert tophelp.serve() is None
