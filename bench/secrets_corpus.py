"""A labelled corpus for the secret masker (memcli/secrets.py): synthetic secrets in the
shapes real ones have, planted in the sentences agents write into memories, and ordinary
memory text that talks about secrets without holding one.

Every secret here is generated from a seeded RNG with the alphabet and length of its
format: none is a real key, and the file holds no literal key for a scanner to flag. Used by
`tests/test_secrets.py` (each sample masked, each ordinary text left alone) and by
`bench/secrets_bench.py` (the figures in bench/RESULTS.md).
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass

_RNG = random.Random(20261122)
_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "-_"
_HEX = "0123456789abcdef"
_UPPER = string.ascii_uppercase + string.digits


def _r(alphabet: str, n: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def _b64(n: int) -> str:
    return base64.b64encode(bytes(_RNG.randrange(256) for _ in range(n))).decode()


@dataclass(frozen=True)
class Sample:
    kind: str
    text: str  # as it would appear in a memory or a transcript
    secret: str  # the part that must not survive masking


def _s(kind: str, template: str, secret: str) -> Sample:
    return Sample(kind, template.format(s=secret), secret)


_PEM_BODY = "\n".join(_b64(48) for _ in range(4))
_PEM = "-----BEGIN " + "PRIVATE KEY-----\n" + _PEM_BODY + "\n-----END " + "PRIVATE KEY-----"
_SA_KEY = _PEM.replace("\n", "\\n")
_JWT = ("eyJ" + _r(_URLSAFE, 30) + "." + "eyJ" + _r(_URLSAFE, 60) + "." + _r(_URLSAFE, 43))
_DISCORD_BOT = "M" + _r(_URLSAFE, 25) + "." + _r(_URLSAFE, 6) + "." + _r(_URLSAFE, 38)

SAMPLES: list[Sample] = [
    # cloud keys
    _s("google-api-key", "Maps calls use key {s} from the console", "AIza" + _r(_URLSAFE, 35)),
    _s("google-api-key-url", "GET https://maps.googleapis.com/maps/api/geocode/json?key={s}",
       "AIza" + _r(_URLSAFE, 35)),
    _s("google-oauth-secret", "client secret for the web app: {s}", "GOCSPX-" + _r(_URLSAFE, 28)),
    _s("google-oauth-token", "curl -H 'Authorization: OAuth {s}' ...", "ya29." + _r(_URLSAFE, 60)),
    _s("gcp-service-account-json",
       '{{"type": "service_account", "project_id": "demo", "private_key": "{s}"}}', _SA_KEY),
    _s("gcp-private-key-id", '"private_key_id": "{s}",', _r(_HEX, 40)),
    _s("azure-storage-conn", "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey={s};"
       "EndpointSuffix=core.windows.net", _b64(64)),
    _s("azure-servicebus", "Endpoint=sb://demo.servicebus.windows.net/;SharedAccessKeyName=root;"
       "SharedAccessKey={s}", _b64(32)),
    _s("azure-sas-url", "upload to https://demo.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig={s}",
       _r(_ALNUM, 43) + "%3D"),
    _s("aws-access-key-id", "the CI user has {s}", "AKIA" + _r(_UPPER, 16)),
    _s("aws-secret-env", "export AWS_SECRET_ACCESS_KEY={s}", _r(_ALNUM + "/+", 40)),
    _s("aws-presigned", "https://b.s3.amazonaws.com/k?X-Amz-Credential=x&X-Amz-Signature={s}", _r(_HEX, 64)),
    # payment
    _s("stripe-live", "charge with {s} in prod", "sk_" + "live_" + _r(_ALNUM, 24)),
    _s("stripe-test", "STRIPE_KEY={s}", "sk_" + "test_" + _r(_ALNUM, 24)),
    _s("stripe-restricted", "the reporting job uses {s}", "rk_" + "live_" + _r(_ALNUM, 24)),
    _s("stripe-webhook", "webhook signing secret {s}", "whsec_" + _r(_ALNUM, 32)),
    _s("square", "square token {s}", "sq0atp-" + _r(_URLSAFE, 22)),
    # forges and registries
    _s("github-pat", "git clone https://{s}@github.com/org/repo", "ghp_" + _r(_ALNUM, 36)),
    _s("github-fine-grained", "GH_TOKEN={s}", "github_pat_" + _r(_ALNUM + "_", 82)),
    _s("gitlab-pat", "gitlab token {s} expires in May", "glpat-" + _r(_URLSAFE, 20)),
    _s("gitlab-runner", "registered with {s}", "GR1348941" + _r(_URLSAFE, 20)),
    _s("gitlab-deploy", "deploy token {s}", "gldt-" + _r(_URLSAFE, 20)),
    _s("npm", "//registry.npmjs.org/:_authToken={s}", "npm_" + _r(_ALNUM, 36)),
    _s("npm-prose", "publish with {s} from the release box", "npm_" + _r(_ALNUM, 36)),
    _s("pypi", "twine upload -u __token__ -p {s}", "pypi-" + _r(_URLSAFE, 80)),
    _s("pypi-prose", "the PyPI token is {s}", "pypi-" + _r(_URLSAFE, 80)),
    _s("huggingface", "HF token {s}", "hf_" + _r(_ALNUM, 34)),
    # mail and chat
    _s("sendgrid", "SENDGRID_API_KEY={s}", "SG." + _r(_URLSAFE, 22) + "." + _r(_URLSAFE, 43)),
    _s("sendgrid-prose", "mail goes out through {s}", "SG." + _r(_URLSAFE, 22) + "." + _r(_URLSAFE, 43)),
    _s("mailgun", "mailgun api {s}", "key-" + _r(_HEX, 32)),
    _s("slack-webhook", "alerts post to {s}", "https://hooks.slack.com/services/T" + _r(_UPPER, 8) + "/B"
       + _r(_UPPER, 10) + "/" + _r(_ALNUM, 24)),
    _s("slack-bot", "bot token {s}", "xox" + "b-" + _r(string.digits, 12) + "-" + _r(string.digits, 13) + "-"
       + _r(_ALNUM, 24)),
    _s("slack-app", "socket mode with {s}", "xapp-1-" + _r(_UPPER, 11) + "-" + _r(string.digits, 13) + "-"
       + _r(_HEX, 64)),
    _s("discord-webhook", "post release notes to {s}", "https://discord.com/api/webhooks/"
       + _r(string.digits, 18) + "/" + _r(_URLSAFE, 68)),
    _s("discord-bot", "DISCORD_TOKEN={s}", _DISCORD_BOT),
    _s("discord-bot-prose", "the bot logs in with {s}", _DISCORD_BOT),
    _s("twilio-api-key", "twilio key {s}", "SK" + _r(_HEX, 32)),
    _s("twilio-account", "account {s} sends the SMS", "AC" + _r(_HEX, 32)),
    _s("twilio-auth-token", "TWILIO_AUTH_TOKEN={s}", _r(_HEX, 32)),
    _s("telegram", "bot {s} posts the alerts", _r(string.digits, 10) + ":AA" + _r(_URLSAFE, 33)),
    # AI providers
    _s("anthropic", "ANTHROPIC_API_KEY={s}", "sk-" + "ant-api03-" + _r(_URLSAFE, 93)),
    _s("openai", "use {s} for the embeddings job", "sk-" + "proj-" + _r(_URLSAFE, 48)),
    # tokens and keys in general
    _s("jwt", "the session cookie was {s}", _JWT),
    _s("bearer", "curl -H 'Authorization: Bearer {s}' https://api.example.com/v1/jobs", _r(_ALNUM, 40)),
    _s("pem", "deploy key:\n{s}\nkeep it safe", _PEM),
    _s("url-credentials", "DATABASE_URL=postgres://app:{s}@db.internal:5432/app", _r(_ALNUM, 18)),
    _s("redis-url", "cache at redis://default:{s}@cache.internal:6379/0", _r(_ALNUM, 24)),
    # .env style
    _s("env-secret-key", "SECRET_KEY={s}", _r(_ALNUM + "!@#%^&*", 50)),
    _s("env-quoted", 'DJANGO_SECRET="{s}"', _r(_ALNUM, 40)),
    _s("env-export", "export DB_PASS={s}", _r(_ALNUM, 16)),
    _s("env-dsn", "SENTRY_DSN={s}", "https://" + _r(_HEX, 32) + "@o123.ingest.sentry.io/42"),
    _s("env-signing", "WEBHOOK_SIGNING_KEY={s}", _r(_ALNUM, 32)),
    _s("env-cookie", "SESSION_COOKIE={s}", _r(_ALNUM, 32)),
    _s("yaml-password", "db:\n  user: app\n  password: {s}\n", _r(_ALNUM, 14)),
    _s("json-token", '{{"client_id": "web", "client_secret": "{s}"}}', _r(_ALNUM, 32)),
    _s("next-line", "api_key:\n  {s}\nregion: eu-west-1", _r(_ALNUM, 32)),
    _s("next-line-quoted", "token:\n    \"{s}\"\n", _r(_ALNUM, 28)),
    _s("cli-flag", "mysqldump --password={s} app > dump.sql", _r(_ALNUM, 12)),
    _s("header", "X-API-Key: {s}", _r(_ALNUM, 32)),
    # prose
    _s("prose-admin-password", "the admin password is {s}", "Wint3r-" + _r(_ALNUM, 6)),
    _s("prose-password-sentence", "Note: the staging password is {s}. Rotate it monthly.",
       "Stg#" + _r(_ALNUM, 8)),
    _s("prose-password-was", "the old root password was {s} until March", "r00t" + _r(_ALNUM, 6)),
    _s("prose-passphrase", "unlock the backup with passphrase {s}",
       "blue-" + _r(string.ascii_lowercase, 5) + "-42"),
    _s("prose-passphrase-quoted", "the passphrase is '{s}'", "correct horse battery staple"),
    _s("prose-x-api-key", "send the x-api-key header value {s} with every call", _r(_ALNUM, 32)),
    _s("prose-api-key-for", "the API key for the billing service is {s}", _r(_ALNUM, 24)),
    _s("prose-token-set-to", "I set the token to {s} for the demo", _r(_ALNUM, 20)),
    _s("prose-pin", "the door PIN code is {s}", "4" + _r(string.digits, 5) + "#"),
    _s("prose-secret-colon", "Secret: {s}", _r(_ALNUM, 18)),
    _s("prose-credentials", "credentials are {s}", "svc_deploy:" + _r(_ALNUM, 12)),
    _s("prose-backticks", "the password is `{s}`", "hunter2hunter2"),
]

# Memory text that talks about secrets without holding one: what an agent writes about
# auth, rotation and tooling. Nothing here may be masked.
ORDINARY: list[str] = [
    "The password policy requires 12 characters and one symbol.",
    "The password is stored in the team vault, never in the repo.",
    "The admin password is rotated every 90 days by the platform team.",
    "Password is required for the staging database since the migration.",
    "The API key is missing from the CI environment, so the deploy job fails.",
    "Rotate the API key every 90 days; tokens expire after 1h.",
    "The token was expired, so the job retried with a fresh one.",
    "Use token_sort_ratio for scoring near-duplicates.",
    "token_sort_ratio: 0.8",
    'scorer = "token_sort_ratio"',
    "Bearer token authentication is configured in the gateway.",
    "the bearer of bad news arrived late",
    "Secrets live in AWS Secrets Manager under /prod/app.",
    "The secret key is managed by Vault and injected at start-up.",
    "Never commit .env files; the pre-commit hook scans for keys.",
    "AKIA prefixes mark long-term AWS keys; ASIA ones are temporary.",
    "A JWT header starts with eyJ by convention.",
    "Stripe test keys start with sk_test and live keys with sk_live.",
    "GitLab personal access tokens start with glpat-.",
    "The npm token lives in ~/.npmrc on the release machine only.",
    "Slack webhooks are configured per channel in the alerts repo.",
    "The passphrase protects the backup archive; ask ops for it.",
    "Passwords must not be logged; the logger masks them.",
    "password: required",
    "api_key: null",
    "token: <redacted>",
    "The x-api-key header is checked by the gateway before routing.",
    "credentials are mounted from a Kubernetes secret named app-creds.",
    "the PIN code is printed on the back of the badge",
    "Set GITHUB_TOKEN in the workflow secrets, not in the YAML.",
    "MAX_TOKENS=1024 keeps the summaries short.",
    "CACHE_KEY=v2 invalidates the old build cache.",
    "author: alice",
    "see https://example.com/docs/auth for details",
    "merged mem_01JD3Z7Q9K8V5T2N4M6P0R1S3A into mem_01JD3Z7Q9K8V5T2N4M6P0R1S3B",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "commit 3f2a9c1 fixed the flaky test in test_billing.py",
    "Deploy to staging before production.",
    "Run the database migrations on staging first, then deploy the build to production.",
    "The build failed at step 14: missing libpq-dev in the Docker image.",
    "Page the secondary when the primary does not answer in ten minutes.",
    "Use the read replica for analytics queries after 18:00 UTC.",
    "Kubernetes pods restart when the liveness probe fails three times.",
    "The retry budget is 3 attempts with exponential backoff from 200 ms.",
    "Feature flag checkout_v2 is on for 10% of users in EU.",
    "Redis eviction policy is allkeys-lru on the cache cluster.",
    "Alice prefers squash merges and short commit messages.",
    "The incident on 2026-10-02 was caused by a schema change without an index.",
    "Timeout for the payments API is 30 s; the worker retries twice.",
    "The OAuth flow uses PKCE; no client secret in the mobile app.",
    "Tokens are validated with the JWKS endpoint of the identity provider.",
    "The signing key rotates weekly; old keys stay valid for a day.",
    "Use `git push --force-with-lease`, never plain --force.",
    "Disk usage alert fires at 85% on the build agents.",
    "postgres://db.internal:5432/app is the primary; no password in the URL.",
    "The session cookie is HttpOnly and SameSite=Lax.",
    "Ask in #platform before changing the Terraform state bucket.",
    "The backup job runs at 02:00 and keeps 14 daily snapshots.",
    "ghp tokens are deprecated in favour of fine-grained tokens here.",
    "The secret scanner flagged a test fixture; it was a false positive.",
]
