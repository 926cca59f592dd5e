"""The similar-pairs cache (`.cache/<folder>/_pairs.json`): what the last full run found in
a folder's large blocks, so that the next compares only the memories with new content."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from memcli.store import fsops

# `_pairs.json` keeps what the last full run found in the folder's large blocks: the content
# hashes it compared (`covered`) and every pair of them whose similarity passed, with its score.
# A similarity depends on the two files' bytes alone, so the next run takes the pairs of
# memories it still finds under a covered hash from here, and compares only the memories with
# a new hash (against the whole block). `params` names everything the pairs depend on; any
# other value, or a damaged file, is no cache.

PAIRS_NAME = "_pairs.json"


@dataclass
class PairCache:
    covered: set[str]
    pairs: dict[tuple[str, str], float]


def load_pairs(folder: Path, params: str) -> PairCache | None:
    try:
        data = orjson.loads(fsops.read_bytes(folder / PAIRS_NAME))
        if data.get("params") != params:
            return None
        pairs = {(str(a), str(b)): float(score) for a, b, score in data["pairs"]}
        return PairCache({str(h) for h in data["covered"]}, pairs)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save_pairs(folder: Path, params: str, cache: PairCache) -> None:
    body = {"version": 1, "params": params, "covered": sorted(cache.covered),
            "pairs": [[a, b, score] for (a, b), score in sorted(cache.pairs.items())]}
    fsops.write_replace(folder / PAIRS_NAME, orjson.dumps(body))
