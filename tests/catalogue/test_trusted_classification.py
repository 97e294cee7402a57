"""The classifier builds its results without a second validation pass
(`trusted_classification`); each must be the very object validation would have built."""

from __future__ import annotations

import json
import pickle
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from catalogue import Classification, default_catalogue
from catalogue.classification import adopt_fields, field_template, trusted_classification
from catalogue.corpus import dev_corpus, evidence_from_row

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _corpus_results() -> list[Classification]:
    rows = [json.loads(line) for line in dev_corpus().read_text(encoding="utf-8").splitlines()]
    return [default_catalogue().classify(evidence_from_row(row), NOW) for row in rows if row]


def test_every_corpus_result_is_what_validation_builds() -> None:
    results = _corpus_results()
    assert any(r.reset_at is not None or r.retry_after_s is not None for r in results)
    for result in results:
        validated = Classification(**dict(result))
        assert result == validated
        assert hash(result) == hash(validated)
        assert result.model_fields_set == validated.model_fields_set
        assert result.model_dump_json() == validated.model_dump_json()
        assert repr(result) == repr(validated)
        assert pickle.loads(pickle.dumps(result)) == validated  # as Ray ships it
        assert Classification.model_validate_json(result.model_dump_json()) == result


def test_a_trusted_result_is_frozen_like_any_other() -> None:
    result = _corpus_results()[0]
    with pytest.raises(ValidationError, match="frozen"):
        result.code = "rate_limited"  # type: ignore[misc]
    copied = result.model_copy(update={"safe_excerpt": "x"})
    assert copied.safe_excerpt == "x"
    assert result.safe_excerpt != "x"


def test_every_field_must_be_given() -> None:
    values = dict(_corpus_results()[0])
    del values["safe_excerpt"]
    with pytest.raises(TypeError, match="every field"):
        trusted_classification(values)


def test_every_corpus_result_holds_its_fields_in_field_order() -> None:
    for result in _corpus_results():
        assert list(result.__dict__) == list(Classification.model_fields)


def test_a_filled_template_is_adopted_as_the_trusted_result_of_the_same_values() -> None:
    values = dict(_corpus_results()[0])
    fields = field_template(**values)
    assert adopt_fields(dict(fields)) == trusted_classification(values)
    assert list(fields) == list(Classification.model_fields)


def test_a_template_names_a_missing_required_field_and_refuses_unknown_ones() -> None:
    with pytest.raises(TypeError, match="code"):
        field_template(rule="x.v1")
    with pytest.raises(TypeError, match="colour"):
        field_template(colour="red")
