"""Loading a run's scope into the planner: a full run folder by folder (index entries where
the files still match them), session_end only what changed and its duplicate candidates."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memcli.consolidate import rules, since
from memcli.consolidate.planbase import PlannerBase
from memcli.consolidate.plantypes import WHOLE_STORE, Live
from memcli.consolidate.since import Row
from memcli.store import entries, index, lastrun, planned
from memcli.store.model import Memory
from memcli.store.reading import FolderFiles
from memcli.store.store import Folder, FolderScan, Problem

if TYPE_CHECKING:
    from memcli.consolidate.trustahead import TrustAhead


class FolderLoading(PlannerBase):
    """Puts memories into the simulated store, and signs what a real run rewrites."""

    _files: FolderFiles | None = None  # the folder a full run is planning: its files' reads
    _read_files = False  # the folder loaded last: some of its memories read from their files
    _trust: TrustAhead | None = None  # a full pass's worker checking folders' entries ahead

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
        # entries=False: the files read become memories, not index entries as well
        read_from = planned.started()
        # (the worker's word, `trustahead`, holds for the listing it was given: `names`)
        vouched = self._trust.vouched(folder.rel) if self._trust is not None and names is not None else None
        scan = self.store.scan(folder, load=False, entries=False, compare=False, names=names,
                               vouched=vouched)
        if self.opts.warm_caches:  # a real run: its recording need not read these files again
            ticket = planned.save(folder, scan, read_from)
            if ticket is not None:
                self.planned[folder.rel] = ticket
        self.problems += [p for p in scan.problems if p.code != "index_gone"]  # the run rewrites it
        self._read_files = bool(scan.memories)
        self._close_files()
        files = self._files = FolderFiles(folder.path)  # (closed when the folder is let go)
        mems = dict(scan.memories)  # (the files read: their entries did not describe them)
        if mems:
            mems.update((m.id, m) for m in self.store.planned(folder, [e for e in scan.entries
                                                                        if e["id"] not in mems], files))
        else:  # (a cold or warm run's usual folder: every memory from its entry)
            mems = {m.id: m for m in self.store.planned(folder, scan.entries, files)}
        self._hold(folder, mems, twins, scan.run_hashes)

    def _load_ahead(self, folder: Folder, twins: dict[str, list[str]], names: list[str] | None) -> bool:
        """(In the helper.) Folder `folder` loaded for its pair search alone: when its index
        lists exactly the files `names` (the run's listing), with every field a run plans
        from, its entries are taken without the `lstat` of each file and the comparison of
        sizes and mtimes that `_load_folder` makes, and without what only the planner needs
        (problems, run hashes). True then; else it is loaded as the planner loads it, False.
        The planner uses what the helper found in a folder loaded this way only when its own
        load of the folder also took every memory from its entry (`_read_files` false): then
        the two hold the same facts for the same (id, content hash), as when both compare
        sizes and mtimes; a file changed since it was indexed makes the planner read it, and
        the helper's findings in that folder go unused (time only, never the plan)."""
        listed = _plain_entries(folder, names)
        if listed is None:
            self._load_folder(folder, twins, names)
            return False
        self._close_files()
        files = self._files = FolderFiles(folder.path)
        self._hold(folder, {m.id: m for m in self.store.planned(folder, listed, files)}, twins, {})
        return True

    def _hold(self, folder: Folder, mems: dict[str, Memory], twins: dict[str, list[str]],
              run_hashes: dict[str, str | None]) -> None:
        """The folder's memories `mems` into the simulated store (but an id also in another
        folder, `twins`: reported and left out), in id order."""
        if twins and not twins.keys().isdisjoint(mems):
            for mem_id in [i for i in mems if i in twins]:
                self.problems.append(Problem(self.store.rel(mems.pop(mem_id).path),
                                             f"duplicate id {mem_id} (in {', '.join(twins[mem_id])}); left "
                                             "out until one copy is renamed", "duplicate_id"))
        prefix = folder.rel + "/"
        # (once per memory of the store: locals, and no call for pending uses when there are none)
        with_uses, key, live, loaded = self._with_uses if self.uses else None, rules.newest_first_key, \
            self.live, self._all_loaded
        for mem_id in sorted(mems):  # signatures are looked up when a block needs them (_sigs)
            mem = mems[mem_id] if with_uses is None else with_uses(mems[mem_id])
            run_hash = run_hashes.get(mem_id)
            item = Live(mem, folder, prefix + mem.name, run_hash, run_hash != mem.content_hash, None,
                        key(mem))
            loaded.append(item)
            live[mem_id] = item
        self.seen.update(self._flagged_ids.intersection(mems))
        self._loaded += len(mems)

    def _close_files(self) -> None:
        """The folder planned last is let go: its files are no longer opened relative to it
        (a memory of it read later, to write the plan, is read by path)."""
        if self._files is not None:
            self._files.close()
            self._files = None

    def _put(self, item: Live) -> None:
        item.mem = self._with_uses(item.mem)
        self._all_loaded.append(item)
        self.live[item.mem.id] = item
        if item.mem.id in self._flagged_ids:
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
            snap = lastrun.load_lastrun(folder.cache())
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
        for scan in since.scans(self.store, self.store.memory_folders(), stamps):
            folder = scan.folder
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


def _plain_entries(folder: Folder, names: list[str] | None) -> list[dict[str, Any]] | None:
    """The folder's index entries when they list exactly the memory files `names`, in order,
    with every field a run plans from as `entries.all_trusted` checks them, sizes and mtimes
    aside (not compared with the files: see `FolderLoading._load_ahead`); else None."""
    if names is None:
        return None
    try:
        saved = index.load(folder.path)
    except (OSError, ValueError):  # (the planner's scan reports it)
        return None
    listed = saved.get("entries") if saved is not None else None
    if not isinstance(listed, list) or len(listed) != len(names):
        return None
    try:
        plain = ([e["file"] for e in listed] == names
                 and set(map(type, [e["size"] for e in listed])) <= {int}
                 and set(map(type, [e["mtime_ns"] for e in listed])) <= {int}
                 and entries.ids_ok([e.get("id") for e in listed])
                 and entries.facts_ok(listed)
                 and all([bool(e.get("content_hash")) and "text_len" in e for e in listed]))
    except (KeyError, TypeError, AttributeError):  # (an entry not an object: `index.load` refuses it)
        return None
    return listed if plain else None


def _file_count(folder: Folder) -> int:
    from memcli.store.formats import fmt_of

    try:
        return sum(1 for p in folder.path.iterdir() if fmt_of(p) is not None)
    except OSError:  # gone, or unreadable (a scan reports it)
        return 0
