"""The stateless endpoints: the catalogue and the policy on their own, as the CLI's
`recovery classify`, `recovery explain` and `recovery policy …` answer (docs/CONTRACTS.md):
the same core calls, JSON in and out. Nothing is read or written.

    POST /classify          one Evidence -> its Classification
    POST /explain           evidence (+ a policy) -> classification, rules, decision
    POST /policy/validate   a dynamic profile -> valid, normalised, lint warnings | errors
    POST /policy/normalize  legacy rules (or a v1 document) -> the v1 document
    POST /policy/preview    a dynamic profile -> its schedule per candidate and class
    POST /policy/evaluate   one `recovery policy evaluate` line -> its decision
    GET  /policy/schema     the JSON Schema of a dynamic profile (`?document=true`: of one
                            candidate's v1 document)
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query

from actors.api.models import (
    ClassPreview,
    Decision,
    DynamicProfileJson,
    EvaluateJson,
    ExplainAnswer,
    ExplainRequest,
    JsonObject,
    PolicyProblem,
    PreviewAnswer,
    ValidateAnswer,
)
from actors.api.problems import COMMON_ANSWERS, from_policy
from actors.clock import Clock
from catalogue import Classification, Evidence, classify, explain
from policy.errors import FieldError, PolicyError
from policy.legacy import normalize_policy
from policy.lint import lint_profile
from policy.preview import preview_lines, preview_profile
from policy.profile import parse_profile
from policy.requests import candidate_policy, decide, decision_under
from policy.schema import policy_json_schema

AnyJson = Annotated[JsonObject, Body()]
ProfileBody = Annotated[DynamicProfileJson, Body()]
EvaluateBody = Annotated[EvaluateJson, Body()]


def stateless_router(clock: Clock) -> APIRouter:
    """The catalogue's and the policy's endpoints; `clock` is "now" when a request
    gives none."""
    router = APIRouter(responses=COMMON_ANSWERS)
    schemas = {name: policy_json_schema(name) for name in ("profile", "document")}  # constant

    @router.post("/classify", response_model=Classification, tags=["catalogue"])
    def classify_evidence(evidence: Evidence) -> Classification:
        """The Classification of one piece of evidence (its `observed_at`, else now, is
        the reference time of relative hints)."""
        return classify(evidence, clock.now())

    @router.post("/explain", response_model=ExplainAnswer, tags=["catalogue"])
    def explain_evidence(body: ExplainRequest) -> ExplainAnswer:
        """Why the evidence classifies as it does: the winning rule, why it exists, the
        rules it beat; with `policy`, the decision it would get."""
        now = body.at or clock.now()
        result = explain(body.evidence, now)
        decision = None
        if body.policy is not None:
            try:
                document = candidate_policy(body.policy, body.candidate)
            except PolicyError as error:
                raise from_policy(error, "policy") from None
            decision = Decision.model_validate(decision_under(
                result.classification, document, now, retry_ordinal=body.retry_ordinal,
                assumed="assumed effect-safe by POST /explain",
            ))  # fmt: skip
        return ExplainAnswer(
            classification=result.classification,
            matched=[rule.id for rule in result.matched],
            why=result.winner.why if result.winner else None,
            decision=decision,
        )

    @router.post("/policy/validate", response_model=ValidateAnswer, tags=["policy"])
    def validate(profile: AnyJson) -> ValidateAnswer:
        """Check a dynamic profile: every problem at once, field-addressed (`valid`
        false, still 200), or the profile normalised with its lint warnings."""
        try:
            parsed = parse_profile(profile)
        except PolicyError as error:
            return ValidateAnswer(valid=False, errors=[_problem(e) for e in error.errors])
        return ValidateAnswer(
            valid=True, profile=parsed.model_dump(mode="json"),
            warnings=[_problem(warning) for warning in lint_profile(parsed)],
        )  # fmt: skip

    @router.post("/policy/normalize", tags=["policy"])
    def normalize(rules: AnyJson) -> dict[str, Any]:
        """Legacy rules (`try_next`, `stop`, `retry_same`, per-code maps) or a v1
        document, as the v1 document."""
        try:
            return normalize_policy(rules).model_dump(mode="json")
        except PolicyError as error:
            raise from_policy(error) from None

    @router.post("/policy/preview", response_model=PreviewAnswer, tags=["policy"])
    def preview(profile: ProfileBody) -> PreviewAnswer:
        """The schedule a dynamic profile implies, per candidate and class, in words."""
        try:
            parsed = parse_profile(profile)
        except PolicyError as error:
            raise from_policy(error) from None
        return PreviewAnswer(
            classes=[
                ClassPreview.model_validate(item.as_json()) for item in preview_profile(parsed)
            ],
            lines=preview_lines(parsed),
            warnings=[_problem(warning) for warning in lint_profile(parsed)],
        )

    @router.post("/policy/evaluate", response_model=Decision, tags=["policy"])
    def evaluate(line: EvaluateBody) -> Decision:
        """One decision, as `recovery policy evaluate` makes it for one input line."""
        try:
            return Decision.model_validate(decide(line, clock.now()))
        except PolicyError as error:
            raise from_policy(error) from None

    @router.get("/policy/schema", tags=["policy"])
    def schema(
        document: Annotated[bool, Query(description="one candidate's v1 document")] = False,
    ) -> dict[str, Any]:
        """The JSON Schema of a dynamic profile (or of one candidate's document)."""
        return schemas["document" if document else "profile"]

    return router


def _problem(error: FieldError) -> PolicyProblem:
    return PolicyProblem(field=error.field, message=error.message)


__all__ = ["stateless_router"]
