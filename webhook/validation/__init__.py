"""Validation: the Gatekeeper model (templates, constraints, match, Suites) and Rego for regopy."""
