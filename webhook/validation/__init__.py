"""Pure validation: built-in GPU checks and the Rego constraint framework."""
