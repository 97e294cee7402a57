"""Score the catalogue on the labelled development corpus (docs/CONTRACTS.md scoring).

Prints one JSON line: accuracy, counts, false auto-recoveries, the wrong rows, and the
server timing hints read and invented (catalogue/corpus_timing.py).
Usage: python bench/corpus_score.py [PATH] [--verbose]
  PATH       a labelled JSON-lines file (default: the development corpus), e.g.
             bench/data/real_errors.holdout.jsonl, .blind2.jsonl, .blind3.jsonl
  --verbose  after the JSON line, the rule each wrong row matched
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from catalogue.classifier import default_catalogue
from catalogue.corpus import dev_corpus, evidence_from_row, score_rows
from catalogue.corpus_timing import score_timing


def main(argv: list[str]) -> int:
    if "--help" in argv or "-h" in argv:
        print(__doc__)
        return 0
    paths = [a for a in argv if not a.startswith("--")]
    path = Path(paths[0]) if paths else dev_corpus()
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    catalogue = default_catalogue()
    now = datetime.now(UTC)
    score = score_rows(rows, lambda e: catalogue.classify(e, now))
    timing = score_timing(rows, catalogue.classify)
    print(
        json.dumps(
            {
                "rows": score.total,
                "right": score.right,
                "accuracy": round(score.accuracy, 4),
                "false_auto_recoveries": len(score.false_auto_recoveries),
                "false_auto_recovery_rows": score.false_auto_recoveries,
                "wrong": [
                    {"id": rid, "label": label, "predicted": predicted}
                    for rid, label, predicted in score.wrong
                ],
                "server_hints": timing.expected,
                "server_hints_read": timing.read,
                "server_hints_read_fraction": round(timing.read_fraction, 4),
                "server_hints_missed": timing.missed,
                "hints_invented": len(timing.invented),
                "hints_invented_rows": timing.invented,
            }
        )
    )
    if "--verbose" in argv:
        by_id = {row["id"]: row for row in rows}
        for rid, _label, _predicted in score.wrong:
            explanation = catalogue.explain(evidence_from_row(by_id[rid]), now)
            matched = [r.id for r in explanation.matched]
            print(f"{rid}: rule={explanation.classification.rule} matched={matched}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
