"""The parts of `memcli --help`, written by `python -m memcli.cli.tophelp` from the
typer application: do not edit (tests/cli/test_tophelp.py says when it is stale)."""

USAGE = '[OPTIONS] COMMAND [ARGS]...'
HELP = 'Keep a plain-file memory store for AI agents healthy: merge duplicates, summarise verbose logs, promote proven procedures, archive stale entries, log and undo every run.'
OPTIONS = (
    ('--store PATH', 'The store folder (else $MEMCLI_STORE, else . or a parent).'),
    ('--json', 'Machine output: only JSON on stdout.'),
    ('--quiet', 'Only what a script needs (ids); no tables or hints.'),
    ('--wait SECONDS', 'Seconds to wait for the store lock.  [default: 10.0]'),
    ('--version', "Print memcli's version and its store format version."),
    ('--install-completion', 'Install completion for the current shell.'),
    ('--show-completion', 'Show completion for the current shell, to copy it or customize the installation.'),
    ('--help', 'Show this message and exit.'),
)
COMMANDS = (
    ('consolidate', 'Run one consolidation pass: merge duplicates, summarise verbose'),
    ('apply', 'Apply exactly a plan saved by `consolidate --plan-out`, after checking'),
    ('log', 'Show recent runs from ops/consolidation-log.json, newest first'),
    ('stats', 'Counts by scope and type, runs, actions by type, and the memory'),
    ('undo', 'Reverse a whole run from its pre-images: every memory it rewrote,'),
    ('restore', 'Bring one archived memory back to the folder it left. It counts'),
    ('doctor', 'Check every invariant of the store and report each problem with'),
    ('init', 'Create a store: memcli.toml, archive/, ops/ and global/, and the'),
    ('add', 'Write a memory and print its id. A near-identical memory already'),
    ('show', 'Show one memory, live or archived, as Markdown with its fields'),
    ('edit', "Edit a memory's file in $VISUAL or $EDITOR (else vi). On save the"),
    ('list', 'List memories: two lines each (id, folder, kind, uses; the summary).'),
    ('access', 'Record a use of a memory: access_count + 1, last_accessed = now.'),
    ('reindex', "Rebuild every folder's _index.json (and the archive's) from the"),
    ('tick', 'Run whatever is due: the weekly pass if its last scheduled time'),
    ('status', 'When each trigger last ran, when the weekly pass and the daily'),
    ('recall', 'Find the memories an agent would want for QUERY, best first (its'),
    ('mcp', 'Serve the Model Context Protocol on stdio, with the tools recall,'),
    ('forget', 'Archive a memory on purpose (archive reason `forgotten`, or --reason).'),
    ('capture', "Turn one agent session's transcript into an episodic memory in"),
    ('sync', "Share the store through its git repository: commit the store's"),
    ('review', 'The review queue: pairs a person should look at.'),
    ('hook', 'Commands that agent hooks call.'),
    ('install', 'Connect memcli to Claude Code, cron, systemd and launchd.'),
    ('llm', 'The optional LLM: approve its command on this machine.'),
)
