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
    "8432d5dc0841a8334578cff57e4eeeb5081940e27db6555e022b5719258d9e89": bundle.added_capabilities,
    "a39f0ab47d779c40bf58ce9ded1f12e7fd2f80e0d8b8332f5f89de04f830ec82": bundle.allowed_registries,
    "fcc52384329ce0e877c546227dac43a2a09d29f9ee4832768181c9b17bbb4c94": bundle.cdi_annotations,
    "97186ae0f39f075666178c4123e653ca047ab57ce84944aadaebcdaee2e97fb8": bundle.device_environment,
    "a65a8485091c4a8fb129e07d9d35d22a22e48f1b3d273c7141d9c326c921d9b0": bundle.device_list_mounts,
    "6808dcfb1de4998750260ebbd339f5e6ff7172b12c7e12c260307c868439adb5": bundle.host_namespaces,
    "fca9efc5f9b51994f862602d36f0e625ecfe52dbefbb849bd8167d2b0b1c17af": bundle.host_paths,
    "c1026acbe07399ca02122e283ae898a53014a199260763cb69d1ef4ac49443ce": bundle.max_per_pod,
    "c2a9e44fcaeb4f22aad236fd0adb9ef64bfc3953d054c1179fab0d89edd9daf2": bundle.preset_node_name,
    "056fcf5f12e22477bee12dd9591de4f6b1e9d1a223bff55004e517e33d293860": bundle.privileged_container,
    "784c77396d811942e8d7325906521ca01a38dab7a9b3330cfa9ce35f4a637696": bundle.scheduler_annotations,
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
