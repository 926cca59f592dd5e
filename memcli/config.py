"""Settings from `memcli.toml` (SPEC section 5): defaults, types and ranges checked per key."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from memcli.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

SCORERS = ("token_sort_ratio", "token_set_ratio", "ratio", "partial_ratio", "WRatio", "QRatio")


@dataclass(frozen=True)
class Consolidation:
    max_per_run: int = 50
    index_pause_ms: int = 100
    min_age_days: float = 7.0
    tag_overlap: float = 0.80
    content_similarity: float = 0.80
    scorer: str = "token_sort_ratio"
    guards: bool = True
    semantic: bool = False  # the embedding signal of memcli[semantic] (README, Guards)
    # rule 3.1's "similar" decided by memcli.consolidate.learned (README, Guards); off by
    # default: with it, a pair's similarity alone no longer says whether it merges (SPEC 3.1)
    learned_rule: bool = False
    summarize_after_days: float = 30.0
    summarize_min_chars: int = 5000
    summary_max_chars: int = 1500
    promote_to_team: int = 5
    promote_to_global: int = 10
    stale_after_days: float = 90.0
    index_overflow: int = 100


@dataclass(frozen=True)
class Schedule:
    weekly: str = "0 0 * * 0"
    daily: tuple[str, ...] = ()  # light passes (SPEC 6), cron expressions in local time


@dataclass(frozen=True)
class Llm:
    enabled: bool = False
    model: str = "claude-haiku-4-5"
    max_calls_per_run: int = 20
    max_calls_per_day: int = 200  # across runs, counted in ops/state.json (local day)
    timeout_s: float = 60.0
    command: tuple[str, ...] = ()  # argv of a program: prompt on stdin, answer on stdout


@dataclass(frozen=True)
class Recall:
    agent: str = "claude"  # the agent id hooks and MCP use when none is given
    limit: int = 5
    briefing_chars: int = 2000
    prompt_limit: int = 3
    min_score: float = 0.0  # relevance below this is not put into a prompt
    hook_budget_ms: int = 300


@dataclass(frozen=True)
class Capture:
    enabled: bool = True  # capture from the hooks (SessionEnd, PreCompact); by hand always works
    min_messages: int = 4  # a session with fewer messages is skipped
    max_details_chars: int = 4000  # kept under summarize_min_chars: rule 3.2 leaves it alone


@dataclass(frozen=True)
class Settings:
    consolidation: Consolidation = field(default_factory=Consolidation)
    schedule: Schedule = field(default_factory=Schedule)
    llm: Llm = field(default_factory=Llm)
    recall: Recall = field(default_factory=Recall)
    capture: Capture = field(default_factory=Capture)
    teams: dict[str, str] = field(default_factory=dict)
    default_team: str = "team"

    def team_for(self, agent_id: str) -> str:
        """The team an agent's procedures are promoted to."""
        return self.teams.get(agent_id, self.default_team)


# key -> (minimum, maximum) for numbers; None means unbounded on that side.
_RANGES: dict[str, tuple[float | None, float | None]] = {
    "max_per_run": (0, None),
    "index_pause_ms": (0, 60_000),
    "min_age_days": (0, None),
    "tag_overlap": (0, 1),
    "content_similarity": (0, 1),
    "summarize_after_days": (0, None),
    "summarize_min_chars": (0, None),
    "summary_max_chars": (200, None),
    "promote_to_team": (1, None),
    "promote_to_global": (1, None),
    "stale_after_days": (1, None),
    "index_overflow": (1, None),
    "max_calls_per_run": (0, None),
    "max_calls_per_day": (0, 1_000_000),
    "timeout_s": (0.1, 3600),
    "limit": (1, 1000),
    "briefing_chars": (0, 100_000),
    "prompt_limit": (0, 100),
    "min_score": (0, None),
    "hook_budget_ms": (50, 60_000),
    "min_messages": (0, None),
    "max_details_chars": (500, 100_000),
}


def load_settings(store_root: Path) -> Settings:
    """Read `<store>/memcli.toml`; defaults apply for a missing file or key."""
    path = store_root / "memcli.toml"
    if not path.exists():
        return Settings()
    from memcli.store.fsops import read_bytes  # never blocks on a FIFO, never a folder

    try:
        raw = tomllib.loads(read_bytes(path, limit=1024 * 1024, follow=True).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file or remove it") from exc
    except OSError as exc:
        reason = exc.strerror or exc
        raise ConfigError(f"{path}: cannot be read ({reason}); fix the file or remove it") from exc
    return settings_from_dict(raw, path)


def settings_from_dict(raw: dict[str, Any], path: object = "memcli.toml") -> Settings:
    """Build checked settings from parsed TOML; every wrong key raises ConfigError naming it."""
    known = {"consolidation", "schedule", "llm", "teams", "recall", "capture"}
    for key in raw:
        if key not in known:
            raise ConfigError(f"{path}: unknown section [{key}] (known: {', '.join(sorted(known))})")
    teams_raw = dict(_section(raw, "teams", path))
    default_team = teams_raw.pop("default_team", "team")
    for agent, team in [("default_team", default_team), *teams_raw.items()]:
        if not isinstance(team, str) or not _is_folder_name(team):
            raise ConfigError(f"{path}: teams.{agent} must be a folder name string, got {team!r}")
    return Settings(
        consolidation=_build(Consolidation, _section(raw, "consolidation", path), path),
        schedule=_build(Schedule, _section(raw, "schedule", path), path),
        llm=_build(Llm, _section(raw, "llm", path), path),
        recall=_build(Recall, _section(raw, "recall", path), path),
        capture=_build(Capture, _section(raw, "capture", path), path),
        teams=teams_raw,
        default_team=default_team,
    )


def _section(raw: dict[str, Any], name: str, path: object) -> dict[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: [{name}] must be a table")
    return value


def _build(cls: Any, values: dict[str, Any], path: object) -> Any:
    section = cls.__name__.lower()
    defaults = cls()
    names = {f.name: f for f in fields(cls)}
    checked: dict[str, Any] = {}
    for key, value in values.items():
        if key not in names:
            raise ConfigError(f"{path}: unknown key {section}.{key}")
        checked[key] = _check(f"{section}.{key}", value, getattr(defaults, key), path)
    _check_cross(section, {**{n: getattr(defaults, n) for n in names}, **checked}, path)
    return replace(defaults, **checked)


def _check(name: str, value: Any, default: Any, path: object) -> Any:
    key = name.split(".")[-1]
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: {name} must be true or false, got {value!r}")
        return value
    if isinstance(default, (int, float)):
        return _check_number(name, key, value, default, path)
    if isinstance(default, tuple):
        return _check_daily(name, value, path) if key == "daily" else _check_command(name, value, path)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{path}: {name} must be a non-empty string, got {value!r}")
    if key == "agent" and not _is_agent_id(value):
        raise ConfigError(f"{path}: {name} must be an agent id (letters, digits, '.', '_', '-'), "
                          f"got {value!r}")
    if key == "scorer" and value not in SCORERS:
        raise ConfigError(f"{path}: {name} must be one of {', '.join(SCORERS)}, got {value!r}")
    return value


def _check_number(name: str, key: str, value: Any, default: Any, path: object) -> Any:
    wants_int = isinstance(default, int)
    ok = isinstance(value, int) if wants_int else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok:
        kind = "an integer" if wants_int else "a number"
        raise ConfigError(f"{path}: {name} must be {kind}, got {value!r}")
    low, high = _RANGES.get(key, (None, None))
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"{low if low is not None else '-inf'}..{high if high is not None else 'inf'}"
        raise ConfigError(f"{path}: {name} must be in {bounds}, got {value!r}")
    return value


def _check_cross(section: str, values: dict[str, Any], path: object) -> None:
    if section == "consolidation" and values["promote_to_global"] < values["promote_to_team"]:
        raise ConfigError(
            f"{path}: consolidation.promote_to_global must be >= consolidation.promote_to_team"
        )
    if section == "schedule" and values["weekly"] != Schedule.weekly:  # the default is known good
        problem = cron_problem(values["weekly"])
        if problem:
            raise ConfigError(f"{path}: schedule.weekly {problem}")


def cron_problem(expr: str) -> str | None:
    """Why `expr` is not a cron expression memcli can schedule by, or None. Five fields (or
    an @nickname such as @daily), as crontab reads them, that fire at least once: a valid
    but impossible date (`0 0 31 2 *`) would otherwise fail later, at every tick."""
    import datetime as dt

    from croniter import croniter  # a well-kept cron parser; imported only when needed

    fields_ = expr.split()
    if not croniter.is_valid(expr) or not (len(fields_) == 5 or (len(fields_) == 1 and expr.startswith("@"))):
        return f"is not a valid cron expression ({expr!r}; 5 fields: minute hour day month weekday)"
    try:
        croniter(expr, dt.datetime(2026, 1, 1)).get_next(dt.datetime)
        croniter(expr, dt.datetime(2026, 1, 1)).get_prev(dt.datetime)
    except Exception:  # croniter's CroniterBadDateError and kin: no such date, ever
        return f"never fires ({expr!r})"
    return None


def _check_daily(name: str, value: Any, path: object) -> tuple[str, ...]:
    """`[schedule] daily`: a list of cron expressions; each wrong one is named by position."""
    if not isinstance(value, list):
        raise ConfigError(f"{path}: {name} must be a list of cron expressions "
                          f"(e.g. [\"0 10 * * *\", \"0 15 * * *\"]), got {value!r}")
    for position, expr in enumerate(value):
        if not isinstance(expr, str):
            raise ConfigError(f"{path}: {name}[{position}] must be a cron expression string, got {expr!r}")
        problem = cron_problem(expr)
        if problem:
            raise ConfigError(f"{path}: {name}[{position}] {problem}")
    return tuple(value)


def _check_command(name: str, value: Any, path: object) -> tuple[str, ...]:
    """`[llm] command`: a command line (split as a shell would, but never run by one) or a
    list of arguments, passed to the program exactly."""
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ConfigError(f"{path}: {name} is not a valid command line ({exc}): {value!r}") from exc
    elif isinstance(value, list) and all(isinstance(arg, str) for arg in value):
        argv = list(value)
    else:
        raise ConfigError(f"{path}: {name} must be a command line string or a list of strings, got {value!r}")
    if not argv or not argv[0].strip():
        raise ConfigError(f"{path}: {name} must name a program (e.g. \"claude -p\"), got {value!r}")
    if any("\0" in arg for arg in argv):
        raise ConfigError(f"{path}: {name} holds a NUL character")
    return tuple(argv)


def _is_folder_name(name: str) -> bool:
    return bool(name) and name not in {".", ".."} and "/" not in name and "\\" not in name


def _is_agent_id(name: str) -> bool:
    return len(name) <= 100 and not name.startswith(".") and all(c.isalnum() or c in "._-" for c in name)
