"""The sanitiser against every secret shape of tests/secret_shapes.py: key blocks,
connection strings, GitLab/npm tokens, zero-width splits, short keys, quotes inside values,
escaped assignments, the major providers' keys; linear on pathological input (CPU time);
diagnostic numbers survive."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalogue import key_shapes
from catalogue.sanitize import MAX_EXCERPT_BYTES, _redact, sanitize
from tests.secret_shapes import SHAPES, Shape, leaked

CONTEXTS = (
    *("{}", "error: {} (request req_0123)", "line one\n{}\nline three", "'{}'", "[{}]"),
    "escaped\\n{}\\nlines",  # a JSON body's or a repr's line breaks
)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.name)
@pytest.mark.parametrize("context", CONTEXTS)
def test_every_shape_is_redacted_in_context(shape: Shape, context: str) -> None:
    text, secret = shape.planted(random.Random(shape.name))
    output = sanitize(context.format(text))
    assert leaked([secret], output, ignore=shape.template) == [], output
    assert sanitize(output) == output


ESCAPINGS: dict[str, Callable[[str], str]] = {
    "json": json.dumps,  # a JSON body: quotes, backslashes, line breaks escaped
    "json_ascii": lambda text: json.dumps(text, ensure_ascii=True),  # \u200b as text
    "repr": repr,  # an exception's or a validation error's repr of the input
    "json_twice": lambda text: json.dumps(json.dumps(text)),  # a body inside a log line
}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.name)
@pytest.mark.parametrize("escaping", sorted(ESCAPINGS))
def test_every_shape_is_redacted_when_escaped(shape: Shape, escaping: str) -> None:
    rng = random.Random(shape.name)
    planted = [shape.planted(rng), SHAPES[0].planted(rng)]  # after another key and a "\n"
    text = ESCAPINGS[escaping]("\n".join(t for t, _ in reversed(planted)) + "\nend")
    output = sanitize(text)
    assert leaked([s for _, s in planted], output, ignore=shape.template) == [], output


def test_there_are_at_least_fifty_shapes() -> None:
    assert len(SHAPES) >= 50


EXACT = [
    ("password='a'b'", "password='[REDACTED]'"),
    ("password='a'b' next", "password='[REDACTED]' next"),
    ("password=ab'cd next", "password=[REDACTED] next"),
    ('{"password": "x", "user": "y"}', '{"password": "[REDACTED]", "user": "y"}'),
    ("PWD=hunter2;Server=db", "PWD=[REDACTED];Server=db"),
    (
        "AccountName=a;AccountKey=Zm9vYmFy==;Suffix=x",
        "AccountName=a;AccountKey=[REDACTED];Suffix=x",
    ),
    ("glpat-AbCdEfGhIjKlMnOpQrSt", "glpat-[REDACTED]"),
    ("npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "npm_[REDACTED]"),
    ("key: sk-Ab12Cd34Ef", "key: sk-[REDACTED]"),
    ("sk-ant-api03-Ab\u200bCdEfGhIjKlMnOpQrSt12", "sk-ant-api03-[REDACTED]"),
    (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nabc\n-----END PGP PRIVATE KEY BLOCK----- ok",
        "[REDACTED] ok",
    ),
    ("PASSWORD=`a'b` x", "PASSWORD=`[REDACTED]` x"),
    ("password=\\'abc\\' x", "password=\\'[REDACTED]\\' x"),
]


@pytest.mark.parametrize(("text", "expected"), EXACT)
def test_exact_excerpt(text: str, expected: str) -> None:
    assert sanitize(text) == expected


SURVIVES = [
    "HTTP 429 Too Many Requests; retry-after: 30; x-request-id: 0f3c9a1e-7b2d-4c5e-9f10-12345678",
    "request_id=req_011CXnukXFhq5zC25S7ev2cy status=529 input_tokens=208310 output_tokens=4096",
    "model pplx-7b-online and pplx-70b-chat, package sk-learn, task-runner-v2",
    "Server=db;Database=app;Encrypt=true;TrustServerCertificate=false",
    "hf_hub_download failed; npm_config_cache is /tmp/x; gh_token_scope missing",
    "ghp_ prefix only; sk- prefix only; AKIA prefix only",
    "exit code 137 after 2 attempts (attempt 2/5), 503 from upstream",
    "see https://hooks.example.com/docs and https://discord.com/channels/1/2",
    "signature verification failed for key id 42 (HTTP 401, attempt 3)",
]


@pytest.mark.parametrize("text", SURVIVES)
def test_diagnostics_survive(text: str) -> None:
    assert sanitize(text) == text


# --------------------------------------------------------------------------- Hypothesis


@st.composite
def embedded(draw: st.DrawFn) -> tuple[str, str, str]:
    """(text, random part, text around it) for a generated secret of a sampled shape."""
    shape = draw(st.sampled_from(SHAPES))
    secret = draw(st.text(shape.alphabet, min_size=shape.length, max_size=shape.length))
    before, after = draw(st.text(max_size=80)), draw(st.text(max_size=80))
    gap = draw(st.sampled_from([" ", "\n", "\t", " \n ", ": ", "; ", "\\n", "\\t"]))
    end = draw(st.sampled_from([" ", "\n", "\t", ", ", ". ", "\\n"]))
    around = f"{before}{gap}{shape.template}{end}{after}"
    return f"{before}{gap}{shape.fill(secret)}{end}{after}", secret, around


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(embedded(), st.sampled_from([0, 3000, MAX_EXCERPT_BYTES - 40, 16 * 1024 - 60]))
def test_no_eight_character_fragment_of_a_generated_secret_survives(
    case: tuple[str, str, str], padding: int
) -> None:
    text, secret, around = case
    filler = ("lorem ipsum dolor " * (padding // 18 + 1))[:padding]
    output = sanitize(filler + text)
    assert leaked([secret], output, ignore=filler + around) == [], output
    assert len(output.encode()) <= MAX_EXCERPT_BYTES
    assert sanitize(output) == output


# --------------------------------------------------------------------------- linear time

MEGABYTE = 1 << 20
PATHOLOGICAL = {
    "key_blocks": "-----BEGIN PRIVATE KEY-----",
    "pgp_headers": "-----BEGIN PGP PRIVATE KEY BLOCK-----\n",
    "azure_markers": "aQ~",
    "sendgrid_dots": "SG.",
    "gitlab_prefixes": "glpat-",
    "dotted_body": "a.",
    "webhooks": "hooks.slack.com/services/",
    "quote_tails": "password='a'",
    "tail_run": "'b",
    "zero_width": "\u200b",
    "split_prefixes": "sk-\u200b",
    "short_keys": "sk-a1b2c3d4e5 ",
    "backticks": "token=`",
    "escaped_names": '\\\\\\"password\\\\\\": ',
    "connection_names": "pwd=sig=",
    "brackets": "secret=(",
    "schemes_and_ats": "://a" + "@a" * 50,  # each "://" once scanned to the end: quadratic
    "schemes_then_query": "://a",  # and a "?" at the very end
    "user_info_ats": "://" + "@" * 64,
    "backslashes": "\\",  # before an escaped invisible character, and none
    "escaped_invisibles": "\\\\u200b",
    "escaped_lines": "\\npassword=",
}
ENDINGS = {"schemes_then_query": "?x=1", "backslashes": "u200bkey"}


def cpu_seconds(function: object, text: str) -> float:
    assert callable(function)
    started = time.process_time()
    function(text)
    return time.process_time() - started


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_pathological_megabyte_is_linear_in_cpu_time(name: str) -> None:
    unit = PATHOLOGICAL[name]
    text = unit * (MEGABYTE // len(unit.encode())) + ENDINGS.get(name, "")
    assert cpu_seconds(sanitize, text) < 1.0  # catastrophes only (measured: ≤ 10 ms)
    # the patterns themselves, past the 16 KiB pre-cut: a quadratic one would take minutes
    assert cpu_seconds(_redact, text) < 5.0  # measured: ≤ 0.3 s
    assert len(sanitize(text).encode()) <= MAX_EXCERPT_BYTES


# Pieces of the dash-prefixed key shapes, so that random text often holds one and sometimes
# a whole key: a key the prefix check of redact_key_shapes skips would show here as a match.
KEY_PIECES = ["sk-", "ant-", "xai-", "pplx-", "xoxb-", "xapp-", "glpat-", "gloas-", "GOCSPX-"]
KEY_PIECES += ["s", "k", "gl", "-", "\\n", " ", "x", "Q7", "abcdefghij0123456789"]


@given(st.lists(st.sampled_from(KEY_PIECES), max_size=12).map("".join))
def test_a_text_the_dash_key_prefixes_rule_out_holds_no_dash_key(text: str) -> None:
    if not any(prefix in text for prefix in key_shapes._DASH_PREFIXES):
        assert key_shapes._KEY_DASH.search(text) is None
