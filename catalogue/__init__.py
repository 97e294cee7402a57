"""Provider-error catalogue: evidence in, deterministic classification out. Pure."""
