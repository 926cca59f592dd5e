"""Whether this machine has agreed to run a store's `[llm] command` (SPEC 5 and 9).

`memcli.toml` travels with the store: a team that shares its store through git (SPEC 13)
shares its settings too. A `[llm] command` there is a program that memcli runs with the rights
of whoever runs the next pass, often unattended, from a timer. A teammate (or anyone who can
push to the repository) could change it to any program. So a command runs only after a person
on this machine approved it with `memcli llm trust`, and the approval covers that exact
command line: the digest of its argv is kept in `ops/local/trusted-commands.json`, which is
machine-local and git-ignored. A changed command needs a new approval; until then runs are
rule-based and say why.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from memcli.errors import OpsFileError
from memcli.store import opsfiles

TRUST_NAME = "trusted-commands.json"


def trust_path(root: Path) -> Path:
    return root / "ops" / "local" / TRUST_NAME


def command_digest(argv: Sequence[str]) -> str:
    """The digest an approval records: of the exact argv, so any change needs a new one."""
    return "sha256:" + hashlib.sha256(orjson.dumps(list(argv))).hexdigest()


def _read(root: Path) -> dict[str, Any]:
    data = opsfiles.read_json(trust_path(root), {"commands": []})
    if not isinstance(data.get("commands"), list):
        raise OpsFileError(f"{trust_path(root)}: 'commands' must be a list; fix the file or move it aside "
                           "(memcli starts a new one, and the command needs `memcli llm trust` again)")
    return data


def is_trusted(root: Path, argv: Sequence[str]) -> bool:
    """Whether `argv` was approved on this machine. An unreadable approvals file trusts nothing."""
    try:
        data = _read(root)
    except OpsFileError:
        return False
    digest = command_digest(argv)
    return any(isinstance(c, dict) and c.get("digest") == digest for c in data["commands"])


def trust(root: Path, argv: Sequence[str], at: str) -> bool:
    """Approve `argv` on this machine; False when it was approved already."""
    data = _read(root)
    digest = command_digest(argv)
    if any(isinstance(c, dict) and c.get("digest") == digest for c in data["commands"]):
        return False
    data["commands"].append({"digest": digest, "argv": list(argv), "trusted_at": at})
    opsfiles.write_json(trust_path(root), data)
    return True


def untrust(root: Path) -> int:
    """Withdraw every approval on this machine; how many there were."""
    data = _read(root)
    count = len(data["commands"])
    if count:
        opsfiles.write_json(trust_path(root), {"commands": []})
    return count


def untrusted_notice(argv: Sequence[str]) -> str:
    shown = " ".join(argv)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return (f"[llm] command `{shown}` is not approved on this machine, so this run is rule-based: "
            "memcli.toml may come from a shared repository, and the command would run with your "
            "rights. If you trust it, run `memcli llm trust`")
