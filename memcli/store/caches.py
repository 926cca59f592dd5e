"""What a run leaves behind for the next one, besides the memory files and their indices:
the signature and similar-pairs caches, the listing stamps of a session_end pass, and which
index entries a session_end run refreshes. All are caches: missing or stale, they cost time,
never a decision."""

from __future__ import annotations

import contextlib
from typing import Any

from memcli.store import paircache, sigcache
from memcli.store.plans import Action, Plan
from memcli.store.sigcache import SigCache
from memcli.store.store import Folder, Stamp, Store


def listings_update(listings: dict[str, Stamp] | None, covered: list[str]) -> dict[str, Any]:
    """The stamps a session_end pass leaves for the next (`Store._names_since`), as a state
    update; a folder whose snapshot this run rewrites has none (its snapshot's mtime moves)."""
    if listings is None:
        return {}
    done = set(covered)
    return {"extra": {"listings": {rel: list(s) for rel, s in sorted(listings.items()) if rel not in done}}}


def refresh_map(refresh: dict[str, list[str]] | None, plan: Plan, actions: list[Action]) -> dict[str, Any]:
    """For a run that knows every file it read or changed (session_end), the files whose index
    entries need updating, per folder; the other entries stay as they are."""
    if refresh is None or plan.trigger != "session_end":
        return {}
    names: dict[str, set[str]] = {rel: set(found) for rel, found in refresh.items()}
    for action in actions:
        for op in action.ops:
            rel, _, name = op.path.rpartition("/")
            names.setdefault(rel, set()).add(name)
    # A covered folder without a snapshot was read whole: its index is rebuilt from the files.
    unknown = set(plan.covered) - set(refresh)
    return {"refresh": {rel: sorted(found) for rel, found in names.items() if rel not in unknown}}


def save_pair_caches(store: Store, pairs: dict[str, tuple[str, Any]]) -> None:
    """The similar pairs a full run found, per folder, for the next run (see paircache.PAIRS_NAME)."""
    for rel, (params, found) in pairs.items():
        folder = store.folder_by_rel(rel)
        if folder is not None and folder.path.is_dir():
            paircache.save_pairs(folder.cache(create=True), params, found)


def save_sig_caches(store: Store, sigs: dict[str, SigCache], hashes: dict[str, set[str] | None]) -> None:
    """Keep the signatures of the memories now in each covered folder, for the next pass.
    Where the run did not look at every file (None), nothing is dropped: a full run prunes."""
    for rel, current in hashes.items():
        cache = sigs.get(rel)
        folder = store.folder_by_rel(rel)
        if cache is None or folder is None:
            continue
        if current is None:  # nothing can be dropped: only add what is new
            if cache.added:
                sigcache.add_sigs(folder.cache(create=True), cache.added)
            continue
        loaded = cache.loaded()
        kept = {h: s for h, s in {**loaded, **cache.added}.items() if h in current}
        if kept.keys() != loaded.keys() or not (folder.cache() / sigcache.SIG_NAME).exists():
            sigcache.save_sigs(folder.cache(create=True), kept)


def park_folder(store: Store, folder: Folder, sigs: SigCache | None, pairs: tuple[str, Any] | None,
                hashes: set[str]) -> None:
    """One folder's signature cache (pruned to `hashes`) and pair cache, saved by a full run
    as soon as it is done with the folder (see `PlannerBase._park_caches`)."""
    with contextlib.suppress(OSError, ValueError):  # a failure costs the next run time, no more
        if sigs is not None:
            save_sig_caches(store, {folder.rel: sigs}, {folder.rel: hashes})
        if pairs is not None:
            save_pair_caches(store, {folder.rel: pairs})
