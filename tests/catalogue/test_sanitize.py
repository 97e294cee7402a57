"""safe_excerpt sanitiser: what is redacted, what survives, bounds, idempotence, speed."""

from __future__ import annotations

import random
import string
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalogue.sanitize import MAX_EXCERPT_BYTES, _redact, sanitize

KEY_ALPHABET = string.ascii_letters + string.digits + "_-"
ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"


def body(length: int, alphabet: str = ALNUM, seed: int = 7) -> str:
    """A deterministic pseudo-random secret body (tests must not depend on luck)."""
    rng = random.Random(f"{seed}-{length}-{alphabet}")
    return "".join(rng.choice(alphabet) for _ in range(length))


def windows(secret: str, width: int = 12) -> list[str]:
    return [secret[i : i + width] for i in range(max(1, len(secret) - width + 1))]


def assert_gone(secret: str, output: str) -> None:
    leaked = [w for w in windows(secret) if w in output]
    assert not leaked, f"secret fragments {leaked!r} survived in {output!r}"


# (text, secret part that must vanish, text that must remain)
REDACTED: list[tuple[str, str, str]] = [
    # provider API keys
    (f"key sk-ant-api03-{body(93, KEY_ALPHABET)}AA end", body(93, KEY_ALPHABET), "sk-ant-api03-"),
    (f"oauth sk-ant-oat01-{body(80, KEY_ALPHABET)} end", body(80, KEY_ALPHABET), "sk-ant-oat01-"),
    (f"Incorrect API key provided: sk-{body(48)}.", body(48), "Incorrect API key provided: sk-"),
    (f"project key sk-proj-{body(120, KEY_ALPHABET)} x", body(120, KEY_ALPHABET), "sk-proj-"),
    (f"service sk-svcacct-{body(60, KEY_ALPHABET)} x", body(60, KEY_ALPHABET), "sk-svcacct-"),
    (f"router sk-or-v1-{body(64, HEX)} x", body(64, HEX), "sk-or-v1-"),
    (f"?key=AIza{body(35, KEY_ALPHABET)}", body(35, KEY_ALPHABET), ""),
    (f"google AIza{body(35, KEY_ALPHABET)} x", body(35, KEY_ALPHABET), "google AIza"),
    (f"groq gsk_{body(52)} x", body(52), "groq gsk_"),
    (f"xai xai-{body(80)} x", body(80), "xai xai-"),
    (f"aws AKIA{body(16, UPPER_ALNUM)} x", body(16, UPPER_ALNUM), "aws AKIA"),
    (f"sts ASIA{body(16, UPPER_ALNUM)} x", body(16, UPPER_ALNUM), "sts ASIA"),
    (f"aws_secret_access_key = {body(40, ALNUM + '/+')}", body(40, ALNUM + "/+"), "aws_secret"),
    (f'"SecretAccessKey": "{body(40, ALNUM + "/+")}"', body(40, ALNUM + "/+"), "SecretAccessKey"),
    (f"gh ghp_{body(36)} x", body(36), "gh ghp_"),
    (f"gh gho_{body(36)} x", body(36), "gh gho_"),
    (f"gh ghu_{body(36)} x", body(36), "gh ghu_"),
    (f"gh ghs_{body(36)} x", body(36), "gh ghs_"),
    (f"gh ghr_{body(36)} x", body(36), "gh ghr_"),
    (f"pat github_pat_{body(82, ALNUM + '_')} x", body(82, ALNUM + "_"), "pat github_pat_"),
    (f"hf hf_{body(34)} x", body(34), "hf hf_"),
    (f"replicate r8_{body(37)} x", body(37), "replicate r8_"),
    (f"pplx pplx-{body(48)} x", body(48), "pplx pplx-"),
    (f"slack xoxb-{body(50, ALNUM + '-')} x", body(50, ALNUM + "-"), "slack xoxb-"),
    (f"slack xoxp-{body(50, ALNUM + '-')} x", body(50, ALNUM + "-"), "slack xoxp-"),
    (f"stripe sk_live_{body(24)} x", body(24), "stripe sk_live_"),
    (f"stripe rk_live_{body(24)} x", body(24), "stripe rk_live_"),
    (f"google ya29.{body(120, KEY_ALPHABET)} x", body(120, KEY_ALPHABET), "google ya29."),
    (
        f"jwt eyJhbGciOiJIUzI1NiJ9.eyJ{body(40, KEY_ALPHABET)}.{body(43, KEY_ALPHABET)} x",
        body(40, KEY_ALPHABET),
        "jwt ",
    ),
    (f"Invalid API key {body(40, HEX)} for project", body(40, HEX), "Invalid API key "),
    (f"client secret: {body(32, HEX)}", body(32, HEX), "client secret"),
    (f"desk-top-sk-proj-{body(40)} x", body(40), "desk-top-sk-proj-"),
    # bearer and basic credentials
    (f"curl -H 'Bearer {body(40)}' x", body(40), "Bearer "),
    (f"bearer {body(20, ALNUM + '._~+/-')}= end", body(20, ALNUM + "._~+/-"), "bearer "),
    ("Basic dXNlcjpwYXNzd29yZA== sent", "dXNlcjpwYXNzd29yZA", "Basic "),
    # headers as lines, JSON, escaped JSON and Python byte tuples
    (f"Authorization: Bearer {body(30)}\nnext", body(30), "Authorization: "),
    (f"proxy-authorization: Basic {body(24)}\nnext", body(24), "proxy-authorization: "),
    (f"Cookie: session={body(30)}; csrftoken=x\nnext", body(30), "Cookie: "),
    (f"set-cookie: __cf_bm={body(40)}; path=/\nnext", body(40), "set-cookie: "),
    (f"x-api-key: {body(30)}\nnext", body(30), "x-api-key: "),
    (f"api-key: {body(30)}\nnext", body(30), "api-key: "),
    (f'{{"authorization": "Bearer {body(30)}", "x": 1}}', body(30), '"x": 1'),
    (f'{{\\"x-api-key\\": \\"{body(30)}\\"}}', body(30), '\\"x-api-key\\": \\"'),
    (f"[(b'authorization', b'Bearer {body(30)}')]", body(30), "(b'authorization', b'"),
    (f"[(b'x-api-key', b'{body(30)}'), (b'accept', b'*/*')]", body(30), "(b'accept', b'*/*')"),
    # secret assignments
    (f"password={body(16)}&user=x", body(16), "password="),
    (f"passwd: {body(16)}", body(16), "passwd: "),
    (f'{{"secret": "{body(16)}"}}', body(16), '"secret": "'),
    (f"{{'token': '{body(16)}'}}", body(16), "'token': '"),
    (f"api_key={body(16)}", body(16), "api_key="),
    (f"apikey: {body(16)}", body(16), "apikey: "),
    (f"access_token={body(16)}", body(16), "access_token="),
    (f"refresh_token: {body(16)}", body(16), "refresh_token: "),
    (f"client_secret={body(16)}", body(16), "client_secret="),
    (f"private_key = '{body(16)}'", body(16), "private_key = '"),
    (f"ANTHROPIC_API_KEY={body(16)}", body(16), "ANTHROPIC_API_KEY="),
    (f'export OPENAI_API_KEY="{body(16)}"', body(16), "OPENAI_API_KEY="),
    (f"accessToken: {body(16)}", body(16), "accessToken: "),
    (f"--api-key={body(16)}", body(16), "--api-key="),
    (f"api_key= Bearer {body(30)}", body(30), "api_key= "),
    (f"Bearer Bearer {body(30)}", body(30), "Bearer "),
    (f"\x1b[ Bearer {body(30)}", body(30), "[ Bearer "),
    (f'Cookie:  "password": "{body(24)}"', body(24), '"password": "'),
    (
        f"-----BEGIN RSA PRIVATE KEY-----\n{body(64)}\n{body(64, seed=8)}\n"
        "-----END RSA PRIVATE KEY-----",
        body(64),
        "",
    ),
    # URLs, e-mail addresses, home paths
    (f"https://bob:{body(16)}@db.example.com/x", body(16), "@db.example.com/x"),
    (f"GET https://api.example.com/v1/files?key={body(16)}&x=1 failed", body(16), "/v1/files?"),
    ("contact alice.smith+ops@example.co.uk now", "alice.smith+ops@example", "contact "),
    ("at /home/alicesmith/project/main.py", "alicesmith", "~/project/main.py"),
    ("at /Users/alicesmith/Library/x", "alicesmith", "~/Library/x"),
    ("at C:\\Users\\alicesmith\\AppData\\x", "alicesmith", "~\\AppData\\x"),
    ("at C:/Users/alicesmith/AppData/x", "alicesmith", "~/AppData/x"),
]


@pytest.mark.parametrize(("text", "secret", "kept"), REDACTED)
def test_secret_is_redacted_and_its_context_is_kept(text: str, secret: str, kept: str) -> None:
    output = sanitize(text)
    assert_gone(secret, output)
    assert kept in output
    assert "[REDACTED]" in output or "[EMAIL]" in output or "~" in output


EXACT: list[tuple[str, str]] = [
    ("https://user:pass@host/x", "https://[REDACTED]@host/x"),
    ("https://host/path?key=abc&x=1 ok", "https://host/path?[REDACTED] ok"),
    ("mail alice@example.com.", "mail [EMAIL]."),
    ("/root/.config/x and /home/bob", "~/.config/x and ~"),
    ("Authorization: Bearer abc\nnext", "Authorization: [REDACTED]\nnext"),
    ("(b'authorization', b'Bearer abc')", "(b'authorization', b'[REDACTED]')"),
    ('{"password": "hunter2", "user": "x"}', '{"password": "[REDACTED]", "user": "x"}'),
    ("token=abc secret: def", "token=[REDACTED] secret: [REDACTED]"),
    (f"sk-ant-api03-{body(40, KEY_ALPHABET)}", "sk-ant-api03-[REDACTED]"),
    ("\x1b[31mred\x1b[0m\r\nnext\x00\x07", "red\nnext"),
    ("tab\tkept\nline kept", "tab\tkept\nline kept"),
    ("a\n\n\n\n\n\nb", "a\n\n\nb"),
    ("a\n \n\t\n  \n\nb", "a\n\n\nb"),
    ("a\n\n\nb", "a\n\n\nb"),
    ("lone \ud800 surrogate", "lone  surrogate"),
]


@pytest.mark.parametrize(("text", "expected"), EXACT)
def test_sanitize_produces_the_exact_excerpt(text: str, expected: str) -> None:
    assert sanitize(text) == expected


SURVIVES = [
    "request_id: req_011CXnukXFhq5zC25S7ev2cy",
    "request id: 572c4a16-275a-4be4-9b9f-6577df485f52",
    "cf-ray: 8f3b2a1c9d4e5f60-SJC",
    "Error code: 529 - Overloaded (HTTP 503 Service Unavailable)",
    "Rate limit reached for gpt-4o in organization org-gvAzf6Q9pR7y2UAiI9owd3LF on tokens "
    "per min (TPM): Limit 6000, Requested 12328.",
    "This request would exceed the rate limit of 40,000 input tokens per minute.",
    "max_tokens: 4096 > 2048, prompt is too long: 208310 tokens > 200000 maximum",
    "x-ratelimit-remaining-tokens: 0\nanthropic-ratelimit-tokens-reset: 2025-01-01T00:00:00Z",
    "model: claude-3-5-sonnet-20241022 / gpt-4o / gemini-2.5-pro-preview-05-06",
    "model: us.anthropic.claude-3-7-sonnet-20250219-v1:0",
    "vertex claude-3-5-sonnet@20240620 via @anthropic-ai/claude-code@1.0.3",
    "rate_limit_error overloaded_error invalid_request_error authentication_error",
    "POST https://chatgpt.com/backend-api/codex/responses returned 429",
    "see https://docs.anthropic.com/en/api/rate-limits for details",
    "task-runner desk-top sk-learn risk-free ask-me",
    "Please set OPENAI_API_KEY or $OPENCODE_API_KEY in the environment",
    "Basic authentication failed. Invalid bearer token. Bearer token is missing.",
    "monkey=1 primary_key: id tokens: 5 passes: 3",
    '{"type":"error","error":{"type":"not_found_error","message":"Invalid API key"}}',
    "GET /v1/Users/123/home/profile and src/home/x.py",
    "Retrying in 4 seconds… attempt 4/10",
]


@pytest.mark.parametrize("text", SURVIVES)
def test_diagnostic_text_survives_unchanged(text: str) -> None:
    assert sanitize(text) == text


def test_anthropic_key_is_redacted_but_request_id_survives() -> None:
    text = (
        f"401 invalid x-api-key sk-ant-api03-{body(90, KEY_ALPHABET)} "
        "request_id=req_011CXnukXFhq5zC25S7ev2cy"
    )
    output = sanitize(text)
    assert_gone(body(90, KEY_ALPHABET), output)
    assert "req_011CXnukXFhq5zC25S7ev2cy" in output


def test_short_text_is_returned_without_ellipsis() -> None:
    text = "x" * MAX_EXCERPT_BYTES
    assert sanitize(text) == text


@pytest.mark.parametrize("unit", ["word ", "é", "€", "😀", "a😀", "中文错误"])
def test_long_text_is_cut_on_a_character_boundary_with_an_ellipsis(unit: str) -> None:
    output = sanitize(unit * 5000)
    encoded = output.encode("utf-8")
    assert len(encoded) <= MAX_EXCERPT_BYTES
    assert output.endswith("…")
    assert encoded.decode("utf-8") == output
    assert len(encoded) > MAX_EXCERPT_BYTES - 64


@pytest.mark.parametrize("offset", range(-60, 30, 3))
def test_secret_straddling_the_excerpt_cut_never_leaks(offset: int) -> None:
    secret = body(40, KEY_ALPHABET, seed=offset)
    prefix = "lorem ipsum " * 400
    prefix = prefix[: MAX_EXCERPT_BYTES + offset]
    output = sanitize(f"{prefix} sk-ant-api03-{secret} tail")
    assert_gone(secret, output)
    assert len(output.encode()) <= MAX_EXCERPT_BYTES


def escapes(length: int) -> str:
    """Whole ANSI sequences (stripped to nothing) padded with spaces to `length` characters."""
    return "\x1b[0m" * (length // 4) + " " * (length % 4)


PRECUT = 16 * 1024


@pytest.mark.parametrize("offset", range(-54, -15, 3))  # the cut falls inside the key
def test_secret_straddling_the_input_precut_never_leaks(offset: int) -> None:
    secret = body(40, KEY_ALPHABET, seed=offset)
    output = sanitize(f"{escapes(PRECUT + offset)} sk-ant-api03-{secret} tail")
    assert_gone(secret, output)
    assert output.endswith("…")


@pytest.mark.parametrize(
    ("shown", "secret"),
    [
        (f"AKIA{body(16, UPPER_ALNUM)}", body(16, UPPER_ALNUM)),
        (f"password={body(24)}", body(24)),
        ("alice.smith.jones@example.com", "alice.smith.jones@example.com"),
        (f"ghp_{body(36)}", body(36)),
        (f"https://bob:{body(20)}@host/", body(20)),
        (f"eyJhbGciOiJIUzI1NiJ9.eyJ{body(30)}.{body(30, seed=9)}", body(30)),
    ],
)
def test_partial_secret_at_the_input_precut_is_dropped(shown: str, secret: str) -> None:
    for kept in range(1, len(shown)):
        output = sanitize(f"{escapes(PRECUT - kept - 1)} {shown} more")
        assert_gone(secret, output)


def test_output_ending_in_a_cut_header_is_a_fixed_point() -> None:
    text = "x " * 2040 + "Cookie: session=" + body(80) + "\n" + "y " * 100  # cut in the marker
    output = sanitize(text)
    assert sanitize(output) == output
    assert_gone(body(80), output)


# --------------------------------------------------------------------------- properties

FRAGMENTS = [
    *("sk-ant-api03-", "sk-", "sk-proj-", "AKIA", "ghp_", "gsk_", "eyJ", "ya29.", "AIza"),
    *("Bearer ", "Basic ", "Authorization: ", "Cookie: ", "password=", '"token": "'),
    *("'secret': '", "api_key=", "apiKey:", "https://", "user:pw@", "?q=1", "@example.com"),
    *("alice", "/home/", "/Users/", "C:\\Users\\", "/root", "[REDACTED]", "[REDAC", "[EMAIL]"),
    *("~", "…", "\n", "\n\n\n\n", "\n \n", " ", "\t", "\x1b[31m", "\x1b]", "\x00", "\r"),
    *("é", "😀", "İ", "-----BEGIN PRIVATE KEY-----", "=", ":", ",", '"', "'", "\\", "(b'"),
    *("-", "_", ".", "token", "tokens", "secret", "passwd", "AKIAIOSFODNN7EXAMPLE", "xoxb-"),
]
FRAGMENT_TEXT = st.lists(
    st.one_of(
        st.sampled_from(FRAGMENTS),
        st.text(alphabet=KEY_ALPHABET, min_size=1, max_size=45),
        st.text(max_size=8),
    ),
    max_size=40,
).map("".join)
NEAR_CUTS = st.builds(
    lambda words, tail: "lorem ipsum " * words + tail,
    st.sampled_from([330, 335, 340, 1360, 1370]),
    FRAGMENT_TEXT,
)
ANY_TEXT = st.one_of(st.text(), FRAGMENT_TEXT, NEAR_CUTS)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_bounded(output: str) -> None:
    encoded = output.encode("utf-8")  # raises on lone surrogates: the output must be valid
    assert len(encoded) <= MAX_EXCERPT_BYTES


@PROPERTY
@given(ANY_TEXT)
def test_sanitize_never_raises_and_stays_within_the_byte_bound(text: str) -> None:
    assert_bounded(sanitize(text))


@PROPERTY
@given(st.binary(max_size=6000))
def test_sanitize_accepts_any_bytes_decoded_with_replacement(raw: bytes) -> None:
    assert_bounded(sanitize(raw.decode("utf-8", errors="replace")))


@PROPERTY
@given(ANY_TEXT)
def test_sanitize_is_idempotent(text: str) -> None:
    once = sanitize(text)
    assert sanitize(once) == once


def canary_secret(kind: str, rng: random.Random) -> tuple[str, str]:
    """A fresh secret of `kind`, as it would appear in text, and its distinctive body."""

    def pick(n: int, alphabet: str = ALNUM) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    secret = pick(40)
    forms = {
        "anthropic": ("sk-ant-api03-{s}", pick(40, KEY_ALPHABET)),
        "openai": ("sk-proj-{s}", pick(48, KEY_ALPHABET)),
        "aws": ("AKIA{s}", pick(16, UPPER_ALNUM)),
        "github": ("ghp_{s}", pick(36)),
        "google": ("AIza{s}", pick(35, KEY_ALPHABET)),
        "email": ("{s}@example-mail.com", pick(14, string.ascii_lowercase) + "." + pick(8)),
        "bearer": ("Authorization: Bearer {s}", secret),
        "bare_bearer": ("Bearer {s}", secret),
        "password": ("password={s}", pick(24)),
        "json_password": ('"password": "{s}"', pick(24)),
        "cookie": ("Cookie: sid={s}; theme=dark", secret),
        "url_userinfo": ("https://admin:{s}@db.internal/x", pick(24)),
    }
    template, value = forms[kind]
    return template.format(s=value), value


CANARY_KINDS = [
    "anthropic", "openai", "aws", "github", "google", "email", "bearer", "bare_bearer",
    "password", "json_password", "cookie", "url_userinfo",
]  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(CANARY_KINDS),
    seed=st.integers(0, 2**32),
    before=st.text(max_size=60),
    after=st.text(max_size=60),
    gap=st.sampled_from(["\n", " ", "\t", " \n "]),
    padding=st.one_of(
        st.integers(0, 200),
        st.integers(MAX_EXCERPT_BYTES - 120, MAX_EXCERPT_BYTES + 20),
        st.integers(16 * 1024 - 120, 16 * 1024 + 10),
    ),
)
def test_seeded_secret_canary_never_survives(
    *, kind: str, seed: int, before: str, after: str, gap: str, padding: int
) -> None:
    shown, secret = canary_secret(kind, random.Random(seed))
    filler = ("lorem ipsum dolor " * (padding // 18 + 1))[:padding]
    output = sanitize(f"{filler}{before}{gap}{shown}{gap}{after}")
    assert_gone(secret, output)


ADVERSARIAL = {
    "sk": "sk-" * 350_000,
    "sk_spaced": "sk-a " * 210_000,
    "email": "a@" * 525_000,
    "dotted_email": "a.a@a.a" * 150_000,
    "home": "/home/" * 175_000,
    "bearer": "Bearer " * 150_000,
    "token_assignments": "token: " * 150_000,
    "quoted_header": '"authorization": "' * 60_000,
    "url": "http://a:b" * 105_000,
    "query": "http://a?" * 117_000,
    "jwt": "eyJaaaaaaaaaa." * 75_000,
    "blank_lines": "\n \n" * 350_000,
    "escapes": "\x1b[" * 525_000,
    "name_segments": "a-" * 525_000 + "password=x",
    "header_lines": "cookie: " * 131_072,
    "rejected_names": "xcookie: " * 116_500,
    "prose_values": "token." * 175_000,
    "quoted_keys": '"password": "' * 80_000,
    "header_tuples": "(b'cookie', b'" * 75_000,
    "windows_homes": "C:\\Users\\" * 100_000,
    "long_local_part": ("a" * 50_000 + "@b.co ") * 20,
    "random": random.Random(3).randbytes(1 << 20).decode("utf-8", errors="replace"),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_megabyte_input_finishes_quickly(name: str) -> None:
    text = ADVERSARIAL[name]
    started = time.perf_counter()
    output = sanitize(text)
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0  # guards against catastrophic backtracking only
    assert_bounded(output)


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_redaction_patterns_are_linear_without_the_precut(name: str) -> None:
    # sanitize() cuts its input to 16 KiB first; drive the patterns on 128 KiB directly so a
    # quadratic pattern cannot hide behind that cut.
    text = ADVERSARIAL[name][: 128 * 1024]
    started = time.perf_counter()
    _redact(text)
    assert time.perf_counter() - started < 2.0
