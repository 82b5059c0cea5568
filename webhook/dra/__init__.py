"""Dynamic Resource Allocation (resource.k8s.io/v1): which GPU devices claims ask for. Pure.

A layer below quota and accounting: `devices` reads one claim spec, `index` holds the
cluster's claims, templates and device classes as an immutable snapshot, and `resolve`
turns a pod's `spec.resourceClaims` into the claims it holds.
"""
