"""The evaluate request (policy/requests.py) refuses a malformed `reset_wait_used` as a
field error whatever its items are (found by schemathesis: an object item raised
TypeError, a 500 over HTTP)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from policy.requests import EvaluateLine, field_errors

FAILURE = {"code": "rate_limited", "class": "transient"}


@pytest.mark.parametrize("used", [[{"a": 1}], [["transient"]], ["transient", 3], ["warm"], "hard"])
def test_a_bad_reset_wait_used_is_a_field_error(used: object) -> None:
    with pytest.raises(ValidationError) as caught:
        EvaluateLine.model_validate({"document": {}, "failure": FAILURE, "reset_wait_used": used})
    fields = [error.field for error in field_errors(caught.value)]
    assert "reset_wait_used" in fields


@pytest.mark.parametrize(("used", "read"), [(True, True), (["hard"], frozenset({"hard"}))])
def test_a_flag_or_a_list_of_classes_is_read(used: object, read: object) -> None:
    line = EvaluateLine.model_validate(
        {"document": {}, "failure": FAILURE, "reset_wait_used": used}
    )
    assert line.reset_wait_used == read
