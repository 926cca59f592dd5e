"""Settings: defaults, and an error naming the key for every wrong type or value."""

from __future__ import annotations

from pathlib import Path

import pytest

from memcli.config import Settings, load_settings
from memcli.errors import ConfigError


def write(root: Path, text: str) -> Path:
    (root / "memcli.toml").write_text(text)
    return root


def test_defaults_without_a_file(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    assert settings == Settings()
    cfg = settings.consolidation
    assert (cfg.max_per_run, cfg.tag_overlap, cfg.content_similarity, cfg.stale_after_days) == (50, 0.8, 0.8, 90)
    assert settings.llm.model == "claude-haiku-4-5" and settings.schedule.weekly == "0 0 * * 0"
    assert cfg.learned_rule is False  # SPEC 3.1's plain "similarity > content_similarity"


def test_values_and_teams_are_read(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, '[consolidation]\nmax_per_run = 5\nmin_age_days = 2.5\n'
                                             '[teams]\ndefault_team = "all"\ncoder = "backend"\n'))
    assert settings.consolidation.max_per_run == 5 and settings.consolidation.min_age_days == 2.5
    assert settings.team_for("coder") == "backend" and settings.team_for("other") == "all"
    assert load_settings(write(tmp_path, "[consolidation]\nlearned_rule = true\n")).consolidation.learned_rule


@pytest.mark.parametrize(("text", "key"), [
    ('[consolidation]\nmax_per_run = "many"', "consolidation.max_per_run must be an integer"),
    ("[consolidation]\nmax_per_run = 1.5", "consolidation.max_per_run must be an integer"),
    ("[consolidation]\nmax_per_run = -1", "consolidation.max_per_run must be in"),
    ("[consolidation]\ntag_overlap = 1.5", "consolidation.tag_overlap must be in"),
    ("[consolidation]\nindex_pause_ms = true", "consolidation.index_pause_ms must be an integer"),
    ('[consolidation]\nscorer = "cosine"', "consolidation.scorer must be one of"),
    ("[consolidation]\npromote_to_team = 8\npromote_to_global = 4", "promote_to_global must be >="),
    ("[consolidation]\nmystery = 1", "unknown key consolidation.mystery"),
    ('[llm]\nenabled = "yes"', "llm.enabled must be true or false"),
    ("[consolidation]\nlearned_rule = 1", "consolidation.learned_rule must be true or false"),
    ('[schedule]\nweekly = "every sunday"', "schedule.weekly is not a valid cron expression"),
    ("[teams]\ncoder = 5", "teams.coder must be a folder name"),
    ('[teams]\ncoder = "../x"', "teams.coder must be a folder name"),
    ("[nonsense]\na = 1", "unknown section [nonsense]"),
    ("consolidation = 3", "[consolidation] must be a table"),
    ("[consolidation\n", "not valid TOML"),
])
def test_bad_settings_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")):
        load_settings(write(tmp_path, text))
