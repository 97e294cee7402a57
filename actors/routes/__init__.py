"""The pure route planner: route models, commands, profiles, failure judgement, steps,
eligibility, parking and the circuit board, with `plan` turning a command into a transition.

Like the core packages it never touches Redis, Ray, rq, a clock or randomness: the time and
the circuits it plans with are arguments.
"""
