"""Proving, without Rego, that a bundled template finds nothing in a pod. Pure.

Each template of the GPU security bundle costs regopy 0.04 to 0.16 ms, and setting regopy's
input once costs 0.45 ms more: most of a `/validate` review. Almost every pod a cluster
creates is clean, so a precheck answers the common case in Python: for one exact template
text, it returns True only when that template's `violation` set is certainly empty and its
evaluation certainly does not fail. Anything else (a possible finding, an unusual shape, a
parameter of an unexpected type) returns False, and Rego decides as before. Violations and
their messages therefore always come from the Rego.

A precheck is keyed by the fingerprint of its template's Rego sources, so a template edited
by its users, even by one character, loses its precheck and is evaluated by Rego alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from webhook.validation.gatekeeper import ConstraintTemplate
from webhook.validation.prechecks import bundle
from webhook.validation.prechecks.pod import PodCreate, pod_create

__all__ = ["PodCreate", "Precheck", "fingerprint", "pod_create", "prechecks_for"]

Precheck = Callable[[PodCreate, Mapping[str, Any]], bool]

# Fingerprints of the templates in policies/security, each with the check that models it.
# tests/validation/test_prechecks.py fails when a bundled template no longer has its entry.
PRECHECKS: dict[str, Precheck] = {
    "58c878b92413fafcc4fd7802f9533065daf8add5d6f28a432da25e7f5e85b3d8": bundle.allowed_registries,
    "4d06eefb6ba0e168f43478aff47d606754eafe70eac93551823c9f73d7ffa8a0": bundle.added_capabilities,
    "daf8926940a194b529b28630ad99b6e292e73fba6e8f2c6852e4303b58cd079d": bundle.device_environment,
    "3792ff772d138456d1e8357c1c33d8afa9585478fc0f580ef856f40ebf34e095": bundle.host_device_path,
    "68bfcb10a2be62abdfbbf1b0ce38323ac97e2790196153e85067a13da439c7b3": bundle.host_namespaces,
    "40b582a0360eae2205b065dc13a3529c64ff4df27f3da8ec3078e0cb8f3ccb60": bundle.max_per_pod,
    "418a2b8808d64f601194028ca0b4d4a3fe45fef53fd0699cb91db523f5c00899": bundle.preset_node_name,
    "8303dec89a589bda7286e2cab7240058079397ebf3ffeda4af5a8a5508d88391": bundle.privileged_container,
    "017cd63407de06541baba8e2cdda6c0729210ae2c32c8c5e27d05a407aa70018": bundle.scheduler_annotations,
}


def fingerprint(template: ConstraintTemplate) -> str:
    """SHA-256 of the template's Rego sources and their Rego versions; its name does not count."""
    digest = hashlib.sha256()
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
