# ruff: noqa: E501  (transcript text: realistic lines are long)
"""The capture benchmark's sessions: realistic agent sessions as transcripts, each with the
facts its memory must keep (the request, the key commands, the files changed, the outcome,
each error with its fix) and the secrets that must never reach the store.

    python bench/capture_samples.py            # (re)writes bench/capture/*.jsonl and facts.json

The sessions cover what agents really do: fix a failing test, add a feature across files,
chase an incident, answer questions with no tool use, a long session with compactions, a
session that delegates to a sub-agent, set up a project (dependency errors), fix a broken
build, clean up a machine (a refused command, a queued prompt, an interruption), debug a
migration with secrets in the output, a slash command in plan mode, and a Codex CLI session.

A fact is a list of strings that must all appear (case and spacing aside) in the memory's
summary and details, or in one section of the details when `section` is given: an error's
fact and its fix must both be under "Key learnings".
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.capture_transcript import Transcript  # noqa: E402

OUT = ROOT / "bench" / "capture"
KL = "Key learnings"
Fact = dict[str, Any]


def fact(kind: str, *strings: str, section: str | None = None) -> Fact:
    out: Fact = {"kind": kind, "all": list(strings)}
    if section:
        out["section"] = section
    return out


# ---------------------------------------------------------------- 1. fix a failing test

PYTEST_FAIL = """F..                                                                      [100%]
=================================== FAILURES ===================================
___________________________ test_total_with_discount ___________________________

    def test_total_with_discount():
        inv = Invoice(lines=[Line(Decimal("100.00"), 2)], discount=Decimal("0.10"))
>       assert inv.total() == Decimal("180.00")
E       AssertionError: assert Decimal('200.00') == Decimal('180.00')
E        +  where Decimal('200.00') = <bound method Invoice.total of Invoice(lines=[...])>()

tests/test_invoices.py:31: AssertionError
=========================== short test summary info ============================
FAILED tests/test_invoices.py::test_total_with_discount - AssertionError: assert Decimal('200.00') == Decimal('180.00')
1 failed, 2 passed in 0.21s"""

INVOICE = '''from decimal import Decimal


class Invoice:
    def __init__(self, lines, discount=Decimal("0")):
        self.lines = lines
        self.discount = discount

    def subtotal(self):
        return sum(line.amount * line.qty for line in self.lines)

    def total(self):
        subtotal = self.subtotal()
        return subtotal.quantize(Decimal("0.01"))
        total = apply_discount(subtotal, self.discount)
        return total.quantize(Decimal("0.01"))
'''


def fix_failing_test() -> tuple[Transcript, list[Fact]]:
    t = Transcript("7c1e4d2a-5b8f-4e21-9d3c-1a2b3c4d5e6f", "/home/dana/code/billing", "fix/invoice-discount",
                   "2026-11-18T09:12:04.512Z")
    t.user("tests/test_invoices.py::test_total_with_discount has been failing since yesterday's merge of "
           "the tax branch. Can you find out why and fix it?")
    t.bash("python -m pytest tests/test_invoices.py -q", PYTEST_FAIL, exit_code=1,
           text="Let me run the failing test first.", description="Run the invoice tests")
    t.read("/home/dana/code/billing/billing/invoice.py", INVOICE)
    t.bash("git log --oneline -3 -- billing/invoice.py",
           "b7d2e91 Merge branch 'tax-rates'\n51aa0c3 Add per-line tax rates\n0f9e3b2 Invoice totals")
    t.say("The discount is never applied: since the merge of `tax-rates`, `Invoice.total()` returns the "
          "rounded subtotal on the line before `apply_discount()` runs, so everything after it is dead code. "
          "I'll remove the early return.")
    t.edit("/home/dana/code/billing/billing/invoice.py",
           '        subtotal = self.subtotal()\n        return subtotal.quantize(Decimal("0.01"))\n',
           "        subtotal = self.subtotal()\n")
    t.bash("python -m pytest tests/test_invoices.py -q", "...                                      [100%]\n"
           "3 passed in 0.18s")
    t.bash("python -m pytest -q", "." * 70 + "\n142 passed in 4.02s", text="Now the whole suite.")
    t.bash("git add billing/invoice.py && git commit -m \"$(cat <<'EOF'\nApply the discount before "
           "returning the invoice total\n\nThe tax-rates merge left an early return above apply_discount().\n"
           "EOF\n)\"", "[fix/invoice-discount 4e1f2a9] Apply the discount before returning the invoice total\n"
           " 1 file changed, 0 insertions(+), 1 deletion(-)")
    t.say("Fixed. `Invoice.total()` returned the subtotal before applying the discount: the `tax-rates` "
          "merge left an early return above `apply_discount()`. I removed it; all 142 tests pass, and the "
          "fix is committed as 4e1f2a9 on fix/invoice-discount.")
    t.end_turn(61_000).title("Fix invoice discount regression").last_prompt("")
    return t, [
        fact("request", "test_total_with_discount", "failing"),
        fact("command", "pytest tests/test_invoices.py"),
        fact("command", "pytest -q"),
        fact("file", "billing/invoice.py"),
        fact("error", "AssertionError", "Decimal('200.00') == Decimal('180.00')", section=KL),
        fact("fix", "test_total_with_discount", "billing/invoice.py", section=KL),
        fact("outcome", "Apply the discount before returning the invoice total"),
        fact("outcome", "142 tests pass"),
        fact("outcome", "early return"),
    ]


# ---------------------------------------------------------------- 2. a feature across files

JEST_FAIL = '''FAIL server/lib/csv.test.ts
  toCsv
    ✓ joins fields with commas (2 ms)
    ✓ ends rows with CRLF (1 ms)
    ✕ escapes quotes (3 ms)
    ✓ quotes fields with commas (1 ms)

  ● toCsv › escapes quotes

    expect(received).toBe(expected) // Object.is equality

    Expected: "\\"a \\"\\"b\\"\\"\\""
    Received: "\\"a \\"b\\"\\""

      12 |   it('escapes quotes', () => {
    > 13 |     expect(toCsv([['a "b"']])).toBe('"a ""b"""\\r\\n'.trimEnd());

Tests:       1 failed, 3 passed, 4 total'''


def feature_across_files() -> tuple[Transcript, list[Fact]]:
    t = Transcript("3f2c9a10-8e4b-4c7d-b1a2-0e9f8d7c6b5a", "/Users/sam/src/insights", "feat/report-csv",
                   "2026-11-19T14:02:51.007Z")
    t.user("Add a CSV export to the reports page: a \"Download CSV\" button on each report, backed by a "
           "streaming endpoint GET /api/reports/:id/export.csv. Add tests.")
    t.todos([("in_progress", "Add the export.csv route"), ("pending", "Write a CSV encoder with tests"),
             ("pending", "Add the Download CSV button")])
    t.grep("reportsRouter", "server/routes/reports.ts:8:export const reportsRouter = Router();\n"
           "server/app.ts:21:app.use('/api/reports', reportsRouter);")
    t.read("/Users/sam/src/insights/server/routes/reports.ts",
           "import { Router } from 'express';\nimport { getReport } from '../db/reports';\n\n"
           "export const reportsRouter = Router();\n\nreportsRouter.get('/:id', async (req, res) => {\n"
           "  res.json(await getReport(req.params.id));\n});\n")
    t.write("/Users/sam/src/insights/server/lib/csv.ts",
            "export function escapeField(v: string): string {\n  return /[\",\\r\\n]/.test(v) ? `\"${v}\"` : v;\n}\n"
            "export function toCsv(rows: string[][]): string {\n  return rows.map(r => r.map(escapeField).join(','))"
            ".join('\\r\\n');\n}\n", text="I'll start with a small CSV encoder.")
    t.edit("/Users/sam/src/insights/server/routes/reports.ts", "export const reportsRouter = Router();\n",
           "export const reportsRouter = Router();\n\nreportsRouter.get('/:id/export.csv', async (req, res) => {\n"
           "  res.type('text/csv');\n  for await (const chunk of streamReportRows(req.params.id)) "
           "res.write(toCsv(chunk) + '\\r\\n');\n  res.end();\n});\n")
    t.edit("/Users/sam/src/insights/web/src/pages/Reports.tsx", "<ReportActions report={report} />",
           "<ReportActions report={report} />\n<a className=\"btn\" href={`/api/reports/${report.id}/export.csv`}>"
           "Download CSV</a>")
    t.write("/Users/sam/src/insights/server/lib/csv.test.ts",
            "import { toCsv } from './csv';\n\ndescribe('toCsv', () => {\n  it('escapes quotes', () => {\n"
            "    expect(toCsv([['a \"b\"']])).toBe('\"a \"\"b\"\"\"');\n  });\n});\n")
    t.bash("npm test -- server/lib/csv.test.ts", JEST_FAIL, exit_code=1)
    t.say("Quotes inside a field must be doubled (RFC 4180): `escapeField` wrapped the value in quotes but "
          "did not escape the quotes inside it.")
    t.edit("/Users/sam/src/insights/server/lib/csv.ts", "`\"${v}\"`", "`\"${v.replace(/\"/g, '\"\"')}\"`")
    t.bash("npm test -- server/lib/csv.test.ts", "PASS server/lib/csv.test.ts\n  toCsv\n    ✓ escapes quotes "
           "(1 ms)\n\nTests:       4 passed, 4 total")
    t.bash("npm run typecheck", "> insights@2.3.0 typecheck\n> tsc --noEmit -p .\n")
    t.bash("npm run lint", "> insights@2.3.0 lint\n> eslint . --max-warnings 0\n")
    t.todos([("completed", "Add the export.csv route"), ("completed", "Write a CSV encoder with tests"),
             ("completed", "Add the Download CSV button")])
    t.bash("git add -A && git commit -m \"Add CSV export for reports\"",
           "[feat/report-csv 9c0d1e2] Add CSV export for reports\n 4 files changed, 61 insertions(+)")
    t.bash("git push -u origin feat/report-csv", "To github.com:acme/insights.git\n * [new branch]      "
           "feat/report-csv -> feat/report-csv")
    t.bash("gh pr create --title \"Add CSV export for reports\" --body \"Adds GET /api/reports/:id/export.csv "
           "and a Download CSV button.\"", "https://github.com/acme/insights/pull/482")
    t.say("Done: reports now have a **Download CSV** button that streams `GET /api/reports/:id/export.csv`. "
          "The encoder lives in `server/lib/csv.ts` with tests; typecheck and lint pass. PR: "
          "https://github.com/acme/insights/pull/482")
    t.end_turn(190_000)
    return t, [
        fact("request", "CSV export", "reports page"),
        fact("file", "server/routes/reports.ts"),
        fact("file", "server/lib/csv.ts"),
        fact("file", "web/src/pages/Reports.tsx"),
        fact("file", "server/lib/csv.test.ts"),
        fact("command", "npm test"),
        fact("command", "npm run typecheck"),
        fact("error", "escapes quotes", section=KL),
        fact("fix", "escapes quotes", "server/lib/csv.ts", section=KL),
        fact("outcome", "https://github.com/acme/insights/pull/482"),
        fact("outcome", "Add CSV export for reports"),
    ]


# ---------------------------------------------------------------- 3. chase an incident

def chase_incident() -> tuple[Transcript, list[Fact]]:
    t = Transcript("c0ffee00-1d2e-4f5a-8b9c-0d1e2f3a4b5c", "/home/oncall/infra", "main",
                   "2026-11-20T14:31:09.250Z")
    t.user("Checkout is returning 502s in production since about 14:10 UTC. Can you find out why and stop it?")
    t.bash("kubectl -n shop get pods -l app=checkout",
           "NAME                        READY   STATUS             RESTARTS      AGE\n"
           "checkout-7d9f8c6b5-xk2lp    0/1     CrashLoopBackOff   14 (2m ago)   3h\n"
           "checkout-7d9f8c6b5-q9w8e    0/1     CrashLoopBackOff   13 (1m ago)   3h",
           text="Let me look at the checkout pods.")
    t.bash("kubectl -n shop describe pod checkout-7d9f8c6b5-xk2lp | tail -20",
           "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n"
           "    Limits:\n      memory:  512Mi\n    Requests:\n      memory:  256Mi")
    t.bash("kubectl -n shop logs checkout-7d9f8c6b5-xk2lp --previous | tail -30",
           "2026-11-20 14:09:58 INFO  CartCache warming: 48211/50000 entries\n"
           "Exception in thread \"cache-warmer\" java.lang.OutOfMemoryError: Java heap space\n"
           "\tat com.acme.cart.CartCache.put(CartCache.java:88)")
    t.bash("git log --oneline -5 -- k8s/checkout/ services/checkout/",
           "a1b2c3d Raise cart cache size to 50k entries (#1290)\n77e0f1a Checkout: structured logs")
    t.say("The pods are OOMKilled: #1290 raised the cart cache to 50k entries this morning, but the "
          "container limit is still 512Mi and the JVM heap is capped at 384m. I'll raise both.")
    t.read("/home/oncall/infra/k8s/checkout/deployment.yaml",
           "        resources:\n          limits:\n            memory: 512Mi\n        env:\n"
           "          - name: JAVA_OPTS\n            value: \"-Xmx384m\"\n")
    t.edit("/home/oncall/infra/k8s/checkout/deployment.yaml", "            memory: 512Mi",
           "            memory:\n              1Gi")
    t.edit("/home/oncall/infra/k8s/checkout/deployment.yaml", "\"-Xmx384m\"", "\"-Xmx768m\"")
    t.bash("kubectl apply -f k8s/checkout/deployment.yaml",
           "error: error validating \"k8s/checkout/deployment.yaml\": error validating data: "
           "ValidationError(Deployment.spec.template.spec.containers[0].resources.limits.memory): invalid type "
           "for io.k8s.apimachinery.pkg.api.resource.Quantity: got \"map\", expected \"string\"", exit_code=1)
    t.say("My edit broke the YAML: the quantity ended up on its own line. Fixing the indentation.")
    t.edit("/home/oncall/infra/k8s/checkout/deployment.yaml", "            memory:\n              1Gi",
           "            memory: 1Gi")
    t.bash("kubectl apply -f k8s/checkout/deployment.yaml", "deployment.apps/checkout configured")
    t.bash("kubectl -n shop rollout status deploy/checkout --timeout=180s",
           "Waiting for deployment \"checkout\" rollout to finish: 1 of 2 updated replicas are available...\n"
           "deployment \"checkout\" successfully rolled out")
    t.bash("curl -s -o /dev/null -w '%{http_code}' https://shop.example.com/api/checkout/health", "200")
    t.say("Root cause: the checkout pods were **OOMKilled** after #1290 raised the cart cache to 50k entries "
          "while the memory limit stayed at 512Mi (heap 384m). I raised the limit to 1Gi and `-Xmx` to 768m in "
          "k8s/checkout/deployment.yaml and applied it; the rollout finished and the health check returns 200. "
          "Follow-up: commit the manifest change and make the cache size configurable per environment.")
    t.end_turn(402_000)
    return t, [
        fact("request", "502", "checkout"),
        fact("command", "kubectl -n shop logs"),
        fact("command", "kubectl apply -f k8s/checkout/deployment.yaml"),
        fact("command", "rollout status"),
        fact("file", "k8s/checkout/deployment.yaml"),
        fact("error", "ValidationError", section=KL),
        fact("fix", "ValidationError", "k8s/checkout/deployment.yaml", section=KL),
        fact("outcome", "OOMKilled"),
        fact("outcome", "#1290"),
        fact("outcome", "1Gi"),
    ]


# ---------------------------------------------------------------- 4. questions, no tool use

def question_no_tools() -> tuple[Transcript, list[Fact]]:
    t = Transcript("5a5a5a5a-0000-4b4b-8c8c-d1d2d3d4d5d6", "/home/lee/notes", "", "2026-11-21T08:40:00.000Z")
    t.user("When I update my feature branch from main, should I use git rebase or git merge? The branch is "
           "shared with one other developer.")
    t.say("Use **merge** for a shared branch: `git merge main` keeps the history your colleague already "
          "pulled and adds one merge commit. `git rebase main` rewrites your commits on top of main, which "
          "gives a linear history but forces everyone who pulled the branch to reset onto the new commits. "
          "Rebase only branches nobody else has pulled.",
          thinking="The user asks about rebase vs merge for a shared branch.")
    t.end_turn(9_000)
    t.user("And if a rebase goes wrong, how do I undo it?")
    t.say("Use the reflog: `git reflog` lists where HEAD has been; find the entry just before the rebase "
          "started (for example `HEAD@{5}`) and run `git reset --hard HEAD@{5}`. Right after a rebase, "
          "`ORIG_HEAD` also points at the old tip, so `git reset --hard ORIG_HEAD` works too.")
    t.end_turn(7_000)
    return t, [
        fact("request", "git rebase", "git merge"),
        fact("request", "undo"),
        fact("outcome", "merge for a shared branch"),
        fact("outcome", "git reflog"),
        fact("outcome", "git reset --hard"),
    ]


# ---------------------------------------------------------------- 5. a long session with compactions

def long_session() -> tuple[Transcript, list[Fact]]:
    t = Transcript("9e8d7c6b-5a4f-4e3d-a2c1-b0a9f8e7d6c5", "/srv/src/search-api", "feat/rate-limit",
                   "2026-11-17T10:00:00.000Z", model="claude-opus-4-1-20250805")
    t.user("Add rate limiting to the /api/search endpoint: 20 requests per minute per API key, and answer "
           "429 with a Retry-After header when the limit is hit.")
    for name in ("internal/http/router.go", "internal/http/middleware.go", "internal/auth/apikey.go"):
        t.read(f"/srv/src/search-api/{name}", "package http\n\nfunc New() {}\n")
    t.grep("func.*Middleware", "internal/http/middleware.go:12:func LoggingMiddleware(next http.Handler)")
    t.write("/srv/src/search-api/internal/ratelimit/limiter.go",
            "package ratelimit\n\ntype Limiter struct{ perMinute int }\n")
    t.write("/srv/src/search-api/internal/ratelimit/limiter_test.go",
            "package ratelimit\n\nfunc TestLimit(t *testing.T) {}\n")
    t.edit("/srv/src/search-api/internal/http/router.go", "r.Get(\"/api/search\", h.Search)",
           "r.With(ratelimit.Middleware(lim)).Get(\"/api/search\", h.Search)")
    t.bash("go test ./internal/ratelimit/...",
           "--- FAIL: TestLimit (0.00s)\n    limiter_test.go:42: request 21: expected 429, got 200\nFAIL\n"
           "FAIL\tgithub.com/acme/search-api/internal/ratelimit\t0.012s", exit_code=1)
    t.say("The window never resets its counter because `Allow` compares against the bucket's creation time "
          "instead of the current minute. Switching to a sliding window keyed by API key.")
    t.edit("/srv/src/search-api/internal/ratelimit/limiter.go", "if now.Sub(b.start) > time.Minute {",
           "if now.Sub(b.start) >= time.Minute {\n\t\tb.start, b.count = now, 0")
    t.bash("go test ./internal/ratelimit/...", "ok  \tgithub.com/acme/search-api/internal/ratelimit\t0.010s")
    for n in range(6):  # a stretch of reading and checking, as long sessions have
        t.read(f"/srv/src/search-api/internal/search/query{n}.go", f"package search\n// part {n}\n")
        t.bash(f"go vet ./internal/search/... # pass {n}", "")
    t.compact("1. The user asked for rate limiting on /api/search (20/min per API key, 429 + Retry-After).\n"
              "2. Added internal/ratelimit (limiter.go, limiter_test.go) and wired it in router.go; fixed the "
              "window reset; tests pass.")
    t.user("Now make the limit configurable through an environment variable SEARCH_RATE_LIMIT, default 20.")
    t.read("/srv/src/search-api/internal/config/config.go", "package config\n\ntype Config struct {}\n")
    t.edit("/srv/src/search-api/internal/config/config.go", "type Config struct {",
           "type Config struct {\n\tSearchRateLimit int\n")
    t.bash("go build ./...", "# github.com/acme/search-api/internal/config\n"
           "internal/config/config.go:31:12: undefined: strconv", exit_code=1)
    t.say("I used `strconv.Atoi` without importing strconv.")
    t.edit("/srv/src/search-api/internal/config/config.go", "import (\n\t\"os\"", "import (\n\t\"os\"\n\t\"strconv\"")
    t.bash("go build ./...", "")
    t.bash("go test ./...", "ok  \tgithub.com/acme/search-api/internal/config\t0.004s\n"
           "ok  \tgithub.com/acme/search-api/internal/ratelimit\t0.011s\n"
           "ok  \tgithub.com/acme/search-api/internal/http\t0.031s")
    t.compact("3. SEARCH_RATE_LIMIT is read in internal/config/config.go (default 20); build and tests pass.")
    t.user("Document it in the README and commit.")
    t.edit("/srv/src/search-api/README.md", "## Configuration\n",
           "## Configuration\n\n`SEARCH_RATE_LIMIT` (default 20): requests per minute per API key on /api/search.\n")
    t.bash("git add -A && git commit -m \"Rate-limit /api/search per API key (SEARCH_RATE_LIMIT)\"",
           "[feat/rate-limit 2d4f6a8] Rate-limit /api/search per API key (SEARCH_RATE_LIMIT)\n"
           " 6 files changed, 148 insertions(+), 3 deletions(-)")
    t.say("Committed 2d4f6a8: /api/search is limited to SEARCH_RATE_LIMIT (default 20) requests per minute "
          "per API key and answers 429 with Retry-After; the README documents the variable.")
    t.end_turn(30_000)
    return t, [
        fact("request", "rate limiting", "/api/search"),
        fact("request", "SEARCH_RATE_LIMIT"),
        fact("request", "README"),
        fact("file", "internal/ratelimit/limiter.go"),
        fact("file", "internal/http/router.go"),
        fact("file", "internal/config/config.go"),
        fact("file", "README.md"),
        fact("command", "go test ./internal/ratelimit/..."),
        fact("command", "go build ./..."),
        fact("error", "expected 429, got 200", section=KL),
        fact("fix", "expected 429, got 200", "internal/ratelimit/limiter.go", section=KL),
        fact("error", "undefined: strconv", section=KL),
        fact("fix", "undefined: strconv", "internal/config/config.go", section=KL),
        fact("outcome", "Rate-limit /api/search per API key (SEARCH_RATE_LIMIT)"),
        fact("outcome", "compacted 2 times"),
    ]


# ---------------------------------------------------------------- 6. a sub-agent

def with_subagent() -> tuple[Transcript, list[Fact]]:
    t = Transcript("b1b2b3b4-c5c6-4d7d-8e9e-f0f1f2f3f4f5", "/home/ria/work/accounts", "refactor/account-id",
                   "2026-11-16T16:20:00.000Z")
    t.user("Rename the legacy_user_id column to account_id everywhere (models, API, services) and add a "
           "migration.")

    def explore(s: Transcript) -> None:
        s.grep("legacy_user_id", "app/models/user.py:14:    legacy_user_id = Column(Integer)\n"
               "app/api/users.py:40:        \"legacy_user_id\": user.legacy_user_id,\n"
               "app/services/billing.py:77:    customer = lookup(user.legacy_user_id)", side=True)
        s.bash("rg -n legacy_user_id --type py | wc -l", "7", side=True)
        s.read("/home/ria/work/accounts/tests/api/test_users.py", "def test_get_user(client):\n"
               "    assert body[\"legacy_user_id\"] == 42\n", side=True)

    t.task("Explore", "Find every use of legacy_user_id", "Find every place that reads or writes "
           "legacy_user_id: models, API serializers, services, tests, migrations. Report file:line.",
           explore, "Found 7 uses in 4 files: app/models/user.py:14 (column), app/api/users.py:40 "
           "(serializer), app/services/billing.py:77, tests/api/test_users.py:12 and :30. No migration "
           "touches it yet.")
    t.edit("/home/ria/work/accounts/app/models/user.py", "legacy_user_id = Column(Integer)",
           "account_id = Column(\"account_id\", Integer)")
    t.edit("/home/ria/work/accounts/app/api/users.py", "\"legacy_user_id\": user.legacy_user_id",
           "\"account_id\": user.account_id")
    t.edit("/home/ria/work/accounts/app/services/billing.py", "lookup(user.legacy_user_id)",
           "lookup(user.account_id)")
    t.write("/home/ria/work/accounts/migrations/versions/20261116_rename_legacy_user_id.py",
            "def upgrade():\n    op.alter_column('users', 'legacy_user_id', new_column_name='account_id')\n")
    t.bash("alembic upgrade head", "INFO  [alembic.runtime.migration] Running upgrade 41c2 -> 20261116, "
           "rename legacy_user_id to account_id")
    t.bash("python -m pytest -q tests/api", "F.....\nFAILED tests/api/test_users.py::test_get_user - "
           "KeyError: 'legacy_user_id'\n1 failed, 5 passed in 0.44s", exit_code=1)
    t.say("The API test still reads the old key.")
    t.edit("/home/ria/work/accounts/tests/api/test_users.py", "body[\"legacy_user_id\"]", "body[\"account_id\"]")
    t.bash("python -m pytest -q tests/api", "......\n6 passed in 0.41s")
    t.say("Renamed `legacy_user_id` to `account_id` in the model, the users API, billing and the tests, with "
          "the Alembic migration 20261116_rename_legacy_user_id (applied locally). Note: API clients that read "
          "`legacy_user_id` need the new key.")
    t.end_turn(120_000)
    return t, [
        fact("request", "legacy_user_id", "account_id"),
        fact("delegated", "Explore", "Find every use of legacy_user_id"),
        fact("delegated", "Found 7 uses in 4 files"),
        fact("file", "app/models/user.py"),
        fact("file", "app/api/users.py"),
        fact("file", "app/services/billing.py"),
        fact("file", "migrations/versions/20261116_rename_legacy_user_id.py"),
        fact("command", "alembic upgrade head"),
        fact("error", "KeyError: 'legacy_user_id'", section=KL),
        fact("fix", "KeyError: 'legacy_user_id'", "tests/api/test_users.py", section=KL),
        fact("outcome", "API clients"),
    ]


# ---------------------------------------------------------------- 7. set up a project

def setup_project() -> tuple[Transcript, list[Fact]]:
    t = Transcript("0d0d0d0d-1e1e-4f2f-a3a3-b4b4c5c5d6d6", "/home/kai/src/jobrunner", "main",
                   "2026-11-15T11:00:00.000Z")
    t.user("I just cloned this repo on a new laptop. Set it up and get the test suite and the frontend build "
           "passing.")
    t.bash("python -m pip install -e .", "Successfully installed jobrunner-0.9.2")
    t.bash("python -m pytest -q", "==================================== ERRORS ====================================\n"
           "_____________________ ERROR collecting tests/test_config.py _____________________\n"
           "ImportError while importing test module '/home/kai/src/jobrunner/tests/test_config.py'.\n"
           "E   ModuleNotFoundError: No module named 'yaml'\n"
           "ERROR tests/test_config.py\n!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!",
           exit_code=2)
    t.say("PyYAML is imported by jobrunner/config.py but missing from the dependencies.")
    t.bash("python -m pip install pyyaml", "Successfully installed pyyaml-6.0.2")
    t.edit("/home/kai/src/jobrunner/pyproject.toml", "dependencies = [\n", "dependencies = [\n    \"PyYAML>=6\",\n")
    t.bash("python -m pytest -q", ".....F\nE   sqlite3.OperationalError: no such table: jobs\n"
           "FAILED tests/test_queue.py::test_enqueue - sqlite3.OperationalError: no such table: jobs\n"
           "1 failed, 57 passed in 2.10s", exit_code=1)
    t.say("The queue tests need the local SQLite schema; the Makefile has a `db` target for it.")
    t.bash("make db", "sqlite3 var/jobs.db < schema.sql")
    t.bash("python -m pytest -q", "." * 58 + "\n58 passed in 2.31s")
    t.bash("cd web && npm ci", "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n"
           "npm ERR! Found: react@18.3.1\nnpm ERR! Could not resolve dependency:\n"
           "npm ERR! peer react@\"^17.0.0\" from react-beautiful-dnd@13.1.1", exit_code=1)
    t.say("react-beautiful-dnd 13 declares a peer dependency on React 17; the lockfile was made with "
          "--legacy-peer-deps.")
    t.bash("cd web && npm ci --legacy-peer-deps", "added 1204 packages in 41s")
    t.bash("cd web && npm run build", "> web@0.9.2 build\n> vite build\n✓ 812 modules transformed.\n"
           "✓ built in 6.42s")
    t.say("All set: 58 tests pass and the frontend builds. I added PyYAML to pyproject.toml (it was missing), "
          "created the SQLite schema with `make db`, and installed the frontend with `npm ci "
          "--legacy-peer-deps` because react-beautiful-dnd still declares React 17 as a peer.")
    t.end_turn(210_000)
    return t, [
        fact("request", "test suite", "frontend build"),
        fact("command", "npm run build"),
        fact("file", "pyproject.toml"),
        fact("error", "No module named 'yaml'", section=KL),
        fact("fix", "No module named 'yaml'", "pip install pyyaml", section=KL),
        fact("error", "no such table: jobs", section=KL),
        fact("fix", "no such table: jobs", "make db", section=KL),
        fact("error", "ERESOLVE", section=KL),
        fact("fix", "ERESOLVE", "--legacy-peer-deps", section=KL),
        fact("outcome", "58 tests pass"),
    ]


# ---------------------------------------------------------------- 8. a broken build

def broken_build() -> tuple[Transcript, list[Fact]]:
    t = Transcript("e4e4e4e4-f5f5-4a6a-b7b7-c8c8d9d9e0e0", "/home/ana/dashboard", "main",
                   "2026-11-21T17:45:30.000Z")
    t.user("The build is broken on main since the date-fns upgrade. Please fix it.")
    t.bash("npm run build", "> dashboard@4.1.0 build\n> tsc -b && vite build\n\n"
           "src/utils/format.ts(14,22): error TS2345: Argument of type 'string' is not assignable to parameter "
           "of type 'Date | number'.\nsrc/utils/format.ts(21,30): error TS2345: Argument of type 'string' is not "
           "assignable to parameter of type 'Date | number'.", exit_code=2)
    t.read("/home/ana/dashboard/src/utils/format.ts", "import { format, formatDistance } from 'date-fns';\n")
    t.say("date-fns v3 no longer accepts ISO strings in `format()`; they must be parsed with `parseISO` first.")
    t.edit("/home/ana/dashboard/src/utils/format.ts", "format(value, pattern)", "format(parseISO(value), pattern)")
    t.edit("/home/ana/dashboard/src/utils/format.ts", "formatDistance(from, to)",
           "formatDistance(parseISO(from), parseISO(to))")
    t.bash("npm run build", "> dashboard@4.1.0 build\n> tsc -b && vite build\n✓ built in 5.10s")
    t.bash("npx eslint src", "/home/ana/dashboard/src/utils/format.ts\n  1:10  error  'format' is defined but "
           "never used  @typescript-eslint/no-unused-vars\n\n✖ 1 problem (1 error, 0 warnings)", exit_code=1)
    t.edit("/home/ana/dashboard/src/utils/format.ts", "import { format, formatDistance, parseISO }",
           "import { formatDistance, parseISO }")
    t.bash("npx eslint src", "")
    t.bash("git commit -am \"Parse ISO strings before formatting with date-fns v3\"",
           "[main 6b7c8d9] Parse ISO strings before formatting with date-fns v3\n 1 file changed")
    t.say("The build passes again: date-fns v3 rejects strings, so `src/utils/format.ts` now parses them with "
          "`parseISO`. Lint is clean and the fix is committed (6b7c8d9).")
    t.end_turn(80_000)
    return t, [
        fact("request", "date-fns", "build"),
        fact("command", "npm run build"),
        fact("file", "src/utils/format.ts"),
        fact("error", "TS2345", section=KL),
        fact("fix", "TS2345", "src/utils/format.ts", section=KL),
        fact("error", "no-unused-vars", section=KL),
        fact("fix", "no-unused-vars", "src/utils/format.ts", section=KL),
        fact("outcome", "Parse ISO strings before formatting with date-fns v3"),
        fact("outcome", "parseISO"),
    ]


# ---------------------------------------------------------------- 9. clean up a machine

def cleanup_machine() -> tuple[Transcript, list[Fact]]:
    t = Transcript("a9a9a9a9-8b8b-4c7c-9d6d-e5e5f4f4a3a3", "/home/ci", "", "2026-11-19T07:05:00.000Z")
    t.user("The CI runner is out of disk. Free some disk space, but keep anything from the last month.")
    t.bash("df -h / && du -sh /var/lib/ci/* | sort -h | tail -5",
           "/dev/nvme0n1p1  200G  196G  4.0G  98% /\n2.1G\t/var/lib/ci/cache\n61G\t/var/lib/ci/artifacts\n"
           "88G\t/var/lib/ci/workspace")
    t.refused("rm -rf /var/lib/ci/workspace", "Don't delete the workspace, only the artifacts older than 30 days.")
    t.bash("find /var/lib/ci/artifacts -type f -mtime +30 -delete && du -sh /var/lib/ci/artifacts",
           "14G\t/var/lib/ci/artifacts", text="Understood: only artifacts older than 30 days.")
    t.queued("also clear the docker build cache")
    t.bash("docker builder prune -f", "Deleted build cache objects:\nq8w7e6r5t4y3\nTotal reclaimed space: 18.4GB")
    t.tool("Bash", {"command": "docker system prune -a -f", "description": "Prune all images"},
           "The user doesn't want to proceed with this tool use. The tool use was rejected.", error=True)
    t.interrupt()
    t.user("No image prune. What's free now?")
    t.bash("df -h /", "/dev/nvme0n1p1  200G  129G   71G  65% /")
    t.say("Freed about 67G: 47G of artifacts older than 30 days and 18.4GB of Docker build cache. The disk is "
          "at 65% (71G free). I left the workspace and the Docker images alone.")
    t.end_turn(50_000)
    return t, [
        fact("request", "Free some disk space"),
        fact("request", "only the artifacts older than 30 days"),
        fact("request", "docker build cache"),
        fact("command", "find /var/lib/ci/artifacts -type f -mtime +30 -delete"),
        fact("command", "docker builder prune"),
        fact("outcome", "18.4GB"),
        fact("outcome", "71G free"),
    ]


# ---------------------------------------------------------------- 10. secrets in the output

SECRETS = ["S3cr3t-Pa55w0rd-2026", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ9Rk2aLp", "ghp_4Rt6Yu8Io0Pa2Sd4Fg6Hj8Kl0Zx2Cv4Bn6Mm",
           "AKIAZ7QK3LMNOPQRS2TU", "xoxb-2048-8192-Zr9Qw8Ex7Rt6Yu5Io4Pa3S",
           "sk-ant-api03-Qm9Xr2Lk7Vt4Bn8Hj3Fd6Sa1Zc5Wp0Ey-AbCdEf", "n3w-R0tated-Pa55-9911"]


def migration_with_secrets() -> tuple[Transcript, list[Fact]]:
    t = Transcript("d3d3d3d3-e4e4-4f5f-a6a6-b7b7c8c8d9d9", "/home/max/app", "release/2.8",
                   "2026-11-18T21:10:00.000Z")
    t.user("Why does `alembic upgrade head` fail on staging? Here is the deploy token if you need it: "
           f"{SECRETS[2]}")
    t.bash("env | grep -iE 'database|aws|slack'",
           f"DATABASE_URL=postgresql://app:{SECRETS[0]}@db.staging.internal:5432/app\n"
           f"AWS_ACCESS_KEY_ID={SECRETS[3]}\nAWS_SECRET_ACCESS_KEY={SECRETS[1]}\nSLACK_BOT_TOKEN={SECRETS[4]}")
    t.bash("alembic upgrade head", "Traceback (most recent call last):\n  File \"/usr/lib/python3/site-packages/"
           "sqlalchemy/engine/base.py\", line 145, in __init__\nsqlalchemy.exc.OperationalError: "
           "(psycopg2.OperationalError) connection to server at \"db.staging.internal\" (10.0.3.12), port 5432 "
           f"failed: FATAL:  password authentication failed for user \"app\"\n(Background on this error at: "
           f"https://sqlalche.me/e/20/e3q8)\n[SQL: connect postgresql://app:{SECRETS[0]}@db.staging.internal]",
           exit_code=1)
    t.say(f"The password in DATABASE_URL (`{SECRETS[0][:4]}…`) is stale: Vault rotated the staging DB "
          "credentials on Monday, but .env.staging still has the old one.")
    t.bash("vault kv get -field=password secret/staging/db", "n3w-R0tated-Pa55-9911")
    t.edit("/home/max/app/.env.staging", f"DATABASE_URL=postgresql://app:{SECRETS[0]}@",
           "DATABASE_URL=postgresql://app:n3w-R0tated-Pa55-9911@")
    t.bash("alembic upgrade head", "INFO  [alembic.runtime.migration] Running upgrade 3f2a -> 9b1c, add "
           "invoices.due_date")
    t.say("Fixed: the staging DB password had been rotated in Vault and .env.staging still held the old one. "
          "I updated .env.staging from `vault kv get secret/staging/db`; `alembic upgrade head` now applies "
          f"9b1c (add invoices.due_date). Also: the key {SECRETS[5]} was printed in your shell history; "
          "rotate it.")
    t.end_turn(70_000)
    return t, [
        fact("request", "alembic upgrade head", "staging"),
        fact("command", "vault kv get"),
        fact("file", ".env.staging"),
        fact("error", "password authentication failed", section=KL),
        fact("fix", "password authentication failed", ".env.staging", section=KL),
        fact("outcome", "add invoices.due_date"),
    ]


# ---------------------------------------------------------------- 11. a slash command in plan mode

def slash_command_plan() -> tuple[Transcript, list[Fact]]:
    t = Transcript("f6f6f6f6-a7a7-4b8b-9c9c-d0d0e1e1f2f2", "/home/jo/lexer", "fix/1287",
                   "2026-11-20T09:30:00.000Z")
    t.command("/fix-issue", "1287")
    t.bash("gh issue view 1287", "title:\tPanic on identifiers with non-ASCII letters\nstate:\tOPEN\n"
           "Lexing `let café = 1` panics: byte index 3 is not a char boundary")
    t.tool("ExitPlanMode", {"plan": "1. Reproduce with a regression test for `café`.\n2. Slice identifiers by "
           "char indices in src/parser.rs.\n3. Run cargo test and clippy."}, "User has approved your plan.")
    t.edit("/home/jo/lexer/src/parser.rs", "#[cfg(test)]\nmod tests {", "#[cfg(test)]\nmod tests {\n    #[test]\n"
           "    fn unicode_identifiers() { lex(\"let café = 1\"); }")
    t.bash("cargo test parser::tests::unicode_identifiers", "running 1 test\ntest parser::tests::unicode_identifiers "
           "... FAILED\n\n---- parser::tests::unicode_identifiers stdout ----\nthread "
           "'parser::tests::unicode_identifiers' panicked at src/parser.rs:88:21:\nbyte index 3 is not a char "
           "boundary; it is inside 'é' (bytes 3..5) of `café`\n\nfailures:\n    parser::tests::unicode_identifiers"
           "\n\ntest result: FAILED. 0 passed; 1 failed", exit_code=101)
    t.say("`read_ident` advances by one byte per character. It must use `char_indices()`.")
    t.edit("/home/jo/lexer/src/parser.rs", "let end = start + len;", "let end = self.src[start..].char_indices()"
           ".find(|(_, c)| !is_ident(*c)).map_or(self.src.len(), |(i, _)| start + i);")
    t.bash("cargo test", "running 58 tests\n...\ntest result: ok. 58 passed; 0 failed; 0 ignored")
    t.bash("cargo clippy -- -D warnings", "    Checking lexer v0.4.1 (/home/jo/lexer)\n    Finished dev profile")
    t.bash("git commit -am \"Use char indices when slicing identifiers (#1287)\"",
           "[fix/1287 0a1b2c3] Use char indices when slicing identifiers (#1287)")
    t.say("Issue #1287 is fixed: `read_ident` sliced identifiers by byte offsets; it now uses `char_indices()`. "
          "A regression test covers `café`; cargo test (58) and clippy pass.")
    t.end_turn(140_000)
    return t, [
        fact("request", "/fix-issue 1287"),
        fact("command", "cargo test"),
        fact("command", "cargo clippy"),
        fact("file", "src/parser.rs"),
        fact("error", "not a char boundary", section=KL),
        fact("fix", "not a char boundary", "src/parser.rs", section=KL),
        fact("outcome", "Use char indices when slicing identifiers (#1287)"),
        fact("outcome", "char_indices"),
    ]


# ---------------------------------------------------------------- 12. a Codex CLI session

def codex_session() -> tuple[str, list[Fact]]:
    sid = "019a4c2e-7d1b-7c3e-9f20-5b6a7c8d9e0f"
    lines: list[dict[str, Any]] = []
    clock = [0]

    def at() -> str:
        clock[0] += 3
        return f"2026-11-21T13:{clock[0] // 60:02d}:{clock[0] % 60:02d}.000Z"

    def rec(kind: str, payload: dict[str, Any]) -> None:
        lines.append({"timestamp": at(), "type": kind, "payload": payload})

    rec("session_meta", {"id": sid, "timestamp": "2026-11-21T13:00:00.000Z", "cwd": "/home/ola/api",
                         "originator": "codex_cli_rs", "cli_version": "0.63.0", "git": {"branch": "fix/cache-race",
                                                                                         "commit_hash": "7e1d"}})
    rec("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text":
        "<environment_context>\n  <cwd>/home/ola/api</cwd>\n</environment_context>"}]})
    rec("turn_context", {"cwd": "/home/ola/api", "model": "gpt-5-codex", "approval_policy": "on-request"})
    ask = "The tests in pkg/cache fail under the race detector. Find the data race and fix it."
    rec("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ask}]})
    rec("event_msg", {"type": "user_message", "message": ask, "images": []})
    rec("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAABo"})
    rec("response_item", {"type": "function_call", "name": "shell", "call_id": "call_1",
                          "arguments": json.dumps({"command": ["bash", "-lc", "go test -race ./pkg/cache/..."],
                                                   "workdir": "/home/ola/api"})})
    rec("response_item", {"type": "function_call_output", "call_id": "call_1", "output": json.dumps({
        "output": "==================\nWARNING: DATA RACE\nWrite at 0x00c0001a2000 by goroutine 9:\n"
                  "  github.com/acme/api/pkg/cache.(*LRU).Get()\n      /home/ola/api/pkg/cache/lru.go:41 +0x9c\n"
                  "--- FAIL: TestConcurrentGet (0.02s)\n    testing.go:1465: race detected during execution of test\n"
                  "FAIL\tgithub.com/acme/api/pkg/cache\t0.051s", "metadata": {"exit_code": 1, "duration_seconds": 1.9}})})
    msg = ("`LRU.Get` moves the entry to the front of the list, which is a write, while holding only the read "
           "lock. I'll take the write lock in Get.")
    rec("event_msg", {"type": "agent_message", "message": msg})
    rec("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": msg}]})
    patch = ("*** Begin Patch\n*** Update File: pkg/cache/lru.go\n@@ func (c *LRU) Get(key string) (any, bool) {\n"
             "-\tc.mu.RLock()\n-\tdefer c.mu.RUnlock()\n+\tc.mu.Lock()\n+\tdefer c.mu.Unlock()\n*** End Patch")
    rec("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": "call_2",
                          "name": "apply_patch", "input": patch})
    rec("response_item", {"type": "custom_tool_call_output", "call_id": "call_2",
                          "output": "Success. Updated the following files:\nM pkg/cache/lru.go\n"})
    rec("response_item", {"type": "function_call", "name": "shell", "call_id": "call_3",
                          "arguments": json.dumps({"command": ["bash", "-lc", "go test -race ./pkg/cache/..."]})})
    rec("response_item", {"type": "function_call_output", "call_id": "call_3", "output": json.dumps({
        "output": "ok  \tgithub.com/acme/api/pkg/cache\t1.204s", "metadata": {"exit_code": 0}})})
    rec("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 20311}}})
    final = ("Fixed the data race in `pkg/cache/lru.go`: `Get` reorders the LRU list, so it now takes the "
             "exclusive `sync.Mutex` lock instead of the read lock. `go test -race ./pkg/cache/...` passes.")
    rec("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                                               "text": final}]})
    rec("event_msg", {"type": "task_complete", "last_agent_message": final})
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in lines)
    return text, [
        fact("request", "race detector", "pkg/cache"),
        fact("command", "go test -race ./pkg/cache/..."),
        fact("file", "pkg/cache/lru.go"),
        fact("error", "DATA RACE", section=KL),
        fact("fix", "DATA RACE", "pkg/cache/lru.go", section=KL),
        fact("outcome", "sync.Mutex"),
    ]


# ---------------------------------------------------------------- held out
# Written after the capture code was frozen and never used to change it: their recall is
# reported on its own line in bench/RESULTS.md.

def heldout_script_unicode() -> tuple[Transcript, list[Fact]]:
    t = Transcript("4e5f6a7b-8c9d-4e0f-a1b2-c3d4e5f6a7b8", "/home/ines/reports", "main",
                   "2026-11-22T15:03:11.000Z")
    t.user("The nightly export script crashes since we added customers from Köln. Please make it "
           "work and add a regression test.")
    t.bash("python scripts/export.py --since 2026-11-01 --out /tmp/export.csv",
           "Traceback (most recent call last):\n  File \"/home/ines/reports/scripts/export.py\", line 58, in "
           "<module>\n    main()\n  File \"/home/ines/reports/scripts/export.py\", line 51, in main\n"
           "    handle.write(row)\nUnicodeEncodeError: 'ascii' codec can't encode character '\\xf6' in "
           "position 14: ordinal not in range(128)", exit_code=1)
    t.read("/home/ines/reports/scripts/export.py", "def main():\n    with open(args.out, 'w') as handle:\n")
    t.say("`open()` uses the locale's encoding, which is ASCII on the cron host (LANG is unset). The file "
          "must be opened with `encoding=\"utf-8\"`.")
    t.edit("/home/ines/reports/scripts/export.py", "open(args.out, 'w')", "open(args.out, 'w', encoding='utf-8')")
    t.bash("LANG=C python scripts/export.py --since 2026-11-01 --out /tmp/export.csv", "wrote 1832 rows")
    t.write("/home/ines/reports/tests/test_export.py", "def test_export_non_ascii(tmp_path, monkeypatch):\n"
            "    monkeypatch.setenv('LANG', 'C')\n")
    t.bash("python -m pytest -q tests/test_export.py", "..\n2 passed in 0.35s")
    t.say("The export works again: it opened its output with the locale's encoding (ASCII on the cron host), "
          "so 'Köln' crashed it. It now writes UTF-8 explicitly, and tests/test_export.py runs it under "
          "LANG=C with a non-ASCII customer.")
    t.end_turn(95_000)
    return t, [
        fact("request", "export script", "regression test"),
        fact("command", "python scripts/export.py --since 2026-11-01"),
        fact("file", "scripts/export.py"),
        fact("file", "tests/test_export.py"),
        fact("error", "UnicodeEncodeError", section=KL),
        fact("fix", "UnicodeEncodeError", "scripts/export.py", section=KL),
        fact("outcome", "UTF-8"),
    ]


def heldout_port_in_use() -> tuple[Transcript, list[Fact]]:
    t = Transcript("7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d", "/home/tom/shop", "dev", "2026-11-22T18:20:00.000Z")
    t.user("Start the local stack with docker compose and check that the API answers.")
    t.bash("docker compose up -d", "[+] Running 2/3\n ✔ Container shop-redis-1  Started\n ✘ Container shop-db-1  "
           "Error\nError response from daemon: driver failed programming external connectivity on endpoint "
           "shop-db-1: Bind for 0.0.0.0:5432 failed: port is already allocated", exit_code=1)
    t.bash("docker ps --format '{{.Names}} {{.Ports}}'", "legacy-postgres 0.0.0.0:5432->5432/tcp")
    t.say("An old container, legacy-postgres, already holds port 5432.")
    t.bash("docker stop legacy-postgres", "legacy-postgres")
    t.bash("docker compose up -d", "[+] Running 3/3\n ✔ Container shop-db-1  Started\n ✔ Container shop-api-1  Started")
    t.bash("curl -s localhost:8080/health", "{\"status\":\"ok\",\"db\":\"up\"}")
    t.say("The stack is up and /health answers ok.")
    t.end_turn(40_000)
    t.user("Why was legacy-postgres running at all?")
    t.say("It was started with `--restart unless-stopped`, so Docker brings it back after every reboot. "
          "Remove it with `docker rm -f legacy-postgres` if nothing else needs it.")
    t.end_turn(6_000)
    return t, [
        fact("request", "docker compose"),
        fact("request", "legacy-postgres"),
        fact("command", "docker stop legacy-postgres"),
        fact("error", "port is already allocated", section=KL),
        fact("fix", "port is already allocated", "docker stop legacy-postgres", section=KL),
        fact("outcome", "unless-stopped"),
    ]


def heldout_codex_terraform() -> tuple[str, list[Fact]]:
    sid = "019a5d3f-8e2c-7d4f-a031-6c7b8d9e0f1a"
    out: list[dict[str, Any]] = []

    def rec(kind: str, payload: dict[str, Any]) -> None:
        out.append({"timestamp": f"2026-11-22T11:{len(out):02d}:00.000Z", "type": kind, "payload": payload})

    rec("session_meta", {"id": sid, "cwd": "/home/li/infra", "cli_version": "0.64.1", "git": {"branch": "s3-logs"}})
    ask = "terraform plan fails after I added access logging to the assets bucket. Fix main.tf."
    rec("event_msg", {"type": "user_message", "message": ask})
    rec("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ask}]})
    rec("response_item", {"type": "function_call", "name": "exec_command", "call_id": "e1",
                          "arguments": json.dumps({"cmd": "terraform plan -no-color", "workdir": "/home/li/infra"})})
    rec("response_item", {"type": "function_call_output", "call_id": "e1", "output":
        "Exit code: 1\nWall time: 4.2 seconds\nOutput:\nError: Unsupported argument\n\n  on main.tf line 14, in "
        "resource \"aws_s3_bucket\" \"assets\":\n  14:   logging {\n\nAn argument named \"logging\" is not expected "
        "here. Use the aws_s3_bucket_logging resource instead."})
    rec("event_msg", {"type": "agent_message", "message": "AWS provider v5 moved bucket logging to its own "
                      "resource, aws_s3_bucket_logging."})
    patch = ("*** Begin Patch\n*** Update File: main.tf\n@@\n-  logging {\n-    target_bucket = "
             "aws_s3_bucket.logs.id\n-  }\n*** Add File: logging.tf\n+resource \"aws_s3_bucket_logging\" "
             "\"assets\" {\n+}\n*** End Patch")
    rec("response_item", {"type": "custom_tool_call", "call_id": "p1", "name": "apply_patch", "input": patch})
    rec("response_item", {"type": "custom_tool_call_output", "call_id": "p1", "output": "Success."})
    rec("response_item", {"type": "function_call", "name": "exec_command", "call_id": "e2",
                          "arguments": json.dumps({"cmd": "terraform validate && terraform plan -no-color"})})
    rec("response_item", {"type": "function_call_output", "call_id": "e2", "output":
        "Exit code: 0\nOutput:\nSuccess! The configuration is valid.\nPlan: 1 to add, 1 to change, 0 to destroy."})
    final = ("main.tf no longer sets `logging` inside aws_s3_bucket (removed in AWS provider v5); the new "
             "logging.tf declares aws_s3_bucket_logging. terraform plan: 1 to add, 1 to change, 0 to destroy.")
    rec("event_msg", {"type": "task_complete", "last_agent_message": final})
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in out), [
        fact("request", "terraform plan", "main.tf"),
        fact("command", "terraform plan"),
        fact("file", "main.tf"),
        fact("file", "logging.tf"),
        fact("error", "Unsupported argument", section=KL),
        fact("fix", "Unsupported argument", "main.tf", section=KL),
        fact("outcome", "aws_s3_bucket_logging"),
    ]


HELD_OUT = ("heldout-script-unicode", "heldout-port-in-use", "heldout-codex-terraform")

SESSIONS: dict[str, Callable[[], tuple[Any, list[Fact]]]] = {
    "fix-failing-test": fix_failing_test,
    "feature-across-files": feature_across_files,
    "chase-incident": chase_incident,
    "question-no-tools": question_no_tools,
    "long-session-compaction": long_session,
    "subagent-rename": with_subagent,
    "setup-project": setup_project,
    "broken-build": broken_build,
    "cleanup-machine": cleanup_machine,
    "migration-with-secrets": migration_with_secrets,
    "slash-command-plan": slash_command_plan,
    "codex-data-race": codex_session,
    "heldout-script-unicode": heldout_script_unicode,
    "heldout-port-in-use": heldout_port_in_use,
    "heldout-codex-terraform": heldout_codex_terraform,
}


def build() -> dict[str, Any]:
    """Every session as (file name -> JSONL text) and the facts file's content."""
    files: dict[str, str] = {}
    facts: dict[str, Any] = {}
    for name, make in SESSIONS.items():
        made, session_facts = make()
        text = made if isinstance(made, str) else made.jsonl()
        files[f"{name}.jsonl"] = text
        facts[name] = {"file": f"{name}.jsonl", "facts": session_facts}
    facts["_secrets"] = {"migration-with-secrets": SECRETS}
    return {"files": files, "facts": facts}


def main() -> None:
    made = build()
    (OUT / "transcripts").mkdir(parents=True, exist_ok=True)
    for name, text in made["files"].items():
        (OUT / "transcripts" / name).write_text(text, encoding="utf-8")
    (OUT / "facts.json").write_text(json.dumps(made["facts"], indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(made['files'])} transcripts to {OUT / 'transcripts'} and {OUT / 'facts.json'}")


if __name__ == "__main__":
    main()
