"""Text views and the status stated in prose."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalogue.text import (
    _unwrapped,
    _wraps_mid_word,
    collapse_spaces,
    make_views,
    report_lines,
    status_in_text,
    tokens_of,
)

# The one-pattern form of "a terminal wrap inside a word" that `_wraps_mid_word` implements
# from the line break on (a faster scan).
_MID_WORD_WRAP = re.compile(r"\w\r?\n[ \t]*\w")


@given(st.text(alphabet="a_é9 \t\r\n.-", max_size=16))
def test_a_mid_word_wrap_is_found_as_the_one_pattern_finds_it(text: str) -> None:
    assert _wraps_mid_word(text) == bool(_MID_WORD_WRAP.search(text))


# What the joined view removes: a line break with the spaces and tabs around it (and a CR
# right before it), which `_unwrapped` does by str methods (the pattern has no literal).
_LINE_BREAK = re.compile(r"[ \t]*\r?\n[ \t]*")


@given(st.text(alphabet="a_é9 \t\r\n\x0b.-", min_size=1, max_size=24).filter(lambda t: "\n" in t))
def test_unwrapping_collapses_to_what_removing_the_line_break_pattern_gives(text: str) -> None:
    assert collapse_spaces(_unwrapped(text)) == collapse_spaces(_LINE_BREAK.sub("", text))


@pytest.mark.parametrize(
    ("text", "wraps"),
    [
        ("api_\n    error", True),
        ("api_\r\n error", True),
        ("error.\n next", False),
        ("a\r\r\nb", False),
    ],
)
def test_mid_word_wraps(text: str, wraps: bool) -> None:
    assert _wraps_mid_word(text) is wraps


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("API Error: 529 Overloaded", 529),
        ("status code 429This request would exceed", 429),
        ("GoogleGenerativeAI Error]: fetching x: [503 ] The model", 503),
        ("HTTP 429 (429) Requests to the operation", 429),
        ("unexpected status 401 Unauthorized: {}", 401),
        ('Error: 400 {"type":"error"}', 400),
        ("401 status code (no body)", 401),
        ("Error code: 400 - {'error': 1}", 400),
        ('"httpStatusCode":429,"requestId":"x"', 429),
        ("gtp api status code not equals 200, code is 429 ,details", 429),
        ("Fatal error: Error Code: 403, Message: Permission denied", 403),
        ("OAI Compatible API error: [400] Bad Request", 400),
        ("upstream said 503 service unavailable", 503),
        ("Error: HTTP 错误！状态：400，响应：{}", 400),
        ("请求失败，状态码: 429", 429),
        ("发生未知错误 (401)。", 401),
        ("错误码: 400 - 参数不正确", 400),
        ("错误 4001 次", None),
        ('Reason: Request Failed: 400 {"error":{"message":"x"}}', 400),
        ("Request failed: 4000 tokens over budget", None),
        ("[ERROR] 429 [object Object]", 429),
        ("Failed to load response from api.openai.com:\n(429)", 429),
        ("tokens used: (4096 of 8192)", None),
        ("[ERROR] 4290 lines written", None),
        ("[WARN] 429 requests queued", None),
        ("状态：4001 个文件", None),
        ("plugin:text2anki-openai:734  POST https://api.openai.com/v1/chat/completions 401", 401),
        ("GET https://api.example.com/v1/models 404 (Not Found)", 404),
        ("POST https://api.openai.com/v1/chat/completions?x=1 took 429 ms", None),
        ("see https://api.openai.com/v1/chat/completions 401 times", None),
        ("took 4000 ms", None),
        ("limit 400.5 tokens", None),
        ("Limit 400,000 tokens", None),
        ("request id 4290", None),
        ("in 2024 we shipped", None),
        ("Attempt 1 failed with 5xx error", None),
        ("", None),
    ],
)
def test_status_is_read_from_prose_only_in_a_status_context(text: str, status: int | None) -> None:
    assert status_in_text(text.lower()) == status


def test_flat_view_collapses_whitespace_and_joined_view_repairs_mid_word_wraps() -> None:
    views = make_views('{"type":"api_\n    error","message":"Please try \n  again"}')
    assert views.flat == '{"type":"api_ error","message":"please try again"}'
    assert views.joined is not None
    assert '"api_error"' in views.joined
    assert b"api_error" in views.tokens
    assert b"again" in views.tokens


def test_escaped_line_breaks_in_nested_json_read_as_line_breaks() -> None:
    views = make_views('{"message":"An internal \\n  error has occurred"}')
    assert "an internal error has occurred" in views.flat


def test_markdown_quote_marks_at_line_starts_are_decoration() -> None:
    """Output pasted as a Markdown quote, wrapped inside a message (anthropics/claude-code
    #6772): the marks do not stand between its words."""
    views = make_views(
        '>   API Error: 400 {"message":"Output blocked\n>      by content filtering policy"}'
    )
    assert '"output blocked by content filtering policy"' in views.flat
    nested = make_views("> > Rate limit reached\n> > for gpt-4o")
    assert "rate limit reached for gpt-4o" in nested.flat


def test_box_borders_around_a_line_break_are_decoration() -> None:
    """A message wrapped inside a box-drawn frame (a rich table cell, genkit-ai/genkit#4688;
    nested panels): the borders between its lines do not stand between its words."""
    views = make_views(
        "│ 'Publisher Model was not found  │\n│ or your project does not  │\n│ have access to it. │"
    )
    assert "was not found or your project does not have access to it." in views.flat
    nested = make_views("│ │ retry in   │ │\n│ │ 59s │ │")
    assert "retry in 59s" in nested.flat


def test_a_box_border_inside_a_line_is_kept() -> None:
    assert "a │ b" in make_views("a │ b").flat


def test_a_greater_than_sign_inside_a_line_is_kept() -> None:
    assert (
        "prompt is too long: 210000 tokens > 200000"
        in make_views("prompt is too long: 210000 tokens > 200000 maximum").flat
    )


def test_tokens_are_ascii_word_runs() -> None:
    assert tokens_of("rate_limit_error: ошибка 429!") == {b"rate_limit_error", b"429"}


def test_report_lines_keep_error_prefixed_lines_and_their_json_body_only() -> None:
    chunk = 'Let me check.\n⎿ Error: {\n  "code": 429\n}\nAll good now.'
    assert report_lines(chunk) == ["error: {", '"code": 429', "}"]


def test_a_json_body_printed_without_indentation_stays_with_its_report_line() -> None:
    # A JSON-RPC error whose members start at column 0 (layercodedev/sled#4); prose after
    # the body is still not part of it.
    chunk = 'Agent error: {\n"code": -32603,\n"message": "Internal error"\n}\nI will retry.'
    assert report_lines(chunk) == [
        "agent error: {",
        '"code": -32603,',
        '"message": "internal error"',
        "}",
    ]


def test_a_chunk_opening_with_a_json_rpc_error_response_is_its_error_report() -> None:
    # A JSON-RPC error relayed whole as a chunk (Emacs agent-shell); the same response
    # quoted inside prose is not a report.
    chunk = '{"jsonrpc":"2.0","id":4,"error":{"code":-32603,"message":"Internal error"}}'
    assert report_lines(chunk) == [chunk.lower()]
    assert report_lines("An ACP error looks like " + chunk) == []
    assert report_lines('{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}') == []


def test_an_editors_heading_for_an_acp_turn_ended_in_error_opens_a_report() -> None:
    # As an editor renders it (agentclientprotocol/claude-agent-acp#296); a code comment
    # in the model's prose that says "error:" is no report.
    chunk = (
        "### ❌ Agent finished with error: {\n    code = -32603,\n"
        '    message = "Internal error: Prompt is too long"\n  }'
    )
    assert report_lines(chunk)[0] == "### ❌ agent finished with error: {"
    assert report_lines("Try this:\n# error: rate limit exceeded, sleep and retry") == []
    assert report_lines("The agent finished with error handling in place.") == []


def test_a_chunk_opening_with_an_agents_apology_header_is_its_error_report() -> None:
    # Warp prints its error reports under a fixed apology; the lines after it are the report.
    chunk = "I'm sorry, I couldn't complete that request.\n\nRequest failed with error: QuotaLimit"
    assert report_lines(chunk) == ["request failed with error: quotalimit"]
    same_line = "I'm sorry, I can't complete that request. You've reached your credit limit."
    assert report_lines(same_line) == ["you've reached your credit limit."]


def test_the_apology_later_in_the_prose_is_no_header() -> None:
    chunk = "Here is the plan.\nI'm sorry, I can't complete that request. It is too vague."
    assert report_lines(chunk) == []


def test_a_protocol_qualified_error_prefix_opens_a_report() -> None:
    # codeg prints an ACP JSON-RPC error as "ACP protocol error: Internal error: {" over its body.
    chunk = 'Agent 错误\nACP protocol error: Internal error: {\n  "message": "stream closed"\n}'
    assert report_lines(chunk) == [
        "acp protocol error: internal error: {",
        '"message": "stream closed"',
        "}",
    ]
    assert report_lines("The ACP protocol error: it happens when the agent crashes.") == []


# Every ASCII character `str.split` splits at, and others around them.
_ASCII_PIECES = [chr(c) for c in (*range(0x09, 0x0E), *range(0x1C, 0x21))] + ["a", "Ab", "\x00"]


@given(st.lists(st.sampled_from([*_ASCII_PIECES, "  ", "x y", "\x1b", "\x7f"]), max_size=12))
def test_the_flat_view_of_ascii_text_is_its_words_joined_by_single_spaces(
    pieces: list[str],
) -> None:
    # The fast path keeps an already flat text as it is: exactly when collapsing would.
    text = "".join(pieces)
    views = make_views(text)
    assert views.flat == " ".join(text.lower().split())
    assert views.tokens >= tokens_of(views.flat)
