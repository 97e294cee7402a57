"""JSON Schema of the stored documents (`recovery policy schema`)."""

from __future__ import annotations

from typing import Any, Final, Literal

from policy.document import DynamicProfile, PolicyDocument

SchemaName = Literal["profile", "document"]
SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"

_DESCRIPTIONS: Final = {
    "profile": (
        "A dynamic profile: ordered candidates, each with its transient and hard class "
        "policies. Legacy candidates with `rules` are accepted on load and normalised."
    ),
    "document": "One candidate's v1 policy document: transient and hard class policies.",
}


def policy_json_schema(name: SchemaName = "profile") -> dict[str, Any]:
    """The JSON Schema of a dynamic profile or of one candidate's policy document."""
    model = DynamicProfile if name == "profile" else PolicyDocument
    schema = model.model_json_schema(mode="validation")
    return {"$schema": SCHEMA_DIALECT, **schema, "description": _DESCRIPTIONS[name]}
