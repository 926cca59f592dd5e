"""install cron (the crontab line); install claude is tests/integrations/test_claude_install.py."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from croniter import croniter
from typer.testing import CliRunner

from memcli.cli import app
from memcli.integrations import install

runner = CliRunner()

def invoke(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Any:
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    return result


# ---------------------------------------------------------------- install cron


@pytest.fixture
def fake_crontab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `crontab` that keeps the table in a file and says "no crontab" until it has one."""
    table = tmp_path / "crontab.txt"
    script = tmp_path / "fake-crontab"
    script.write_text(f"""#!/bin/sh
if [ "$1" = "-l" ]; then
  if [ -f '{table}' ]; then cat '{table}'; exit 0; fi
  echo "no crontab for tester" >&2; exit 1
fi
if [ "$1" = "-" ]; then cat > '{table}'; exit 0; fi
exit 2
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("MEMCLI_CRONTAB", str(script))
    return table


def test_cron_line_is_raw_and_croniter_accepts_it(store: Path) -> None:
    result = invoke("--store", str(store), "install", "cron", env={"COLUMNS": "30"})
    line = result.stdout
    assert line.endswith(" # memcli-weekly\n") and line.count("\n") == 1
    fields = line.split()[:5]
    assert fields == ["0", "0", "*", "*", "0"] and croniter.is_valid(" ".join(fields))
    root = str(store.resolve())
    assert f"cd '{root}' && '" in line
    assert f"--store '{root}' consolidate --trigger weekly --quiet >> '{root}/ops/cron.log' 2>&1" in line
    assert "\x1b" not in line


def test_cron_line_follows_the_schedule_setting(store: Path) -> None:
    (store / "memcli.toml").write_text('[schedule]\nweekly = "30 3 * * 1"\n')
    line = invoke("--store", str(store), "install", "cron").stdout
    assert line.startswith("30 3 * * 1 cd ")


def test_cron_escapes_percent_signs(tmp_path: Path) -> None:
    root = tmp_path / "100%store"
    (root / "ops").mkdir(parents=True)
    line = install.cron_line(root, "0 0 * * 0", "'/bin/memcli'")
    assert "100\\%store" in line and "100%store" not in line
    assert install.is_our_cron_line(line, root)


def test_cron_apply_keeps_other_lines_and_is_idempotent(store: Path, tmp_path: Path,
                                                        fake_crontab: Path) -> None:
    other_store = "15 4 * * * cd '/elsewhere' && memcli --store '/elsewhere' tick # memcli-weekly"
    original = ["# my jobs", "MAILTO=me@example.com", "*/5 * * * * /usr/bin/backup --fast",
                other_store, "", "@reboot /usr/bin/start-things"]
    fake_crontab.write_text("\n".join(original) + "\n")
    first = invoke("--store", str(store), "install", "cron", "--apply")
    assert "added" in first.stderr
    table = fake_crontab.read_text().splitlines()
    assert table[:-1] == original and table[-1] == first.stdout.rstrip("\n")
    second = invoke("--store", str(store), "install", "cron", "--apply")
    assert "unchanged" in second.stderr and fake_crontab.read_text().splitlines() == table
    (store / "memcli.toml").write_text('[schedule]\nweekly = "0 6 * * 6"\n')
    invoke("--store", str(store), "install", "cron", "--apply")
    replaced = fake_crontab.read_text().splitlines()
    assert replaced[:-1] == original and replaced[-1].startswith("0 6 * * 6 ")
    invoke("--store", str(store), "install", "cron", "--uninstall")
    assert fake_crontab.read_text().splitlines() == original


def test_cron_apply_with_no_crontab_yet(store: Path, fake_crontab: Path) -> None:
    result = invoke("--store", str(store), "--json", "install", "cron", "--apply")
    data = orjson.loads(result.stdout)
    assert data["action"] == "added"
    assert fake_crontab.read_text() == data["line"] + "\n"


def test_a_failing_crontab_is_an_error(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "broken-crontab"
    broken.write_text("#!/bin/sh\necho 'cron daemon says no' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("MEMCLI_CRONTAB", str(broken))
    result = invoke("--store", str(store), "install", "cron", "--apply", code=1)
    assert "cron daemon says no" in result.stderr
    monkeypatch.setenv("MEMCLI_CRONTAB", str(tmp_path / "missing"))
    assert "not found" in invoke("--store", str(store), "install", "cron", "--apply", code=1).stderr


def test_install_cron_as_a_real_process(store: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "memcli", "install", "cron", "--store", str(store)],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "20"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("# memcli-weekly\n") and proc.stdout.count("\n") == 1
    assert croniter.is_valid(" ".join(proc.stdout.split()[:5]))
