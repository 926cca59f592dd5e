"""`consolidate`: plan every rule in order over a simulated store, then apply the plan.

The plan is data (see `model.Plan`): each action carries its log entry, its reason and the
exact bytes it will write, each file with the hash it must have just before. A dry run renders
the plan; a real run hands it to `journal.execute`; the log records it; undo reverses it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.config import Consolidation
from memcli.consolidate import decisions, review, rules, runid, since
from memcli.consolidate.explain import merge_figures
from memcli.consolidate.similar import ALL_PAIRS_MAX, second_look, similar_pairs
from memcli.consolidate.since import Row
from memcli.consolidate.summary import extractive_summary
from memcli.errors import MemcliError
from memcli.store import caches, index, journal, log, opsfiles
from memcli.store.index import SigCache, load_sigs
from memcli.store.model import (
    Action,
    FileOp,
    Memory,
    Outcome,
    Plan,
    encode,
    format_ts,
    new_memory_id,
    new_run_id,
    now,
    sha256,
)
from memcli.store.store import Folder, FolderScan, Problem, Stamp, Store

TRIGGERS = ("manual", "weekly", "daily", "session_end", "index_overflow")
ALL_RULES = ("merge", "summarize", "promote", "archive")  # 3.1 to 3.4
# A light pass (SPEC 6) runs only these rules, never the LLM; every other trigger runs all four.
LIGHT_RULES = {"daily": ("merge", "promote")}
WHOLE_STORE = ("manual", "weekly", "daily")  # triggers that cover every folder when not narrowed
DISCOVERY_FLOOR = 0.60  # SPEC 9: pairs from here up to content_similarity may go to the LLM
Progress = Callable[[str, int, int], None]
# (details, max_chars) -> (summary, method) ; the LLM path plugs in here
Summarizer = Callable[[str, int], tuple[str, str]]


@dataclass(slots=True)
class Live:
    """A memory as the simulated store holds it during planning."""

    mem: Memory
    folder: Folder
    rel: str  # path relative to the store
    run_hash: str | None
    changed: bool  # since the last run (SPEC 1): in scope for session_end
    sig: bytes | None = None  # MinHash signature, from the folder's cache or computed
    key: tuple[str, str, str] = ("", "", "")  # newest-first sort key (created, updated, id)


@dataclass
class RunOptions:
    trigger: str = "manual"
    limit: int | None = None
    consent: bool = False
    folders: list[Folder] | None = None
    summarizer: Summarizer | None = None
    judge: Any = None  # llm.LLMClient-like; grey-zone pairs (SPEC 9)
    masker: Any = None
    progress: Progress | None = None
    warm_caches: bool = False  # a real run: leave caches that cover what it rewrites


@dataclass
class Planning:
    """Everything `plan` learned: the plan plus the problems it met on the way."""

    plan: Plan
    problems: list[Problem] = field(default_factory=list)
    sigs: dict[str, SigCache] = field(default_factory=dict)  # folder -> content hash -> sig
    refresh: dict[str, list[str]] | None = None  # session_end: folder -> files read or gone
    listings: dict[str, Stamp] | None = None  # session_end: folder -> stamp vouching for its names
    pairs: dict[str, tuple[str, Any]] = field(default_factory=dict)  # folder -> (params, PairCache)
    state_extra: dict[str, Any] = field(default_factory=dict)  # more for ops/state.json (LLM calls)
    vectors: Any = None  # semantic.VectorCache to save after a real run, or None


# ---------------------------------------------------------------- entry points


def consolidate(store: Store, *, trigger: str = "manual", dry_run: bool = False,
                limit: int | None = None, consent: bool = False, llm: bool | None = None,
                folders: list[Folder] | None = None, wait: float = 10.0,
                progress: Progress | None = None, plan_out: Path | None = None) -> Outcome:
    """One consolidation run: plan, then (unless a dry run) apply under the store lock."""
    opts = RunOptions(trigger, limit, consent, folders, progress=progress)
    notes = _attach_llm(store, opts, llm)
    if dry_run or plan_out is not None:
        planning = plan(store, opts, now())
        planning.plan.notes += notes + _llm_notes(opts) + _pending_note(store)
        if plan_out is not None:
            write_plan_file(plan_out, planning.plan)
        return preview(planning)
    opts.warm_caches = True
    with store.writing(wait) as recovered:
        planning = plan(store, opts, now())
        planning.plan.notes += notes + _llm_notes(opts) + recovered
        if opts.judge is not None:
            from memcli.consolidate import llm_bridge

            planning.state_extra.update(llm_bridge.state_update(store, opts.judge))
        return apply(store, planning)


def _attach_llm(store: Store, opts: RunOptions, llm: bool | None) -> list[str]:
    if opts.trigger in LIGHT_RULES:
        if llm:
            raise MemcliError(f"a {opts.trigger} pass is a light pass and never uses the LLM; "
                              "drop --llm, or run another trigger")
        return []
    from memcli.consolidate import llm_bridge  # the LLM path is optional and imported only when asked

    return llm_bridge.attach(store, opts, llm)


def _llm_notes(opts: RunOptions) -> list[str]:
    if opts.judge is None:
        return []
    from memcli.consolidate import llm_bridge

    return llm_bridge.run_notes(opts.judge)


def _pending_note(store: Store) -> list[str]:
    if journal.pending(store):
        return ["an interrupted run is waiting to be recovered; the next writing command "
                "(or `memcli doctor --fix`) will do it"]
    return []


# ---------------------------------------------------------------- planning


def plan(store: Store, opts: RunOptions, moment: dt.datetime) -> Planning:
    """Decide every action of a run at `moment`, in rule order, over a simulated store."""
    planner = Planner(store, opts, moment)
    with _gc_paused():
        planner.run()
    planner.apply_limit()
    taken = lambda rid: journal.run_dir(store, rid).exists() or log.find_run(store.root, rid) is not None  # noqa: E731
    planner.plan = runid.renamed(planner.plan, runid.settled_id(planner.plan, moment, taken))
    return Planning(planner.plan, planner.problems, planner.sigs, planner.refresh,
                    planner.listings if opts.trigger == "session_end" else None, planner.pairs_found,
                    vectors=planner.vectors if opts.warm_caches else None)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Planning makes a dictionary per index entry and an object per memory, hundreds of
    thousands, and no reference cycles: the cycle collector would walk them again and again
    (a fifth of a 100,000-memory plan). It runs again afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# Plan order is rule order (SPEC 3): the pair decisions of 3.1, then 3.2, 3.3 and 3.4.
_RULE_RANK = {"summarize": 1, "promote": 2, "archive": 3}


class Planner:
    """Holds the simulated store while the rules run; each rule adds actions to the plan."""

    def __init__(self, store: Store, opts: RunOptions, moment: dt.datetime) -> None:
        self.store = store
        self.cfg: Consolidation = store.settings.consolidation
        self.opts = opts
        self.now = moment
        self.stamp = format_ts(moment)
        self.plan = Plan(new_run_id(moment), opts.trigger, self.stamp)
        self.problems: list[Problem] = []
        self.live: dict[str, Live] = {}
        self.state = opsfiles.read_state(store.root)
        self.had_run = "last_success" in self.state
        self.queued = review.known_pairs(store.root)
        self.decisions = decisions.load(store.root)  # SPEC 3.6: what undos reversed stays reversed
        self.flagged = [list(f.get("ids", [])) for f in self.state.get("flagged", [])]
        self.taken_names: set[str] = set()
        self._all_loaded: list[Live] = []
        self.grey: list[tuple[Live, Live, float, str | None]] = []  # (older, newer, score, guard)
        self.sigs: dict[str, SigCache] = {}  # per folder: cached and new signatures
        self.refresh: dict[str, list[str]] = {}  # session_end: folder -> files read or gone
        self.listings: dict[str, Stamp] = {}  # session_end: stamps to keep (Store._names_since)
        self.pair_caches: dict[str, Any] = {}  # folder -> index.PairCache loaded (or None)
        self.pairs_found: dict[str, tuple[str, Any]] = {}  # folder -> (params, index.PairCache) found
        self._protection: dict[str, str | None] = {}
        self._lists: dict[str, list[Live]] = {}  # rule -> who it may pick, once merged (_shortlist)
        self.seen: set[str] = set()  # every id loaded by this run
        self._loaded = 0
        from memcli.recall import uses

        self.uses = uses.pending(store.root)  # rules 3.3/3.4 see pending uses too (SPEC 10)
        self.features: dict[str, Any] = {}  # content hash -> guards.TextFeatures, made once a run
        self.vectors = self._semantic_cache()  # semantic.VectorCache when the signal is on
        self._meaning: dict[str, float] = {}  # member id -> cosine, for members merged by meaning

    # ------------------------------------------------------------ loading

    def run(self) -> None:
        """Every rule over the run's scope. A full run goes folder by folder: no rule looks
        across folders (duplicates are per folder; a promotion only adds a fresh copy), so each
        folder's memories are let go once its rules are done, which keeps memory flat however
        large the store. The plan is then put in rule order (a stable sort keeps folder order)."""
        if self.opts.trigger == "session_end":
            self.load()
            self._apply_rules()
            self._sign_rewritten()
        else:
            folders = self._scope_folders()
            listings: dict[str, list[str]] = {}
            twins = self.store.duplicate_ids(listings)
            for position, folder in enumerate(folders):
                self._load_folder(folder, twins, listings.get(folder.rel))
                self._apply_rules()
                self._release()
                self._progress("planning", position + 1, len(folders))
            self.plan.covered = [f.rel for f in folders]
            if self.opts.trigger in WHOLE_STORE and self.opts.folders is None:
                # a whole-store run also covers a folder its promotions create: it saw (wrote)
                # every memory there, which the next session_end need not look at again
                self.plan.covered += sorted({rel for a in self.plan.actions if a.type == "promote"
                                             for rel in a.folders} - set(self.plan.covered))
            self.plan.memory_count = self._count_live()
        self.plan.flagged_done = [p for p in self.flagged if all(i in self.seen for i in p)]
        self.plan.actions.sort(key=lambda action: _RULE_RANK.get(action.type, 0))

    def _apply_rules(self) -> None:
        wanted = LIGHT_RULES.get(self.opts.trigger, ALL_RULES)
        self.merge_duplicates()  # every pass merges
        self._shortlist()
        if "summarize" in wanted:
            self.summarize_verbose()
        if "promote" in wanted:
            self.promote_patterns()
        if "archive" in wanted:
            self.archive_stale()

    def _release(self) -> None:
        self._sign_rewritten()
        self._cover_rewritten()
        self.features.clear()
        self.live.clear()
        self._all_loaded.clear()
        self._protection.clear()
        self._lists = {}

    def _cover_rewritten(self) -> None:
        """(A real full run.) The folder's large blocks as the run leaves them: memories it
        rewrote have new content, compared now against their block, so that the pair cache the
        run leaves behind covers them too and the next run compares nothing it need not. A
        dry run skips this: it leaves no cache."""
        if not self.opts.warm_caches or not self.pairs_found:
            return
        floor = DISCOVERY_FLOOR if self.opts.judge is not None else None
        blocks: dict[tuple[str, str, str], list[Live]] = {}
        for item in self.live.values():
            if rules.takes_part(item.mem):
                blocks.setdefault((item.folder.rel, item.mem.type, item.mem.subtype), []).append(item)
        for (rel, _, _), block in blocks.items():
            found = self.pairs_found.get(rel)
            if len(block) <= ALL_PAIRS_MAX or found is None or found[0] != self._pair_params(floor):
                continue
            hashes = [i.mem.content_hash for i in block]  # (pairs are by content: order plays no part)
            focus = [n for n, h in enumerate(hashes) if h not in found[1].covered]
            if not focus or len(set(hashes)) != len(hashes):
                continue
            texts = BlockTexts(block)
            pairs = similar_pairs(texts, self.cfg.scorer, self.cfg.content_similarity, focus=focus,
                                  floor=floor, sigs=self._sigs(block, texts), lengths=texts.lengths(),
                                  near=self._near())
            found[1].covered.update(hashes[n] for n in focus)
            found[1].pairs.update(((hashes[i], hashes[j]), score) for (i, j), score in pairs.items())

    def _sign_rewritten(self) -> None:
        """Memories this run rewrites get their new signatures now, in bulk, so that the cache
        the run leaves behind covers them and the next pass computes none."""
        if not self.opts.warm_caches:
            return  # a dry run leaves no cache
        from memcli.consolidate import candidates

        folders = {i.folder.rel: i.folder for i in self.live.values()}
        caches = {rel: self._folder_sigs(folder) for rel, folder in folders.items()}
        fresh = [i for i in self.live.values() if i.mem.content_hash not in caches[i.folder.rel]]
        if not fresh:
            return
        texts = [rules.content_text(i.mem.content) for i in fresh]
        for item, sig in zip(fresh, candidates.signatures(texts), strict=True):
            item.sig = sig
            self._folder_sigs(item.folder)[item.mem.content_hash] = sig

    def _load_folder(self, folder: Folder, twins: dict[str, list[str]], names: list[str] | None) -> None:
        """A full run's view of one folder: its index entries where the files still match them
        (size and mtime), the files themselves where not. A memory known from its entry is read
        only if a rule needs its text or rewrites it."""
        scan = self.store.scan(folder, load=False, compare=False, names=names)
        self.problems += [p for p in scan.problems if p.code != "index_gone"]  # the run rewrites it
        mems = dict(scan.memories)
        unread = [e for e in scan.entries if e["id"] not in mems]
        mems.update((m.id, m) for m in self.store.planned(folder, unread))
        for mem_id in [i for i in mems if i in twins]:
            self.problems.append(Problem(self.store.rel(mems.pop(mem_id).path),
                                         f"duplicate id {mem_id} (in {', '.join(twins[mem_id])}); left "
                                         "out until one copy is renamed", "duplicate_id"))
        run_hashes, prefix = scan.run_hashes, folder.rel + "/"
        for mem_id in sorted(mems):  # signatures are looked up when a block needs them (_sigs)
            mem = self._with_uses(mems[mem_id])
            run_hash = run_hashes.get(mem_id)
            item = Live(mem, folder, prefix + mem.name, run_hash, run_hash != mem.content_hash,
                        None, rules.newest_first_key(mem))
            self._all_loaded.append(item)
            self.live[mem_id] = item
        self.seen.update(mems)
        self._loaded += len(mems)

    def _with_uses(self, mem: Memory) -> Memory:
        """The memory as the rules see it: pending uses added to its facts (not its file)."""
        if not self.uses:
            return mem
        from memcli.recall import uses

        return uses.with_pending(mem, self.uses)

    def _put(self, item: Live) -> None:
        item.mem = self._with_uses(item.mem)
        self._all_loaded.append(item)
        self.live[item.mem.id] = item
        self.seen.add(item.mem.id)

    def load(self) -> None:
        """Load the whole scope at once (session_end, and review merges)."""
        flagged_ids = {i for pair in self.flagged for i in pair}
        if self.opts.trigger == "session_end":
            self._load_changed(flagged_ids)
        else:
            self._load_all()
        self._drop_duplicate_ids()
        self.plan.covered = sorted({i.folder.rel for i in self.live.values() if i.changed}) \
            if self.opts.trigger == "session_end" else [f.rel for f in self._scope_folders()]
        self.plan.flagged_done = [p for p in self.flagged if all(i in self.seen for i in p)]

    def _load_all(self) -> None:
        """Read every memory of the run's folders (manual, weekly, index_overflow)."""
        folders = self._scope_folders()
        self._progress("reading", 0, len(folders))
        for position, folder in enumerate(folders):
            snap = index.load_lastrun(folder.cache())
            scan = self.store.scan(folder, load=True, entries=False, lastrun=snap)
            self.problems += scan.problems
            cache, run_hashes = self._folder_sigs(folder), scan.run_hashes
            for mem_id in sorted(scan.memories):
                mem = scan.memories[mem_id]
                self._put(Live(mem, folder, f"{folder.rel}/{mem.name}", run_hashes.get(mem_id),
                               run_hashes.get(mem_id) != mem.content_hash, cache.get(mem.content_hash),
                               rules.newest_first_key(mem)))
            self._loaded += len(scan.memories)
            self._progress("reading", position + 1, len(folders))
        self.plan.memory_count = self._count_live()

    def _load_changed(self, flagged_ids: set[str]) -> None:
        """session_end: stat every file, but read only the changed memories and their duplicate
        candidates (found from cached signatures), so the cost follows the changes."""
        stamps = since.stamps(self.state.get("listings"))
        for folder in self.store.memory_folders():
            snap = index.load_lastrun(folder.cache())
            scan = (self.store.scan(folder, load=False) if snap is None
                    else self.store.scan_since(folder, snap, stamps.get(folder.rel)))
            if scan.stamp is not None:
                self.listings[folder.rel] = scan.stamp
            self.problems += scan.problems
            self.plan.memory_count += scan.count
            if scan.reread is not None:
                self.refresh[folder.rel] = scan.reread
            changed = since.changed_ids(scan, flagged_ids)
            if changed:
                cache, rows = self._folder_sigs(scan.folder), since.focus_rows(scan, changed)
                self._take(scan, since.with_candidates(rows, changed, cache, self._reader(scan)), changed)

    def _reader(self, scan: FolderScan) -> Callable[[Row], Memory | None]:
        """A row's memory: as the scan read it, else read now. None when the file is gone or
        went bad since the snapshot with the same size and mtime (a problem, not an abort)."""
        tried: dict[str, Memory | None] = dict(scan.memories)

        def read(row: Row) -> Memory | None:
            if row.id not in tried:  # each file read once, even when it cannot be
                problems: list[Problem] = []
                tried[row.id] = self.store.try_read(scan.folder.path / row.file, scan.folder, problems)
                self.problems += problems
            return tried[row.id]

        return read

    def _folder_sigs(self, folder: Folder) -> SigCache:
        if folder.rel not in self.sigs:
            self.sigs[folder.rel] = load_sigs(folder.cache())
        return self.sigs[folder.rel]

    def _scope_folders(self) -> list[Folder]:
        if self.opts.folders is not None:
            return list(self.opts.folders)
        folders = self.store.memory_folders()
        if self.opts.trigger == "index_overflow":
            return [f for f in folders if _file_count(f) > self.cfg.index_overflow]
        return folders

    def _take(self, scan: FolderScan, rows: dict[str, Row], changed: set[str]) -> None:
        """Put the folder's memories of `rows` into the simulated store (session_end)."""
        cache, read = self._folder_sigs(scan.folder), self._reader(scan)
        for mem_id in sorted(rows):
            row = rows[mem_id]
            mem = read(row)
            if mem is None:
                continue
            run_hash = row.digest.hex() if row.unchanged else scan.run_hashes.get(mem_id)
            self._put(Live(mem, scan.folder, f"{scan.folder.rel}/{mem.name}", run_hash, mem_id in changed,
                           cache.get(mem.content_hash),
                           rules.newest_first_key(mem)))

    def _drop_duplicate_ids(self) -> None:
        """An id in two live files is bad input: both are reported and left out of the run."""
        where: dict[str, list[Live]] = {}
        for item in self._all_loaded:
            where.setdefault(item.mem.id, []).append(item)
        for mem_id, items in where.items():
            if len(items) > 1:
                paths = ", ".join(i.rel for i in items)
                self.problems += [Problem(i.rel, f"duplicate id {mem_id} (in {paths}); left out "
                                          "until one copy is renamed", "duplicate_id") for i in items]
                self.live.pop(mem_id, None)

    def _count_live(self) -> int:
        if self.opts.trigger in WHOLE_STORE and self.opts.folders is None:
            return self._loaded
        return sum(_file_count(f) for f in self.store.memory_folders())  # the rest of the store too

    def _progress(self, stage: str, done: int, total: int) -> None:
        if self.opts.progress is not None:
            self.opts.progress(stage, done, total)

    # ------------------------------------------------------------ helpers

    def protected(self, item: Live) -> str | None:
        """Why the memory is protected (computed once; a rewrite computes it again)."""
        mem_id = item.mem.id
        if mem_id not in self._protection:
            self._protection[mem_id] = rules.protection_reason(item.mem, self.now, self.cfg,
                                                               self.opts.consent)
        return self._protection[mem_id]

    def eligible(self, item: Live) -> bool:
        """Takes part in the rules at all, and is in this run's scope."""
        in_scope = item.changed or self.opts.trigger != "session_end"
        return in_scope and rules.takes_part(item.mem) and item.mem.id in self.live

    def rewrite(self, item: Live, data: dict[str, Any]) -> FileOp:
        """Plan a rewrite of a live memory in its own format; the simulated store follows."""
        raw = encode(data, item.mem.fmt)
        op = FileOp("write", item.rel, item.mem.content_hash, raw)  # the hash it has at this point
        item.mem = self._with_uses(Memory(data, item.mem.path, item.mem.fmt, sha256(raw)))
        self._protection.pop(item.mem.id, None)
        return op

    def archive_ops(self, item: Live, data: dict[str, Any]) -> list[FileOp]:
        """Plan the move of a memory into archive/ (whole, with the archive fields)."""
        raw = encode(data, item.mem.fmt)
        dest = self._archive_name(item.mem.id, item.mem.fmt)
        ops = [FileOp("create", dest, None, raw), FileOp("remove", item.rel, item.mem.content_hash)]
        del self.live[item.mem.id]
        return ops

    def _archive_name(self, mem_id: str, fmt: str) -> str:
        name = f"{mem_id}.{fmt}"
        if (self.store.archive / name).exists() or name in self.taken_names:
            name = f"{mem_id}@{self.plan.run_id}.{fmt}"
        self.taken_names.add(name)
        return f"archive/{name}"

    def add(self, action: Action) -> None:
        self.plan.actions.append(action)

    # ------------------------------------------------------------ 3.1 merge duplicates

    def merge_duplicates(self) -> None:
        """Rule 3.1 over every (folder, type, subtype) block of the loaded memories."""
        blocks: dict[tuple[str, str, str], list[Live]] = {}
        for item in self.live.values():
            if rules.takes_part(item.mem):
                key = (item.folder.rel, item.mem.type, item.mem.subtype)
                blocks.setdefault(key, []).append(item)
        for position, key in enumerate(sorted(blocks)):
            self._progress("comparing", position, len(blocks))
            block = blocks[key]
            if self.opts.trigger == "session_end" and not any(i.changed for i in block):
                continue
            self._merge_block(sorted(block, key=lambda i: i.key, reverse=True))
        if self.opts.judge is not None:
            self._judge_grey()

    def _merge_block(self, block: list[Live]) -> None:
        texts = BlockTexts(block)
        focus = [n for n, i in enumerate(block) if i.changed] if self.opts.trigger == "session_end" else None
        floor = DISCOVERY_FLOOR if self.opts.judge is not None else None
        if len(block) > ALL_PAIRS_MAX and focus is None:
            pairs = self._block_pairs(block, texts, floor)
        else:
            sigs = self._sigs(block, texts) if len(block) > ALL_PAIRS_MAX else None
            lengths = texts.lengths() if sigs is not None else None
            pairs = similar_pairs(texts, self.cfg.scorer, self.cfg.content_similarity, focus=focus,
                                  floor=floor, sigs=sigs, lengths=lengths, near=self._near())
        second_look(texts, pairs, self.cfg.scorer, self.cfg.content_similarity, floor,
                    plain=lambda n: self._features(block[n]).plain)
        semantic = self._semantic_pairs(block, texts, pairs, focus)
        older: dict[int, list[int]] = {}  # keeper index -> older indices it resembles, newest first
        for i, j in sorted(pairs.keys() | semantic.keys()):
            older.setdefault(i, []).append(j)
        assigned: set[int] = set()
        for k in sorted(older):  # a keeper: the newest of its group, unless taken by a newer one
            if k in assigned:
                continue
            assigned.add(k)
            members = self._members(block, k, older[k], pairs, assigned, semantic)
            if members:
                self._resolve_group(block[k], members)
        if self.opts.judge is not None:
            self._collect_grey(block, pairs)

    def _block_pairs(self, block: list[Live], texts: BlockTexts,
                     floor: float | None) -> dict[tuple[int, int], float]:
        """A large block's similar pairs in a full run: those among memories the folder's pair
        cache covers come from it; only memories with a new content hash are compared (with
        the whole block). Gives exactly what comparing the whole block gives."""
        folder = block[0].folder
        params = self._pair_params(floor)
        if folder.rel not in self.pair_caches:
            self.pair_caches[folder.rel] = index.load_pairs(folder.cache(), params)
        cache = self.pair_caches[folder.rel]
        hashes = [item.mem.content_hash for item in block]
        position = {h: n for n, h in enumerate(hashes)}
        usable = cache is not None and len(position) == len(hashes)  # equal files: compare them all
        focus = [n for n, h in enumerate(hashes) if not usable or h not in cache.covered]  # type: ignore[union-attr]
        found = similar_pairs(texts, self.cfg.scorer, self.cfg.content_similarity, floor=floor,
                              sigs=self._sigs(block, texts), lengths=texts.lengths(), near=self._near(),
                              focus=None if len(focus) == len(block) else focus) if focus else {}
        if usable and cache is not None:
            for (a, b), score in cache.pairs.items():
                if a in position and b in position:
                    i, j = sorted((position[a], position[b]))
                    found[(i, j)] = score
        if not self.opts.warm_caches:
            return found  # a dry run leaves no cache
        fresh = self.pairs_found.setdefault(folder.rel, (params, index.PairCache(set(), {})))[1]
        fresh.covered.update(hashes)
        fresh.pairs.update(((hashes[i], hashes[j]), score) for (i, j), score in found.items())
        return found

    def _pair_params(self, floor: float | None) -> str:
        from memcli.consolidate import candidates, similar

        return (f"{self.cfg.scorer}|>{self.cfg.content_similarity}|floor={floor}|near={self._near()}"
                f"|lsh={candidates.DEFAULT_BANDS}x{candidates.DEFAULT_ROWS}|agree={similar.MIN_AGREEMENT}"
                f"|short={similar.SHORT_TEXT}|sig=oph5")

    def _sigs(self, block: list[Live], texts: Sequence[str]) -> list[bytes]:
        """The block's signatures: cached by content hash, the missing ones computed in bulk
        and kept for the folder's cache."""
        from memcli.consolidate import candidates

        cache = self._folder_sigs(block[0].folder)
        for item in block:
            if item.sig is None:
                item.sig = cache.get(item.mem.content_hash)
        missing = [n for n, item in enumerate(block) if item.sig is None]
        for n, sig in zip(missing, candidates.signatures([texts[n] for n in missing]), strict=True):
            block[n].sig = cache[block[n].mem.content_hash] = sig
        return [item.sig or b"" for item in block]

    def _members(self, block: list[Live], k: int, candidates: list[int], pairs: dict[tuple[int, int], float],
                 assigned: set[int], semantic: dict[tuple[int, int], float]) -> list[tuple[Live, float]]:
        """Older unassigned duplicates of keeper k: similar text, or (with the semantic signal)
        similar meaning; guard-rejected pairs are kept apart."""
        keeper = block[k]
        members: list[tuple[Live, float]] = []
        for m in candidates:
            score = pairs.get((k, m), 0.0)
            meaning = (k, m) in semantic and score <= self.cfg.content_similarity
            rule_score = 1.0 if meaning else score  # by meaning: the tag, type and link tests remain
            if m in assigned or not rules.is_duplicate_pair(keeper.mem, block[m].mem, rule_score, self.cfg):
                continue
            if meaning and (k, m) not in pairs:
                score = pairs[(k, m)] = rules.similarity(
                    rules.content_text(keeper.mem.content), rules.content_text(block[m].mem.content),
                    self.cfg.scorer)
            guard = self._guard(block[m], keeper) if self.cfg.guards else None
            if guard:
                self._keep_apart(block[m], keeper, guard, score)
                if self.opts.judge is not None:
                    self.grey.append((block[m], keeper, score, guard))
                continue
            assigned.add(m)
            if meaning:
                self._meaning[block[m].mem.id] = semantic[(k, m)]
            members.append((block[m], score))
        return members

    def _guard(self, older: Live, newer: Live) -> str | None:
        """The first guard that rejects the pair; each text is analysed once a run."""
        from memcli.consolidate.guards import guard_rejects

        return guard_rejects(self._features(older), self._features(newer))

    def _features(self, item: Live) -> Any:
        """The memory's text features (guards.TextFeatures), made once a run."""
        key = item.mem.content_hash
        if key not in self.features:
            from memcli.consolidate.guards import TextFeatures

            self.features[key] = TextFeatures(rules.raw_text(item.mem.content))
        return self.features[key]

    # ------------------------------------------------------------ text similarity, second looks

    def _near(self) -> float:
        return round(self.cfg.content_similarity - rules.SECOND_LOOK_BAND, 4)

    def _semantic_cache(self) -> Any:
        if not self.cfg.semantic:
            return None
        from memcli.consolidate import semantic

        if not semantic.available():
            self.plan.notes.append(semantic.NOT_INSTALLED)
            return None
        return semantic.VectorCache(self.store.root)

    def _semantic_pairs(self, block: list[Live], texts: BlockTexts, pairs: dict[tuple[int, int], float],
                        focus: list[int] | None) -> dict[tuple[int, int], float]:
        """Pairs whose embeddings say they mean the same (cosine), that text similarity alone
        does not make duplicates; {} without the semantic signal."""
        if self.vectors is None or len(block) < 2 or focus == []:
            return {}
        from memcli.consolidate import semantic

        vectors = self.vectors.get([i.mem.content_hash for i in block],
                                   lambda n: rules.raw_text(block[n].mem.content))
        return semantic.meaning_pairs(vectors, pairs, self.cfg.content_similarity, focus=focus)

    def _keep_apart(self, older: Live, newer: Live, guard: str, score: float) -> None:
        ids = [older.mem.id, newer.mem.id]
        item = None
        if review.pair_key(ids) not in self.queued:
            self.queued.add(review.pair_key(ids))
            item = self._review_item(ids, "possible_contradiction", score, guard=guard)
        self.add(Action("keep_separate", {"type": "keep_separate", "memory_ids": ids, "reason": guard},
                        f"alike ({score:.2f}) but the {guard} guard sees a disagreement: both kept, "
                        "queued for review", review=item))

    def _review_item(self, ids: list[str], reason: str, score: float, **extra: Any) -> dict[str, Any]:
        return {"memory_ids": ids, "reason": reason, "similarity": round(score, 4),
                "run_id": self.plan.run_id, "created_at": self.stamp, **extra}

    def _resolve_group(self, keeper: Live, members: list[tuple[Live, float]]) -> None:
        """Apply the conflict cases of 3.1 per keeper-member pair, then merge what is left."""
        eligible = [member for member, score in members if not self._conflict(member, keeper, score)]
        if eligible:
            self._merge_group(keeper, eligible, scores={m.mem.id: score for m, score in members})

    def _conflict(self, older: Live, newer: Live, score: float) -> bool:
        """The first two conflict cases of 3.1, which keep both memories whatever the
        similarity (or the LLM) says: different authors, or both edited since the last run."""
        ids = [older.mem.id, newer.mem.id]
        if self.decisions.keeps_apart(*ids):
            self.add(Action("keep_separate", {"type": "keep_separate", "memory_ids": ids,
                                              "reason": "undo_decision"},
                            "an undo reversed their merge: kept apart (memcli review list --all)"))
            return True
        if older.mem.created_by != newer.mem.created_by:
            self.add(Action("keep_separate", {"type": "keep_separate", "memory_ids": ids,
                                              "reason": "different_authors"},
                            "duplicates by different authors: both kept"))
            return True
        if self._both_changed(older, newer):
            self._flag_both_changed(ids, score)
            return True
        return False

    def _both_changed(self, a: Live, b: Live) -> bool:
        return (rules.edited_since_run(a.mem, a.run_hash, self.had_run)
                and rules.edited_since_run(b.mem, b.run_hash, self.had_run))

    def _flag_both_changed(self, ids: list[str], score: float) -> None:
        item = None
        if review.pair_key(ids) not in self.queued:
            self.queued.add(review.pair_key(ids))
            item = self._review_item(ids, "both_changed", score)
        self.add(Action("flag", {"type": "flag", "memory_ids": ids, "reason": "both_changed"},
                        "duplicates both edited since the last run: queued for review", review=item))

    def _merge_group(self, keeper: Live, members: list[Live], summary: str | None = None,
                     scores: dict[str, float] | None = None) -> None:
        """Merge members into the keeper, or into the protected one of the group (3.1);
        ``scores`` are each member's similarity to the keeper (computed where missing)."""
        scores = scores or {}
        group = [keeper, *members]
        guarded = {i.mem.id: self.protected(i) for i in group}
        if guarded[keeper.mem.id]:
            survivor = keeper
        else:
            survivor = next((m for m in members if guarded[m.mem.id]), keeper)
        if survivor is not keeper or guarded[keeper.mem.id]:
            absorbed = [i for i in group if not guarded[i.mem.id]]
            if absorbed:
                self._merge_into_protected(survivor, absorbed, group, scores)
            return
        self._merge_plain(keeper, members, summary, scores)

    def _merge_plain(self, keeper: Live, members: list[Live], summary: str | None = None,
                     scores: dict[str, float] | None = None) -> None:
        similar, lines = merge_figures(keeper, members, keeper, scores or {}, self._meaning, self.cfg.scorer)
        data = rules.merge_into_keeper(keeper.mem.data, [m.mem.data for m in members], self.stamp)
        if summary:  # the LLM may word the merged summary (SPEC 9)
            data["content"] = {**data["content"], "summary": summary}
        ops = [self.rewrite(keeper, data)]
        for member in members:
            ops += self.archive_ops(member, self._archived(member, "merged", keeper.mem.id))
        ids = [m.mem.id for m in reversed(members)] + [keeper.mem.id]
        self.add(Action("merge", {"type": "merge", "source_ids": ids, "result_id": keeper.mem.id, **similar},
                        f"the newest keeps; {len(members)} older duplicate(s) archived" + lines,
                        touches=ids, ops=ops, folders=[keeper.folder.rel, "archive"]))

    def _merge_into_protected(self, survivor: Live, absorbed: list[Live], group: list[Live],
                              scores: dict[str, float]) -> None:
        ops: list[FileOp] = []
        for item in absorbed:
            ops += self.archive_ops(item, self._archived(item, "merged", survivor.mem.id))
        ids = [i.mem.id for i in reversed(absorbed)] + [survivor.mem.id]
        similar, lines = merge_figures(survivor, absorbed, group[0], scores, self._meaning, self.cfg.scorer)
        log = {"type": "merge", "source_ids": ids, "result_id": survivor.mem.id, **similar}
        self.add(Action("merge", log,
                        f"the protected one stays as it is; {len(absorbed)} restatement(s) archived" + lines,
                        touches=[i.mem.id for i in group], ops=ops,
                        folders=[survivor.folder.rel, "archive"]))

    def _archived(self, item: Live, reason: str, superseded_by: str | None = None) -> dict[str, Any]:
        return rules.archived_record(item.mem.data, reason=reason, folder=item.folder.rel,
                                     run_id=self.plan.run_id, stamp=self.stamp,
                                     superseded_by=superseded_by)

    # ------------------------------------------------------------ SPEC 9: grey-zone pairs

    def _collect_grey(self, block: list[Live], pairs: dict[tuple[int, int], float]) -> None:
        """Pairs in the discovery band [0.60, 0.80] that meet the tag rule, for the LLM."""
        for (i, j), score in sorted(pairs.items()):
            newer, older = block[i], block[j]  # the block is sorted newest first
            if score > self.cfg.content_similarity or not self._both_live(older, newer):
                continue
            if rules.is_duplicate_pair(older.mem, newer.mem, 1.0, self.cfg):  # tags, type, links
                self.grey.append((older, newer, score, None))

    def _both_live(self, a: Live, b: Live) -> bool:
        return a.mem.id in self.live and b.mem.id in self.live

    def _judge_grey(self) -> None:
        pairs = [(f"{o.mem.id}|{n.mem.id}", rules.raw_text(o.mem.content), rules.raw_text(n.mem.content),
                  score, guard) for o, n, score, guard in self.grey]
        from memcli.consolidate import llm_bridge

        decisions = llm_bridge.judge(self.opts.judge, self.opts.masker, pairs)
        grey, self.grey = self.grey, []  # judged once: the next folder starts afresh
        for (older, newer, score, _guard), decision in zip(grey, decisions, strict=True):
            ids = [older.mem.id, newer.mem.id]
            self.add(Action("judge", {"type": "judge", "memory_ids": ids, "decision": decision.action,
                                      "reason": decision.reason, "similarity": round(score, 4)},
                            f"LLM: {decision.action} ({score:.2f}): {decision.reason}"))
            if self._both_live(older, newer) and decision.action in ("MERGE", "REPLACE", "UPDATE"):
                self._apply_decision(older, newer, score, decision)

    def _apply_decision(self, older: Live, newer: Live, score: float, decision: Any) -> None:
        """MERGE, REPLACE or UPDATE, within the conflict cases of 3.1 and protection."""
        if self._conflict(older, newer, score):
            return
        if decision.action == "MERGE":
            self._merge_group(newer, [older], summary=decision.merged_summary)
        elif decision.action == "REPLACE":
            self._replace(older, newer)
        else:
            self._update(older, newer, decision.merged_summary)

    def _replace(self, older: Live, newer: Live) -> None:
        """The older is archived as superseded by the newer, whose content stays as it is."""
        if self.protected(older):
            return
        ops = self.archive_ops(older, self._archived(older, "replaced", newer.mem.id))
        ids = [older.mem.id, newer.mem.id]
        self.add(Action("merge", {"type": "merge", "source_ids": ids, "result_id": newer.mem.id,
                                  "method": "llm_replace"},
                        "the LLM says the newer replaces the older: archived the older",
                        touches=ids, ops=ops, folders=[older.folder.rel, "archive"]))

    def _update(self, older: Live, newer: Live, summary: str | None) -> None:
        """The newer takes the older's missing facts; both stay live."""
        if self.protected(newer):
            return
        data = rules.merge_into_keeper(newer.mem.data, [older.mem.data], self.stamp)
        data.update(access_count=newer.mem.data.get("access_count", 0),
                    last_accessed=newer.mem.data.get("last_accessed"),
                    supersedes=newer.mem.data.get("supersedes", []))
        if summary:
            data["content"] = {**data["content"], "summary": summary}
        self.add(Action("update", {"type": "update", "memory_id": newer.mem.id, "source_ids": [older.mem.id],
                                   "method": "llm"},
                        f"the LLM enriched {newer.mem.id} with facts from {older.mem.id}; both kept",
                        touches=[newer.mem.id], ops=[self.rewrite(newer, data)], folders=[newer.folder.rel]))

    # ------------------------------------------------------------ 3.2 summarise

    def summarize_verbose(self) -> None:
        for item in self._candidates("summarize",
                                     lambda mem: rules.needs_summary(mem, self.now, self.cfg)):
            details = str(item.mem.content["details"])
            text, method = self._summarize(details)
            data = rules.summarized_record(item.mem.data, text, self.stamp)
            self.add(Action("summarize", {"type": "summarize", "memory_id": item.mem.id, "method": method},
                            f"{len(details)} -> {len(text)} characters ({method})", touches=[item.mem.id],
                            ops=[self.rewrite(item, data)],
                            folders=[item.folder.rel]))

    def _summarize(self, details: str) -> tuple[str, str]:
        limit = self.cfg.summary_max_chars
        if self.opts.summarizer is not None:
            return self.opts.summarizer(details, limit)
        return extractive_summary(details, limit), "extractive"

    def _shortlist(self) -> None:
        """After the merges, one pass over the memories for rules 3.2-3.4: who each rule may
        pick, by its own test (a rule only ever shrinks a later rule's list: a summary makes a
        memory no staler, and promotion only ever looks at procedural memories, summaries at
        episodic ones). Each rule tests its list again when its turn comes."""
        order = sorted(self.live.values(), key=lambda i: (i.folder.rel, i.mem.id))
        summarize: list[Live] = []
        promote: list[Live] = []
        archive: list[Live] = []
        self._lists = {"summarize": summarize, "promote": promote, "archive": archive}
        for item in order:
            mem = item.mem
            if mem.type == "episodic" and rules.needs_summary(mem, self.now, self.cfg):
                summarize.append(item)
            elif mem.type == "procedural" and rules.promotion_target(mem, self.cfg) is not None:
                promote.append(item)
            if self._is_stale(mem):
                archive.append(item)

    def _candidates(self, rule: str, wanted: Callable[[Memory], bool]) -> list[Live]:
        """Unprotected memories in scope that `wanted` picks, in a stable order (folder, id),
        from the rule's shortlist. The rule's own test comes first: it is cheaper than the
        protection test."""
        live = self.live
        return [i for i in self._lists[rule]
                if i.mem.id in live and wanted(i.mem) and self.eligible(i) and not self.protected(i)]

    # ------------------------------------------------------------ 3.3 promote

    def promote_patterns(self) -> None:
        for item in self._candidates("promote", lambda mem: rules.promotion_target(mem, self.cfg) is not None
                                     and not self.decisions.blocks_promotion(mem.id)):
            self._promote(item, str(rules.promotion_target(item.mem, self.cfg)))

    def _promote(self, item: Live, target: str) -> None:
        scope_id = self.store.settings.team_for(item.folder.scope_id) if target == "team" else "global"
        folder = self.store.folder(target, scope_id)
        new_id = self._new_id(f"{item.mem.id}>{target}")
        copy = rules.promoted_copy(item.mem.data, new_id=new_id, scope=target, scope_id=scope_id,
                                   stamp=self.stamp)
        raw = encode(copy, item.mem.fmt)
        dest = self.store.rel(folder.path / f"{new_id}.{item.mem.fmt}")
        ops = [FileOp("create", dest, None, raw),
               self.rewrite(item, {**item.mem.data, "promoted_to": new_id})]
        self.add(Action("promote", {"type": "promote", "memory_id": item.mem.id, "result_id": new_id,
                                    "to_scope": target},
                        f"used {item.mem.data.get('access_count')} times: copied to {folder.rel}",
                        touches=[item.mem.id], ops=ops,
                        folders=[item.folder.rel, folder.rel]))

    def _new_id(self, seed: str) -> str:
        """A new id that a dry run and the real run at the same moment agree on."""
        for attempt in range(100):
            candidate = new_memory_id(self.now, f"{seed}#{attempt}")
            if candidate not in self.live and not self._id_known(candidate):
                self.taken_names.add(candidate)
                return candidate
        return new_memory_id(self.now)

    def _id_known(self, mem_id: str) -> bool:
        if mem_id in self.taken_names:
            return True
        return any(self.store.archive.glob(f"{mem_id}*"))

    # ------------------------------------------------------------ 3.4 archive stale

    def archive_stale(self) -> None:
        for item in self._candidates("archive", self._is_stale):
            ops = self.archive_ops(item, self._archived(item, "stale"))
            self.add(Action("archive", {"type": "archive", "memory_id": item.mem.id, "reason": "stale"},
                            _stale_why(item.mem),
                            touches=[item.mem.id], ops=ops, folders=[item.folder.rel, "archive"]))

    def _is_stale(self, mem: Memory) -> bool:
        """Rule 3.4, where a memory an undo brought back from `stale` counts as used then."""
        return rules.is_stale(mem, self.now, self.cfg) and not self.decisions.used_recently(
            mem.id, self.now, self.cfg.stale_after_days)

    # ------------------------------------------------------------ 3.5 limits

    def apply_limit(self) -> None:
        """Keep actions in plan order until they would touch more than the limit; the rest of
        the writing actions are deferred to a later run."""
        limit = self.cfg.max_per_run if self.opts.limit is None else self.opts.limit
        kept: list[Action] = []
        used = 0
        cut = False
        for action in self.plan.actions:
            if not action.touches:
                kept.append(action)
            elif cut or (limit and used + len(action.touches) > limit):
                cut = True
                self.plan.deferred.append(action)
            else:
                used += len(action.touches)
                kept.append(action)
        self.plan.actions = kept


class BlockTexts(Sequence[str]):
    """The normalised texts of a block's memories, each made (and its file read) only when
    asked for: with cached signatures most memories of a large block are never compared."""

    def __init__(self, block: list[Live]) -> None:
        self.block = block
        self.made: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.block)

    def __getitem__(self, n: int) -> str:  # type: ignore[override]
        if n not in self.made:
            self.made[n] = rules.content_text(self.block[n].mem.content)
        return self.made[n]

    def __iter__(self) -> Iterator[str]:
        return (self[n] for n in range(len(self.block)))

    def lengths(self) -> list[int]:
        """Text lengths, from the index entries where the text is not at hand."""
        out = [item.mem.cached_text_len() for item in self.block]
        return [len(self[n]) if value is None else value for n, value in enumerate(out)]


def _stale_why(mem: Memory) -> str:
    if int(mem.facts.get("access_count") or 0) == 0:
        return "never used"
    return f"last used {str(mem.facts.get('last_accessed') or mem.facts.get('updated_at'))[:10]}"


def _file_count(folder: Folder) -> int:
    from memcli.store.model import fmt_of

    try:
        return sum(1 for p in folder.path.iterdir() if fmt_of(p) is not None)
    except OSError:  # gone, or unreadable (a scan reports it)
        return 0


# ---------------------------------------------------------------- applying and reporting


def apply(store: Store, planning: Planning) -> Outcome:
    """Execute a plan (the caller holds the lock), then log it and update the store's state."""
    started = time.monotonic()
    plan = planning.plan
    opsfiles.preflight(store.root)  # an ops file of the wrong shape stops the run before any change
    applied = journal.execute(store, plan)
    outcome = _outcome(plan, applied.actions, applied.skips, started)
    outcome.notes += [_skip_note(skip) for skip in applied.skips if skip["reason"] in _SKIP_NOTES]
    try:
        hashes = _commit(store, planning, applied, outcome)
    except journal.RecordingFailed as exc:  # the run happened: say so, and how it gets finished
        outcome.notes += [f"warning: {exc}"] + _problem_notes(planning.problems)
        return outcome
    with contextlib.suppress(OSError, ValueError):  # caches: a failure costs the next run time, no more
        caches.save_sig_caches(store, planning.sigs, hashes)
        caches.save_pair_caches(store, planning.pairs)
        if planning.vectors is not None:
            planning.vectors.save(prune=plan.trigger in ("manual", "weekly"))
    outcome.notes += _problem_notes(planning.problems)
    from memcli.recall import index as recall_index  # the search index follows every write

    recall_index.after_run(store, sorted({f for a in applied.actions for f in a.folders} - {"archive"}))
    return outcome


def _commit(store: Store, planning: Planning, applied: journal.Applied,
            outcome: Outcome) -> dict[str, set[str] | None]:
    plan = planning.plan
    state = {"run_id": plan.run_id, "at": plan.at, "trigger": plan.trigger,
             "success": plan.trigger in TRIGGERS or plan.trigger == "review",
             "flagged_done": plan.flagged_done,
             **caches.listings_update(planning.listings, plan.covered)}
    if planning.state_extra:
        state["extra"] = {**state.get("extra", {}), **planning.state_extra}
    return journal.commit(store, plan.run_id, {
        "folders": sorted({f for a in applied.actions for f in a.folders}),
        "covered": plan.covered,
        "review": [a.review for a in applied.actions if a.review],
        "state": state,
        "quiet": not applied.actions and not applied.skips and not plan.flagged_done,  # SPEC 13: local
        "log_entry": {"run_id": plan.run_id, "timestamp": plan.at, "trigger": plan.trigger,
                      "actions": outcome.actions, "stats": outcome.stats},
        **caches.refresh_map(planning.refresh, plan, applied.actions),
    }, applied.files)


_SKIP_NOTES = {"unsafe_path": "{detail}", "unreadable": "its file cannot be read"}


def _skip_note(skip: dict[str, Any]) -> str:
    why = _SKIP_NOTES[skip["reason"]].format(detail=skip.get("detail", ""))
    return f"skipped {skip.get('action')} of {skip.get('memory_id')}: {why}"


def _problem_notes(problems: list[Problem]) -> list[str]:
    return [f"skipped {p}" if p.severity == "error" else f"warning: {p}" for p in problems]


def preview(planning: Planning) -> Outcome:
    """What a real run at the same moment would do; writes nothing."""
    outcome = _outcome(planning.plan, planning.plan.actions, [], time.monotonic())
    outcome.dry_run = True
    outcome.notes += _problem_notes(planning.problems)
    return outcome


def _outcome(plan: Plan, actions: list[Action], skips: list[dict[str, Any]], started: float) -> Outcome:
    logged = [a.log for a in actions] + skips
    merged = sum(len(a.log["source_ids"]) - 1 for a in actions if a.type == "merge")
    created = sum(1 for a in actions if a.type == "promote")
    archived = sum(1 for a in actions if a.type == "archive")
    stats = {"memories_merged": merged,
             "memories_summarized": sum(1 for a in actions if a.type == "summarize"),
             "memories_promoted": created, "memories_archived": archived,
             "flagged": sum(1 for a in actions if a.type == "flag"), "skipped": len(skips),
             "deferred": len(plan.deferred),
             "memory_count": plan.memory_count - merged - archived + created,
             "duration_ms": int((time.monotonic() - started) * 1000)}
    return Outcome(plan.run_id, plan.trigger, plan.at, logged, stats,
                   deferred=[a.log for a in plan.deferred], notes=list(plan.notes),
                   whys=[a.why for a in actions])


def write_plan_file(path: Path, plan: Plan) -> None:
    """Save a reviewed plan for `memcli apply` (outside the store, so a plain write)."""
    import orjson

    path.write_bytes(orjson.dumps(plan.to_json(), option=orjson.OPT_INDENT_2))
