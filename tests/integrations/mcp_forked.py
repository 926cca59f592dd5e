"""`memcli mcp` for the SDK's stdio client, forked from a process that imported memcli and the
MCP SDK once (as tests/forked.py does for other commands).

A real `memcli mcp` start costs about 2 s of CPU, most of it importing the SDK; the tool tests
need a server process on the other end of the SDK's pipes, not a fresh interpreter (the start-up
itself, discovery answered before the SDK has loaded, is tested with a real one). The SDK
starts `launcher`: a bare interpreter that hands its standard streams, working folder,
environment and arguments to the zygote over a Unix socket and exits with the server's exit
code. The zygote forks one child per server; the child takes the streams and runs
`memcli/__main__.py` as `python -m memcli` would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ZYGOTE = r"""
import json, os, runpy, signal, socket, sys
import memcli, memcli.cli
memcli.cli.load_app()
import anyio, mcp.server.stdio, mcp.server.mcpserver, mcp.server.mcpserver.exceptions, mcp_types.version
from memcli.integrations import mcp_server, mcp_replies
from memcli.recall import search, uses
from memcli.store import memories, store
MAIN = os.path.join(os.path.dirname(memcli.__file__), "__main__.py")
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the system
listener = socket.socket(socket.AF_UNIX)
listener.bind(sys.argv[1])
listener.listen(8)
print("ready", flush=True)
while True:
    conn, _ = listener.accept()
    if os.fork():
        conn.close()
        continue
    listener.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _one, fds, _flags, _addr = socket.recv_fds(conn, 1, 3)  # the byte that carries the streams
    data = b""
    while not data.endswith(b"\n"):
        more = conn.recv(65536)
        if not more:
            os._exit(1)
        data += more
    req = json.loads(data)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.setsid()
    sys.argv = [MAIN, *req["argv"]]
    code = 1
    try:
        runpy.run_path(MAIN, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
        except Exception:
            pass
        try:
            conn.sendall(str(code).encode())
        finally:
            os._exit(code)
"""

LAUNCHER = r"""
import json, os, socket, sys
conn = socket.socket(socket.AF_UNIX)
conn.connect(sys.argv[1])
req = json.dumps({"argv": sys.argv[2:], "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
socket.send_fds(conn, [b"."], [0, 1, 2])
conn.sendall(req + b"\n")
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):  # the server holds the streams now: the client sees its EOF, not ours
    os.dup2(null, fd)
code = conn.recv(16)
sys.exit(int(code) if code else 1)
"""


@contextmanager
def zygote(folder: Path) -> Iterator[list[str]]:
    """A running zygote for the `with` block; yields the command that starts one server:
    `[*command, *memcli_arguments]` runs as `python -m memcli *memcli_arguments`."""
    address = str(folder / "mcp-zygote.sock")
    proc = subprocess.Popen([sys.executable, "-c", ZYGOTE, address], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield [sys.executable, "-I", "-S", "-c", LAUNCHER, address]
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if os.path.exists(address):
            os.unlink(address)
