"""Validation: built-in GPU checks, and the Gatekeeper model (templates, constraints, match, Suites)
with Rego made to run on regopy."""
