"""memcli: keep a plain-file memory store for AI agents healthy."""

__version__ = "0.1.0"
