"""`memcli sync` (SPEC 13): commit the store's changes, fetch, merge, push, check.

Under the store lock (no run starts meanwhile; a run a crash left half-done is finished or
rolled back first, so no commit ever holds half a run):
1. every consolidation run not yet committed becomes one commit whose message names its run
   id (its pre-images, the files it wrote, its log entry), then one commit for the rest
   (memories added, uses folded, indices, review queue, state);
2. fetch the remote; merge its branch through memcli's drivers (`-Xno-renames`: an archived
   memory is a new file, not a rename git should guess), resolve what git cannot merge
   (`conflicts`), rebuild any index that does not match its merged folder, commit;
3. push; then `doctor` must be clean.
It refuses, changing nothing, with no repository, a detached HEAD, a rebase or merge under
way; a push the remote rejects leaves every commit in place locally.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from memcli.errors import SyncRefusedError
from memcli.store import doctor, log
from memcli.store.model import sha256
from memcli.store.store import Store
from memcli.sync import conflicts, git, gitfiles

LOG_REL = "ops/consolidation-log.json"


@dataclass
class SyncResult:
    branch: str
    remote: str | None
    commits: list[str] = field(default_factory=list)  # subjects of the commits made
    merged: str | None = None  # what was merged in, if anything
    resolutions: list[dict[str, Any]] = field(default_factory=list)
    queued: int = 0  # review items added for versions kept beside
    pushed: bool = False
    doctor_ok: bool = True
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"branch": self.branch, "remote": self.remote, "commits": self.commits, "merged": self.merged,
                "resolutions": self.resolutions, "queued_for_review": self.queued, "pushed": self.pushed,
                "doctor_ok": self.doctor_ok, "problems": self.problems, "notes": self.notes}


def check_repository(root: Path, remote: str | None) -> tuple[str, str | None]:
    """(branch, remote to sync with), or SyncRefusedError saying why not and what to do."""
    if not git.available():
        raise SyncRefusedError("git is not installed (or not on PATH); nothing was changed")
    if git.toplevel(root) is None:
        raise SyncRefusedError(f"{root} is not in a git repository: clone the team's store, or "
                               "`git init` it and add a remote; nothing was changed")
    if git.rebase_in_progress(root):
        raise SyncRefusedError("a rebase is in progress in this repository: finish it "
                               "(`git rebase --continue`) or abort it (`git rebase --abort`), then sync; "
                               "nothing was changed")
    if git.merge_in_progress(root):
        raise SyncRefusedError("a merge is in progress in this repository: finish it (`git commit`) or "
                               "abort it (`git merge --abort`), then sync; nothing was changed")
    branch = git.branch(root)
    if branch is None:
        raise SyncRefusedError("HEAD is detached (no branch is checked out): `git switch <branch>`, "
                               "then sync; nothing was changed")
    known = git.remotes(root)
    if remote is not None and remote not in known:
        raise SyncRefusedError(f"no remote named {remote!r} (remotes: {', '.join(known) or 'none'}); "
                               "nothing was changed")
    if remote is None:
        remote = git.upstream_remote(root, branch) or ("origin" if "origin" in known else
                                                       known[0] if len(known) == 1 else None)
    return branch, remote


def sync(store: Store, remote: str | None = None, wait: float = 10.0) -> SyncResult:
    root = store.root
    branch, remote = check_repository(root, remote)
    result = SyncResult(branch, remote)
    with store.writing(wait) as recovered:
        result.notes += recovered
        prepared = gitfiles.prepare(root)
        if prepared.written:
            result.notes.append(f"wrote {', '.join(prepared.written)} (SPEC 13)")
        result.notes += doctor.rebuild_indices(store)  # a memory dropped in by hand gets its entry
        result.commits += commit_local(root)
        if remote is not None:
            _fetch(root, remote, result)
            target = f"{remote}/{branch}"
            if git.ref_exists(root, target):
                _merge(store, target, result)
            _push(root, remote, branch, result)
        else:
            result.notes.append("no remote: changes committed locally only (`git remote add origin URL`)")
        report = doctor.diagnose(store)
        result.doctor_ok = report.ok
        result.problems = [f"{p.code} {p.path}: {p.message}" for p in report.problems
                           if p.severity == "error"]
    return result


# ---------------------------------------------------------------- committing


def commit_local(root: Path) -> list[str]:
    """One commit per run not yet committed (in log order), then one for everything else."""
    made = []
    if not git.has_commits(root):
        made += _commit_all(root, "memcli: the store")
    pending = new_runs(root)
    for n, entry in enumerate(pending):
        subject = _run_subject(entry)
        _stage_run(root, entry, [str(e.get("run_id")) for e in pending[n + 1:]])
        if _commit_staged(root, subject):
            made.append(subject)
    made += _commit_all(root, "memcli sync: memories added, uses, indices, review queue, state")
    return made


def new_runs(root: Path) -> list[dict[str, Any]]:
    """Entries of the shared log that the last commit does not have, in log order."""
    known = _committed_runs(root)
    return [e for e in log.shared_entries(root) if e.get("run_id") not in known]


def _committed_runs(root: Path) -> set[Any]:
    """Run ids the last commit logs: its live log and its month files (`ops/log/`)."""
    names = git.run(root, "ls-tree", "--name-only", "HEAD", "ops/log/", check=False).stdout.decode().split()
    found: set[Any] = set()
    for rel in [LOG_REL, *names]:
        found.update(e.get("run_id") for e in _log_entries(git.show_bytes(root, f"HEAD:./{rel}")))
    return found


def _run_subject(entry: dict[str, Any]) -> str:
    given = entry.get("stats")
    stats: dict[str, Any] = given if isinstance(given, dict) else {}
    counts = [f"{stats[k]} {k.removeprefix('memories_')}" for k in
              ("memories_merged", "memories_summarized", "memories_promoted", "memories_archived")
              if isinstance(stats.get(k), int) and stats[k]]
    subject = f"memcli run {entry.get('run_id')} ({entry.get('trigger')})"
    return subject + (f": {', '.join(counts)}" if counts else "")


def _stage_run(root: Path, entry: dict[str, Any], later: list[str]) -> None:
    """Stage exactly what the run wrote: its folder under archive/runs/, each file it changed
    as the run left it (a later run's pre-image of it when a later run changed it again), and
    the log up to its entry."""
    run_id = str(entry.get("run_id"))
    run_dir = root / "archive" / "runs" / run_id
    if run_dir.is_dir():
        git.run(root, "add", "-A", "--", f"archive/runs/{run_id}")
    manifest = _read(run_dir / "manifest.json")
    files = orjson.loads(manifest).get("files", []) if manifest else []
    for item in files if isinstance(files, list) else []:
        rel, after = item.get("path"), item.get("sha256_after")
        if not isinstance(rel, str) or rel.startswith(("/", "..")) or ".." in rel.split("/"):
            continue
        if after is None:
            git.run(root, "rm", "--cached", "-q", "--ignore-unmatch", "--", rel)
            continue
        data = _version(root, rel, after, later)
        if data is not None:
            blob = git.hash_object(root, data)
            git.run(root, "update-index", "--add", "--cacheinfo", f"100644,{blob},{rel}")
    _stage_log_upto(root, run_id)


def _version(root: Path, rel: str, digest: str, later: list[str]) -> bytes | None:
    for path in [root / rel, *(root / "archive" / "runs" / r / rel for r in later)]:
        data = _read(path)
        if data is not None and sha256(data) == digest:
            return data
    return None


def _stage_log_upto(root: Path, run_id: str) -> None:
    raw = _read(root / LOG_REL)
    if raw is None:
        return
    data = orjson.loads(raw)
    entries = data.get("entries", [])
    ids = [e.get("run_id") if isinstance(e, dict) else None for e in entries]
    if (root / "ops" / "log").is_dir():
        git.run(root, "add", "-A", "--", "ops/log")  # month files: entries moved out whole
    if run_id not in ids:
        git.run(root, "add", "-A", "--", LOG_REL)  # rotated out since: the live file as it is
        return
    committed = _committed_runs(root)
    cut = ids.index(run_id)
    data["entries"] = [e for i, e in enumerate(entries)
                       if i <= cut or (isinstance(e, dict) and e.get("run_id") in committed)]
    body = orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"
    git.run(root, "update-index", "--add", "--cacheinfo", f"100644,{git.hash_object(root, body)},{LOG_REL}")


def _commit_all(root: Path, subject: str) -> list[str]:
    git.run(root, "add", "-A", "--", ".")
    return [subject] if _commit_staged(root, subject) else []


def _commit_staged(root: Path, subject: str) -> bool:
    if git.has_commits(root) and git.run(root, "diff", "--cached", "--quiet", check=False).returncode == 0:
        return False
    try:
        git.run(root, "commit", "-q", "--no-verify", "-m", subject)
    except git.GitError as exc:
        raise SyncRefusedError(f"git could not commit ({exc.output}); set `git config user.name` and "
                               "`user.email` if it asks who you are. Nothing was lost: the changes are "
                               "on disk") from exc
    return True


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _log_entries(raw: bytes | None) -> list[dict[str, Any]]:
    if not raw:
        return []
    try:
        data = orjson.loads(raw)
    except ValueError:
        return []
    entries = data.get("entries", []) if isinstance(data, dict) else []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


# ---------------------------------------------------------------- fetch, merge, push


def _fetch(root: Path, remote: str, result: SyncResult) -> None:
    try:
        git.run(root, "fetch", "-q", remote)
    except git.GitError as exc:
        raise SyncRefusedError(f"could not fetch from {remote} ({exc.output}); your changes are committed "
                               f"locally ({len(result.commits)} commit(s)); sync again when it is "
                               "reachable") from exc


def _merge(store: Store, target: str, result: SyncResult) -> None:
    root = store.root
    if git.is_ancestor(root, target, "HEAD"):
        return  # nothing new there
    if git.is_ancestor(root, "HEAD", target):
        git.run(root, "merge", "-q", "--ff-only", target)
    else:
        done = git.run(root, "merge", "-q", "--no-ff", "--no-commit", "-Xno-renames", target, check=False)
        unmerged = git.unmerged(root)
        if done.returncode != 0 and not unmerged and not git.merge_in_progress(root):
            raise SyncRefusedError(f"git could not merge {target}: {_text(done)}; your changes are committed "
                                   "locally, nothing was lost")
        if unmerged:
            resolved = conflicts.resolve(store, unmerged)
            if resolved.unresolved:
                git.run(root, "merge", "--abort", check=False)
                raise SyncRefusedError(
                    f"{target} changes files memcli does not own in ways git cannot merge "
                    f"({', '.join(resolved.unresolved)}): merge by hand (`git merge {target}`), then sync. "
                    "The merge was given up; your commits are as they were")
            result.queued = conflicts.queue(store, resolved)
            result.resolutions = [r.to_json() for r in resolved.resolutions]
        doctor.rebuild_indices(store)  # an index that does not match its merged folder
        git.run(root, "add", "-A", "--", ".")
        subject = f"memcli sync: merge {target}" + (f" ({len(result.resolutions)} conflict(s) resolved, "
                                                     f"nothing lost)" if result.resolutions else "")
        git.run(root, "commit", "-q", "--no-verify", "-m", subject)
        result.commits.append(subject)
    result.merged = target
    if doctor.rebuild_indices(store):
        result.commits += _commit_all(root, "memcli sync: indices of the merged folders")


def _push(root: Path, remote: str, branch: str, result: SyncResult) -> None:
    done = git.run(root, "push", "-q", remote, f"HEAD:refs/heads/{branch}", check=False)
    if done.returncode != 0:
        raise SyncRefusedError(f"{remote} refused the push ({_text(done)}). Nothing was lost: your "
                               f"commits stay on {branch} here; sync again (it merges what is new there "
                               "first)")
    result.pushed = True
    if git.upstream_remote(root, branch) is None:
        git.run(root, "branch", "-q", f"--set-upstream-to={remote}/{branch}", check=False)


def _text(done: Any) -> str:
    text = (done.stderr or done.stdout or b"").decode(errors="replace").strip()
    return re.sub(r"\s+", " ", text)[:300] or f"exit {done.returncode}"


