"""Per-resource circuit state machine with an exclusive probe lease. Pure."""
