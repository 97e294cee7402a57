"""The substring pre-check in front of each rule pattern must never hide a match."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalogue import default_catalogue
from catalogue.literals import complete_words, required_literals
from catalogue.text import make_views, tokens_of
from tests.catalogue.fixture_data import FIXTURES


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("credit balance is too low", ("credit balance is too low",)),
        (r"\b(?:cancell?ed|aborted)\b", ("cancel", "aborted")),
        ("foo.{0,40}barbaz|quux", ("barbaz", "quux")),
        ("(?:no|missing) api key", (" api key",)),
        (r"[a-z]+ x", None),
        ("ab|cdef", None),  # one alternative has no usable literal
        (r"\d{3} error", (" error",)),
        # Beyond ASCII, a run of any length is a literal; a required alternation of such
        # words is preferred to one with ASCII words in it.
        ("余额(?:已)?(?:不足|用尽)", ("余额",)),
        ("(?:令牌|api ?key)(?:已)?(?:无效|过期)", ("无效", "过期")),
        ("(?:令牌|api ?key)(?:已)?(?:x|过期)", ("令牌", "api")),
        ("(?:缺少|缺失)(?:令牌|api ?key)", ("缺",)),
        ("é|ü", None),
    ],
)
def test_required_literals_are_derived_from_the_pattern(
    pattern: str, expected: tuple[str, ...] | None
) -> None:
    assert required_literals(re.compile(pattern)) == expected


def _views() -> list[str]:
    texts: list[str] = []
    for fixture in FIXTURES:
        evidence = fixture.raw["evidence"]
        text = "\n".join(str(evidence.get(k) or "") for k in ("text", "body"))
        texts.extend(make_views(text).views())
    return texts


def test_no_rule_pattern_matches_a_fixture_its_pre_checks_would_skip() -> None:
    views = [(view, tokens_of(view)) for view in _views()]
    hidden = []
    for rule in default_catalogue().rules:
        for probe in rule.match_probes + rule.require_probes + rule.unless_probes:
            for view, tokens in views:
                if probe.pattern.search(view) and not (
                    probe.found_in(view) and probe.possible(tokens)
                ):
                    hidden.append((rule.id, probe.pattern.pattern))
    assert hidden == []


@pytest.mark.parametrize(
    ("literal", "words"),
    [
        ("credit balance is too low", ["balance", "is", "too"]),
        ("you've hit", ["ve"]),
        (" api key", ["api"]),
        ("overloaded", []),
        ("x: ошибка y", []),
    ],
)
def test_only_words_bounded_inside_the_literal_count(literal: str, words: list[str]) -> None:
    assert complete_words(literal) == words


@given(st.text(alphabet="ab c.-_\n", max_size=60))
def test_pre_check_is_sound_on_arbitrary_text(text: str) -> None:
    for pattern in ("a b|b.a", r"\b(?:ab|ba)c\b", "a{2,}b", "(?:a|b) c", "ab.{0,5}ba"):
        compiled = re.compile(pattern)
        literals = required_literals(compiled)
        if compiled.search(text) and literals is not None:
            assert any(lit in text for lit in literals), (pattern, text)


# Words of the catalogue's CJK patterns, and what surrounds them in real output.
_FOREIGN_WORDS = [
    *("余额", "已", "不足", "用尽", "欠费", "有", "未", "请", "需要", "先"),
    *("充值", "额度", "配额", "已达", "上限", "令牌", "密钥", "api", "key", "无效"),
    *("过期", "失效", "被禁用", "验证失败", "认证", "失败", "用户", "已被", "封禁", "缺少"),
    *("模型", "不存在", "找不到", "该", "请求", "频率", "过于", "频繁", "触发", "限速"),
    *("并发", "过高", "需求", "遇到", "较高", "的", "·", "⎿", "x"),
]


# The patterns whose pre-check has a literal beyond ASCII.
_FOREIGN_PROBES = [
    (rule.id, probe)
    for rule in default_catalogue().rules
    for probe in rule.match_probes + rule.require_probes + rule.unless_probes
    if probe.literals is not None and not all(lit.isascii() for lit in probe.literals)
]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(_FOREIGN_WORDS), max_size=8), st.sampled_from(["", " "]))
def test_pre_check_is_sound_on_text_beyond_ascii(words: list[str], glue: str) -> None:
    text = glue.join(words)
    for rule_id, probe in _FOREIGN_PROBES:
        if probe.pattern.search(text):
            assert any(lit in text for lit in probe.literals or ()), (rule_id, text)
