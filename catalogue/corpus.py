"""Scoring the catalogue on labelled real-error rows (docs/CONTRACTS.md, "Scoring on the corpus").

Rows are labelled data, not Evidence; `evidence_from_row` builds Evidence exactly as the
contract says, so the figure printed here is the figure reviewers measure. The development
corpus ships inside the package (catalogue/data/), so `recovery corpus` and `recovery demo`
find it in an installed wheel as well as in a checkout.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, Final

from catalogue.classification import Classification
from catalogue.codes import NON_PROVIDER_CODES, TRANSIENT_CODES, UNCLASSIFIED
from catalogue.evidence import Evidence

NOT_PROVIDER_LABEL = "not_provider_error"
DEV_CORPUS_FILE: Final = "real_errors.dev.jsonl"

_KIND = {
    "cli_stderr": "stderr",
    "sdk_exception": "sdk_exception",
    "http_status+body": "http",
    "header": "http",
    "exit_message": "exit",
    "acp_message_chunk": "message_chunk",
}
_AGENT = {
    "claude-code": "claude-acp",
    "openclaude": "claude-acp",
    "codex": "codex-acp",
    "gemini-cli": "gemini-acp",
    "opencode": "opencode-acp",
    "copilot-cli": "copilot-acp",
    "cursor": "cursor-acp",
    "qwen-code": "qwen-acp",
    "amp": "amp-acp",
}
_PROVIDER = {
    "google-gemini": "google",
    "google-vertex": "vertex",
    "aws-bedrock": "bedrock",
    "azure-openai": "azure",
    "github-copilot": "copilot",
    "none": None,
    "openai-compatible": None,
}
_ALT = re.compile(r"alt:\s*([a-z_/ ,]+)")


def dev_corpus() -> Traversable:
    """The labelled development corpus (JSON lines), a package resource: read it with
    `.read_text(encoding="utf-8")`."""
    return resources.files("catalogue") / "data" / DEV_CORPUS_FILE


def evidence_from_row(row: Mapping[str, Any]) -> Evidence:
    kind = _KIND[row["kind"]]
    provider = row.get("provider")
    provider = _PROVIDER.get(provider, provider) if provider else None
    data: dict[str, Any] = {
        "kind": kind,
        "agent": _AGENT.get(row.get("tool") or ""),
        "provider": provider,
    }
    if kind == "http":
        data["body"] = row.get("text") or ""
        data["headers"] = row.get("headers") or {}
    else:
        data["text"] = row.get("text") or ""
    if kind in ("http", "sdk_exception"):
        data["http_status"] = row.get("http_status")
    return Evidence.model_validate(data)


def accepted_codes(row: Mapping[str, Any]) -> frozenset[str]:
    """The label and every `alt:` code named in the row's notes."""
    codes = {row["code"]}
    for group in _ALT.findall(row.get("notes") or ""):
        codes.update(c.strip() for c in re.split(r"[/,]| or ", group) if c.strip())
    return frozenset(codes)


def is_right(row: Mapping[str, Any], predicted: str) -> bool:
    """CONTRACTS.md, "Scoring on the corpus": the label or an `alt:` code; on a
    not_provider_error row also any non-provider code or `unclassified`."""
    if row["code"] == NOT_PROVIDER_LABEL and (
        predicted in NON_PROVIDER_CODES or predicted == UNCLASSIFIED
    ):
        return True
    return predicted in accepted_codes(row)


def is_false_auto_recovery(row: Mapping[str, Any], predicted: str) -> bool:
    """A wrong transient prediction on a row whose truth must never auto-recover."""
    label = row["code"]
    never_recovers = label == NOT_PROVIDER_LABEL or label not in TRANSIENT_CODES
    return never_recovers and predicted in TRANSIENT_CODES and not is_right(row, predicted)


@dataclass
class Score:
    total: int = 0
    right: int = 0
    false_auto_recoveries: list[str] = field(default_factory=list)
    wrong: list[tuple[str, str, str]] = field(default_factory=list)
    by_code: Counter[str] = field(default_factory=Counter)
    right_by_label: Counter[str] = field(default_factory=Counter)
    total_by_label: Counter[str] = field(default_factory=Counter)

    @property
    def accuracy(self) -> float:
        return self.right / self.total if self.total else 0.0


def score_rows(
    rows: Iterable[Mapping[str, Any]], classify: Callable[[Evidence], Classification]
) -> Score:
    score = Score()
    for row in rows:
        predicted = classify(evidence_from_row(row)).code
        score.total += 1
        score.by_code[predicted] += 1
        score.total_by_label[row["code"]] += 1
        if is_right(row, predicted):
            score.right += 1
            score.right_by_label[row["code"]] += 1
        else:
            score.wrong.append((row["id"], row["code"], predicted))
        if is_false_auto_recovery(row, predicted):
            score.false_auto_recoveries.append(row["id"])
    return score
