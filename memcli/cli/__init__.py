"""The command line. Thin: parse options, call one core function, render its result."""

from __future__ import annotations

from memcli.cli import runs, safety, store_cmds  # noqa: F401  (registers commands)

from memcli.cli import integrations  # noqa: F401  # isort: skip  (last in --help)
from memcli.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
