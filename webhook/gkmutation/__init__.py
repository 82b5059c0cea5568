"""Gatekeeper's mutation kinds (Assign, AssignMetadata, ModifySet, AssignImage), in process. Pure.

`compile` turns a mutation document into a Mutator at load; `system` runs a policy set's
mutators over an object in Gatekeeper's order until nothing changes. The semantics follow
open-policy-agent/gatekeeper pkg/mutation; each module names the upstream file it follows.
"""
