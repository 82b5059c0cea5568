"""Compile and run templates once in a child process: regopy can crash on Rego it accepts.

A crash there is a policy problem naming the template; in the server it would have
been the end of the process. The parent sends the modules as JSON on stdin; the
child compiles and runs each template alone, as the engine does, printing `kind <Kind>`
first, so the last line names the culprit if it dies; the check then resumes after it.

    python -m webhook.policy.engines.vet_child < modules.json

A check takes about 0.35 s. Worker processes would repeat the one their supervisor has just
made on the same templates, at the same moment, on the same cores: the supervisor names the
template sets it has checked in the environment its workers inherit (`share_with_workers`),
by the SHA-256 of exactly what was checked, so any other set is still checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

from webhook.errors import PolicyProblem
from webhook.policy.engines.layout import Module
from webhook.validation.gatekeeper import ConstraintTemplate

VETTED_ENV = "GPU_WEBHOOK_VETTED_TEMPLATES"
CHILD = "webhook.policy.engines.vet_child"  # the child imports regopy; this module does not
_vetted: set[str] = set()  # digests of the payloads this process has seen survive a check


def crash_problems(
    modules: Mapping[str, Sequence[Module]], templates: Mapping[str, ConstraintTemplate], timeout: float = 120
) -> list[PolicyProblem]:
    """Problems for templates whose compilation or first evaluation kills the process."""
    payload = _payload(modules)
    digest = hashlib.sha256(payload.encode()).hexdigest()
    if digest in _vetted or digest in os.environ.get(VETTED_ENV, "").split(","):
        return []
    outcome = _run_child(payload, timeout)
    if outcome is None:
        _vetted.add(digest)
        return []
    if isinstance(outcome, PolicyProblem):
        return [outcome]
    signal, culprit = outcome
    if culprit is None:
        return [PolicyProblem("", 0, "", f"the template check crashed (signal {signal}) before starting")]
    source = templates[culprit].rego
    reason = f"regopy crashed (signal {signal}) compiling or evaluating this template, so it cannot be loaded"
    file = source.file if source else templates[culprit].where.file
    found = [PolicyProblem(file, source.first_line if source else 0, source.path if source else "", reason)]
    rest = {
        kind: own for kind, own in modules.items() if list(modules).index(kind) > list(modules).index(culprit)
    }
    return found + (crash_problems(rest, templates, timeout) if rest else [])


def share_with_workers() -> None:
    """Let the worker processes this one starts skip the checks it has made."""
    os.environ[VETTED_ENV] = ",".join(sorted(_vetted))


def _payload(modules: Mapping[str, Sequence[Module]]) -> str:
    return json.dumps(
        {"modules": [[m.name, m.text] for own in modules.values() for m in own], "kinds": list(modules)}
    )


def _run_child(payload: str, timeout: float) -> PolicyProblem | tuple[int, str | None] | None:
    """None if the child survived; else the signal and the template it was evaluating."""
    try:
        child = subprocess.run(
            [sys.executable, "-m", CHILD], input=payload, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return PolicyProblem("", 0, "", f"compiling the templates took longer than {timeout:.0f}s")
    if child.returncode >= 0:
        return None
    words = child.stdout.split()
    culprit = words[-1] if len(words) >= 2 and words[-2] == "kind" else None
    return -child.returncode, culprit
