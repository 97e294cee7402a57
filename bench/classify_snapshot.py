"""Every classification the classifier makes on a fixed set of inputs, as JSON lines: a
check that a speed change changes no result.

Inputs: the development corpus and every labelled set in bench/data (held-out and blind),
the catalogue fixtures, the classification bench's worst-case inputs and its doubled rule
set (docs/CONTRACTS.md, Benchmarks). Each line holds the input's name, `classify()` with
and without a reference time (`model_dump` in JSON mode; the first also as its repr), the
ids `explain()` saw match and `sanitize()` of the evidence's text. Write a snapshot before
a change and compare after it:

    python bench/classify_snapshot.py write /tmp/before.jsonl
    python bench/classify_snapshot.py compare /tmp/before.jsonl
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from classify import NOW, synthetic_rules, worst_case_inputs

from catalogue import Catalogue, Evidence, default_catalogue, sanitize
from catalogue.corpus import dev_corpus, evidence_from_row

BENCH_DATA = Path(__file__).parent / "data"
FIXTURES = Path(__file__).parents[1] / "catalogue" / "fixtures"


def rows_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def named_inputs(base: Catalogue) -> Iterator[tuple[str, Evidence]]:
    corpora = {"dev": dev_corpus().read_text(encoding="utf-8")}
    for path in sorted(BENCH_DATA.glob("real_errors.*.jsonl")):
        # real_errors.holdout.jsonl -> "holdout": the names earlier snapshots used.
        corpora[path.name.split(".")[1]] = path.read_text(encoding="utf-8")
    dev: list[Evidence] = []
    for corpus, text in corpora.items():
        for number, row in enumerate(rows_of(text)):
            evidence = evidence_from_row(row)
            if corpus == "dev":
                dev.append(evidence)
            yield f"{corpus}:{number}:{row.get('id')}", evidence
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for number, row in enumerate(rows_of(path.read_text(encoding="utf-8"))):
            yield f"fixture:{path.name}:{number}", Evidence.model_validate(row["evidence"])
    for number, evidence in enumerate(worst_case_inputs(base, dev)):
        yield f"worst:{number}", evidence


def records(catalogue: Catalogue, label: str) -> Iterator[dict[str, Any]]:
    for name, evidence in named_inputs(default_catalogue()):
        explanation = catalogue.explain(evidence, NOW)
        classified = catalogue.classify(evidence, NOW)
        yield {
            "input": f"{label}:{name}",
            "classified": classified.model_dump(mode="json"),
            "repr": repr(classified),
            "classified_without_now": catalogue.classify(evidence).model_dump(mode="json"),
            "explained": explanation.classification.model_dump(mode="json"),
            "matched": [rule.id for rule in explanation.matched],
            "winner": explanation.winner.id if explanation.winner else None,
            "sanitized": sanitize(evidence.combined_text()),
        }


def snapshot() -> list[str]:
    base = default_catalogue()
    doubled = Catalogue(list(base.rules) + synthetic_rules(list(base.rules)))
    lines = [json.dumps(r, sort_keys=True, ensure_ascii=False) for r in records(base, "base")]
    lines += [json.dumps(r, sort_keys=True, ensure_ascii=False) for r in records(doubled, "x2")]
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("write", "compare"):
        print(__doc__)
        return 2
    action, path = argv[0], Path(argv[1])
    lines = snapshot()
    if action == "write":
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(json.dumps({"written": len(lines), "path": str(path)}))
        return 0
    saved = path.read_text(encoding="utf-8").splitlines()
    differing = [
        json.loads(old)["input"] for old, new in zip(saved, lines, strict=False) if old != new
    ]
    same = not differing and len(saved) == len(lines)
    print(
        json.dumps(
            {
                "same": same,
                "saved": len(saved),
                "now": len(lines),
                "differing": differing[:20],
                "differing_count": len(differing),
            }
        )
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
