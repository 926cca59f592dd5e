"""Where memories come from: a session transcript becomes one episodic memory (SPEC 12).

Readers per harness (`transcript` for the shared shape and the minimal JSONL, `claude_code`,
`codex`) give records; `session` folds them into what happened, `commands` and `learnings`
read the commands run and the errors met with what fixed them, `render` writes the four
sections, and `capture` puts the memory into the store (masked, journaled, idempotent per
session). The hooks that call it live in `memcli.integrations`.
"""
