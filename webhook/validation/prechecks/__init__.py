"""Proving, without Rego, that a bundled template finds nothing in a pod. Pure.

Each template of the GPU security bundle costs regopy 0.04 to 0.16 ms, and setting regopy's
input once costs 0.45 ms more: most of a `/validate` review. Almost every pod a cluster
creates is clean, so a precheck answers the common case in Python: for one exact template
text, it returns True only when that template's `violation` set is certainly empty and its
evaluation certainly does not fail. Anything else (a possible finding, an unusual shape, a
parameter of an unexpected type) returns False, and Rego decides as before. Violations and
their messages therefore always come from the Rego.

A precheck reads a constraint's parameters once (`Precheck.bind`, kept for the life of a policy
load by the engine's ConstraintSet), and the check it binds reads the pod through one set of
facts gathered once per request (facts.py), whichever constraints ask.

A precheck is keyed by the fingerprint of its template's Rego sources, so a template edited
by its users, even by one character, loses its precheck and is evaluated by Rego alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.validation.gatekeeper import ConstraintTemplate
from webhook.validation.prechecks import bundle
from webhook.validation.prechecks.bundle import Check
from webhook.validation.prechecks.pod import PodCreate, pod_create

__all__ = ["Check", "PodCreate", "Precheck", "fingerprint", "pod_create", "prechecks_for"]


def _never(pod: PodCreate) -> bool:
    return False


@dataclass(frozen=True)
class Precheck:
    """One template's precheck. `prepare` reads a constraint's parameters and returns the check
    of a pod, or None when the parameters hold what only Rego can judge."""

    prepare: Callable[[Mapping[str, Any]], Check | None]

    def bind(self, parameters: Mapping[str, Any]) -> Check:
        """The check for these parameters; one that never clears if they cannot be read."""
        try:
            check = self.prepare(parameters)
        except Exception:  # a precheck's own bug must cost speed, never a decision: Rego decides
            return _never
        return _never if check is None else check

    def __call__(self, pod: PodCreate, parameters: Mapping[str, Any]) -> bool:
        return self.bind(parameters)(pod)


# Fingerprints of the templates in policies/security, each with the check that models it.
# tests/validation/test_prechecks.py fails when a bundled template no longer has its entry.
PRECHECKS: dict[str, Precheck] = {
    "9c7ea3cb8b79703bc191d3857842bd9592f11945952f13b075ec5bba6f9777f6": Precheck(bundle.added_capabilities),
    "135a9ba110bf330ccf0a1ce72172a10a656d98000204cbb9aa5dc6cf59a04eba": Precheck(bundle.allowed_registries),
    "c8df9807787728f0a2a3708d1ccf3c2a6f48b268ac34fdc4ed0c5874d702e2c3": Precheck(bundle.cdi_annotations),
    "c846b5fda1917db15cb6fa4a757ed8e672886cb87d47e6170f990ad9ebb0c00b": Precheck(bundle.device_environment),
    "94b2ddd75829f1476663307f34a9bd3e292ca623e4dca4aafee2195a085d3a8e": Precheck(bundle.device_list_mounts),
    "84552a311043d937a0263e7f239bc80049a88c0cb8d51feebb85d672253fbf6f": Precheck(bundle.host_namespaces),
    "9332878486751a9f86e7a913c05f2597103be065f6d7a858f96d5c344db58268": Precheck(bundle.host_paths),
    "536de3b070d110ce1cd6ac383407ef591a15db77307e51b8b4a67f36e0427be4": Precheck(bundle.max_per_pod),
    "b7a4d8d21939a4f5ed029c471bd094007cb3a8771ff9cfaa26bb60b3dcede2ff": Precheck(bundle.preset_node_name),
    "442e87bd03f9f448d0a79ab08a509c554d669f26d9f684fa707bf92a21f16629": Precheck(bundle.privileged_container),
    "f0783f5afd57edc844b5bdd566873a8f171c0b3a242b4ae41a3f592987ef77c7": Precheck(
        bundle.scheduler_annotations
    ),
}


def fingerprint(template: ConstraintTemplate) -> str:
    """SHA-256 of the template's Rego sources and their Rego versions; its name does not count.
    A template that also has CEL is evaluated by CEL, so it matches no Rego fingerprint."""
    digest = hashlib.sha256()
    if template.cel is not None:
        digest.update(b"cel\0")
    for source in template.sources:
        digest.update(b"v1\0" if source.v1 else b"v0\0")
        digest.update(source.text.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def prechecks_for(templates: Iterable[ConstraintTemplate]) -> dict[str, Precheck]:
    """Kind to precheck, for the templates whose exact text has one."""
    found = {}
    for template in templates:
        check = PRECHECKS.get(fingerprint(template))
        if check is not None:
            found[template.kind] = check
    return found
