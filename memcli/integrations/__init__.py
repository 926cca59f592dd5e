"""How memcli meets the agent's world: hooks (`hooks`), installers for Claude Code and
schedulers (`install`), and the schedule that decides what is due (`schedule`)."""
