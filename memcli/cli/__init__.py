"""The command line. Thin: parse options, call one core function, render its result.

Start-up is lean on purpose: agents run `memcli hook ...` and `memcli recall` on every
session and prompt. `main` first offers the arguments to `memcli.cli.fast`, which serves the
hot commands with the standard library and the core modules they need; everything else
(and every `--help`) goes to the typer application, imported only then.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # `typing` costs a hook 3 ms; only the type checker needs it here
if TYPE_CHECKING:
    from typing import Any


def load_app() -> Any:
    """The typer application with every command registered (imports typer and the CLI)."""
    from memcli.cli import runs, safety, store_cmds  # noqa: F401  (registers commands)

    from memcli.cli import integrations  # noqa: F401  # isort: skip  (last in --help)
    from memcli.cli import recall_cmds  # noqa: F401  # isort: skip  (adds to `hook` too)
    from memcli.cli import capture_cmd  # noqa: F401  # isort: skip  (adds to `hook`)
    from memcli.cli import sync_cmd  # noqa: F401  # isort: skip
    from memcli.cli import llm_cmds  # noqa: F401  # isort: skip
    from memcli.cli.common import app

    return app


def main() -> None:
    from memcli.cli.fast import dispatch

    code = dispatch(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    load_app()()


def __getattr__(name: str) -> Any:
    """`from memcli.cli import app` (tests, embedding) without importing typer at start-up."""
    if name == "app":
        return load_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "load_app", "main"]
