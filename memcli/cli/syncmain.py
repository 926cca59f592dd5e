"""`memcli merge-driver` on the fast path: git starts it once for every memcli file it merges,
so it runs without typer (see memcli.cli.fast)."""

from __future__ import annotations

from memcli.cli.fast import FastOpts


def merge_driver(opts: FastOpts, args: list[str]) -> int:
    from memcli.sync import drivers

    return drivers.run_driver(args)
