"""What a shell command and its output say, for capture (SPEC 12): the command's key (so
that a later run of "the same" command can be told apart from another), its kind (a test,
a build, a commit, a look around), and the line of its output that names the error.

Pure functions over strings; no I/O. Heuristics, deliberately simple and deterministic.
"""

from __future__ import annotations

import re

# Leading words that only change how a command runs, not what it is.
_WRAPPERS = frozenset({"sudo", "time", "env", "nice", "nohup", "command", "exec", "timeout", "stdbuf"})
# Runners whose next word is the real program: `uv run pytest` is pytest.
_RUNNERS = {"uv": "run", "poetry": "run", "pipenv": "run", "hatch": "run", "pdm": "run",
            "bundle": "exec", "conda": "run"}
_DIRECT_RUNNERS = frozenset({"npx", "pnpx", "bunx", "dotenv"})
# Programs whose first word after the program says what they do (`git commit`, `npm test`).
_SUBCOMMANDS = frozenset({
    "git", "gh", "cargo", "go", "npm", "yarn", "pnpm", "bun", "docker", "podman", "kubectl",
    "make", "terraform", "helm", "dotnet", "mvn", "gradle", "pip", "pip3", "uv", "poetry",
    "brew", "apt", "apt-get", "dnf", "yum", "systemctl", "alembic", "rails", "rake", "mix",
    "composer", "flask", "django-admin", "heroku", "fly", "aws", "gcloud", "az", "deno", "just",
})
_INTERPRETERS = frozenset({"python", "python3", "node", "bash", "sh", "zsh", "ruby", "perl", "php"})
_READONLY = frozenset({
    "ls", "cat", "head", "tail", "less", "more", "grep", "rg", "ag", "ack", "find", "fd", "tree",
    "pwd", "echo", "printf", "wc", "which", "whereis", "type", "file", "stat", "du", "df", "sort",
    "uniq", "diff", "cut", "jq", "yq", "date", "whoami", "hostname", "uname", "true", "false",
    "test", "[", "realpath", "dirname", "basename", "ps", "id", "man", "history", "sed", "awk",
    "nl", "od", "xxd", "hexdump", "column", "tr", "readlink", "lsof", "env", "printenv", "sleep",
})
_SUB_READONLY = {
    "docker": {"ps", "images", "logs", "inspect", "stats", "top", "version", "info", "port"},
    "podman": {"ps", "images", "logs", "inspect"},
    "kubectl": {"get", "describe", "logs", "top", "explain", "version", "events"},
    "systemctl": {"status", "is-active", "list-units", "show"},
    "npm": {"ls", "view", "outdated", "list"}, "pip": {"list", "show", "freeze"},
    "pip3": {"list", "show", "freeze"}, "brew": {"list", "info"}, "cargo": {"tree", "metadata"},
    "go": {"env", "version", "list"},
}
_GIT_READONLY = frozenset({"status", "diff", "log", "show", "branch", "remote", "rev-parse", "blame",
                           "ls-files", "grep", "describe", "fetch", "shortlog", "reflog", "config"})
_TEST_PROGRAMS = frozenset({"pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "ava",
                            "rspec", "phpunit", "ctest", "bats", "unittest", "playwright", "cypress"})
_CHECK_PROGRAMS = frozenset({"ruff", "mypy", "pyright", "eslint", "flake8", "pylint", "black",
                             "prettier", "tsc", "golangci-lint", "shellcheck", "hadolint", "clippy",
                             "biome", "stylelint", "isort", "bandit", "semgrep"})
_BUILD_PROGRAMS = frozenset({"make", "webpack", "vite", "rollup", "esbuild", "cmake", "ninja",
                             "gcc", "g++", "clang", "javac", "bazel"})
_INSTALL_SUBS = frozenset({"install", "i", "ci", "add", "sync", "get", "update", "upgrade"})
_VCS_SUBS = frozenset({"commit", "push", "merge", "rebase", "checkout", "switch", "stash", "tag",
                       "cherry-pick", "reset", "revert", "pull", "am", "apply", "restore", "rm", "mv"})
_SPLIT = re.compile(r"\s*(?:&&|\|\||;)\s*")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def first_line(command: str) -> str:
    """The command as one line: its first line, and a mark when more followed (heredocs)."""
    lines = [ln for ln in command.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    head = " ".join(lines[0].split())
    return head + (" …" if len(lines) > 1 else "")


def _words(segment: str) -> list[str]:
    return segment.replace("'", " ").replace('"', " ").split()


def _segments(command: str) -> list[list[str]]:
    """The words of each part of a command line that does work: `cd x && pytest -q | tail;
    make` is `pytest -q` then `make`."""
    line = command.strip().splitlines()[0] if command.strip() else ""
    found = []
    for segment in _SPLIT.split(line):
        words = _words(segment.split("|")[0])
        while words and (_ASSIGN.match(words[0]) or words[0] in _WRAPPERS):
            words = words[1:]
        if words and words[0] not in ("cd", "export", "source", ".", "set", "pushd", "popd", "unset"):
            found.append(words)
    return found


def _main_segment(command: str) -> list[str]:
    segments = _segments(command)
    return segments[0] if segments else []


def _program(word: str) -> str:
    name = word.rsplit("/", 1)[-1]
    return re.sub(r"(?<=python)[\d.]+$", "", name)  # python3.11 -> python


def command_key(command: str) -> str:
    """What a command is, for matching a failure with a later success: the program, plus its
    subcommand or script (`pytest`, `git commit`, `npm run build`, `python manage.py`)."""
    return _key_of(_main_segment(command))


def command_keys(command: str) -> list[str]:
    """The key of every part of a command line (`terraform validate && terraform plan`): a
    passing line passed each of them."""
    return [key for key in (_key_of(words) for words in _segments(command)) if key]


def _key_of(words: list[str]) -> str:
    while words:
        program = _program(words[0])
        rest = words[1:]
        if program in _RUNNERS and rest[:1] == [_RUNNERS[program]]:
            words = rest[1:]
            continue
        if program in _DIRECT_RUNNERS:
            words = [w for w in rest if not w.startswith("-")][:1] + rest[1:]
            continue
        if program in _INTERPRETERS and rest[:1] == ["-m"] and len(rest) > 1:
            words = rest[1:]
            continue
        break
    if not words:
        return ""
    program = _program(words[0])
    args = [w for w in words[1:] if not w.startswith("-")]
    if program in ("npm", "yarn", "pnpm", "bun") and args[:1] == ["run"] and len(args) > 1:
        return f"{program} run {args[1]}"
    if program in _SUBCOMMANDS and args:
        return f"{program} {args[0]}"
    if program in _INTERPRETERS and args:
        return f"{program} {args[0].rsplit('/', 1)[-1]}"
    return program


def command_kind(key: str) -> str:
    """test, check, build, install, vcs, readonly or other."""
    program, _, sub = key.partition(" ")
    if program in _TEST_PROGRAMS or sub == "test" or sub.startswith("run test") or \
            (sub.startswith("run ") and "test" in sub):
        return "test"
    if program in _CHECK_PROGRAMS or sub in ("clippy", "vet", "lint", "fmt") or \
            (sub.startswith("run ") and any(w in sub for w in ("lint", "typecheck", "check"))):
        return "check"
    if program in _BUILD_PROGRAMS or sub == "build" or (sub.startswith("run ") and "build" in sub):
        return "build"
    if program in ("git", "gh") and sub and (sub in _VCS_SUBS or program == "gh"):
        return "vcs"
    if program == "git" and (not sub or sub in _GIT_READONLY):
        return "readonly"
    if sub in _SUB_READONLY.get(program, ()):
        return "readonly"
    if sub in _INSTALL_SUBS and program in _SUBCOMMANDS:
        return "install"
    if program in _READONLY:
        return "readonly"
    return "other"


# ---------------------------------------------------------------- output

# Tried in order; the first kind of line found wins. (pattern, take the last match?)
_ERROR_LINES: tuple[tuple[re.Pattern[str], bool], ...] = (
    (re.compile(r"^(?:FAILED|ERROR) \S+ - .+"), False),  # pytest's short test summary
    (re.compile(r"^● \S.*"), False),  # jest's failing test title
    (re.compile(r"^\S+_test\.go:\d+: .+"), False),  # go test's failure message
    (re.compile(r"^WARNING: DATA RACE"), False),  # go's race detector
    (re.compile(r"panicked at .+"), False),  # rust (the message may follow on the next line)
    (re.compile(r"^\d+:\d+\s+error\s+.+"), False),  # eslint's stylish output
    (re.compile(r"^E {2,}\S.*(?:Error|Exception|assert)", re.I), False),  # pytest's E lines
    (re.compile(r"^\S*(?:[A-Z]\w*(?:Error|Exception|Failure|Interrupt)|Error)\b(?::|\(| \[).*"), True),
    (re.compile(r"\berror(?:\[[A-Z]*\d+\])?(?: TS\d+)?:", re.I), False),  # rustc, tsc, gcc, go
    (re.compile(r"^(?:fatal|panic|FATAL|ERROR|error|Error)\b|^(?:npm )?ERR!"), False),
    (re.compile(r"\b(?:FAIL|FAILED|Failed)\b"), False),
    (re.compile(r"(?i)\b(?:no such file|not found|permission denied|cannot|can't|could not|"
                r"unable to|refused|timed out|undefined|unknown|invalid)\b"), False),
)
_EXIT_LINE = re.compile(r"^(?:Error: )?Exit code:? (-?\d+)\s*$")
_WINDOW = 16_384  # how much of an output's head and tail is looked at


def output_window(text: str) -> str:
    """The head and tail of a (possibly huge) output: errors sit at one end or the other."""
    if len(text) <= 2 * _WINDOW:
        return text
    return text[:_WINDOW] + "\n" + text[-_WINDOW:]


def error_line(output: str) -> str:
    """The line of a failed command's output that best says what went wrong."""
    lines = [ln.strip() for ln in output_window(output).splitlines()]
    lines = [ln for ln in lines if ln and not _EXIT_LINE.match(ln)]
    for pattern, last in _ERROR_LINES:
        found = [n for n, ln in enumerate(lines) if pattern.search(ln)]
        if found:
            at = found[-1] if last else found[0]
            line = lines[at]
            if line.endswith(":") and at + 1 < len(lines):  # `panicked at src/x.rs:8:2:` + message
                line = f"{line} {lines[at + 1]}"
            return line
    return lines[-1] if lines else ""


def exit_code(output: str) -> int | None:
    """The `Exit code N` Claude Code puts first in a failed command's result."""
    for line in output.lstrip().splitlines()[:2]:
        match = _EXIT_LINE.match(line.strip())
        if match:
            return int(match.group(1))
    return None


_COMMIT_LINE = re.compile(
    r"^\[(?P<branch>[^\]\s]+)(?: \(root-commit\))? (?P<sha>[0-9a-f]{7,40})\] (?P<msg>.+)$", re.MULTILINE)
_HEREDOC = re.compile(r"<<-?\s*'?\"?(?P<tag>[A-Za-z_]+)'?\"?\s*\n(?P<body>.*?)\n\s*(?P=tag)\b", re.DOTALL)
_DASH_M = re.compile(r"(?:^|\s)-(?:m|-message)[= ]\s*(?:\"(?P<dq>[^\"]+)\"|'(?P<sq>[^']+)'|(?P<bare>\S+))")
_PR_URL = re.compile(r"https://\S+/pull/\d+|https://\S+/merge_requests/\d+")


def commit_message(command: str, output: str) -> str | None:
    """The first line of the message of a commit a command made, from git's own output
    (`[main 1a2b3c4] Fix the parser`), else from the command line."""
    match = _COMMIT_LINE.search(output_window(output))
    if match:
        return f"{match.group('msg').strip()} ({match.group('sha')[:7]})"
    heredoc = _HEREDOC.search(command)
    if heredoc:
        body = [ln.strip() for ln in heredoc.group("body").splitlines() if ln.strip()]
        return body[0] if body else None
    dash_m = _DASH_M.search(command)
    if dash_m:
        text = dash_m.group("dq") or dash_m.group("sq") or dash_m.group("bare") or ""
        return text.strip().splitlines()[0] if text.strip() and not text.startswith("$(") else None
    return None


_GIT_STEP = re.compile(
    r"(?:^|[;&|(]\s*|\s)(?:git(?:\s+-C\s+\S+)?\s+(?P<git>commit|push)\b|gh\s+pr\s+(?P<gh>create)\b)")


def vcs_steps(command: str) -> set[str]:
    """What a command line does to version control: commit, push, pr (in any of its parts)."""
    line = command.strip().splitlines()[0] if command.strip() else ""
    found = set()
    for match in _GIT_STEP.finditer(line):
        found.add(match.group("git") or "pr")
    return found


def pull_request_url(output: str) -> str | None:
    match = _PR_URL.search(output_window(output))
    return match.group(0).rstrip(".,)") if match else None
