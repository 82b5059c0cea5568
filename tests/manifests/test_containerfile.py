"""The Containerfile cannot be built here (no container engine); these checks keep it consistent."""

from __future__ import annotations

import json
import re

from tests.manifests.objects import REPO, one
from webhook.manifests import load_base

CONTAINERFILE = (REPO / "Containerfile").read_text()
STAGES = re.split(r"^FROM ", CONTAINERFILE, flags=re.MULTILINE)[1:]
FINAL = STAGES[-1]


def _instruction(stage: str, name: str) -> str:
    (line,) = re.findall(rf"^{name} (.+)$", stage, flags=re.MULTILINE)
    return str(line)


def test_multi_stage_on_a_slim_python_base() -> None:
    assert len(STAGES) == 2
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.1[1-9]-slim", CONTAINERFILE, flags=re.MULTILINE)
    assert "COPY --from=build /opt/gpu-webhook /opt/gpu-webhook" in FINAL


def test_final_stage_installs_no_compilers() -> None:
    assert not re.search(r"apt-get|apk |gcc|build-essential|pip install", FINAL)


def test_entrypoint_is_serve() -> None:
    assert json.loads(_instruction(FINAL, "ENTRYPOINT")) == ["gpu-webhook", "serve"]


def test_runs_as_the_user_the_deployment_expects() -> None:
    user, _, group = _instruction(FINAL, "USER").partition(":")
    pod = one(load_base(), "StatefulSet")["spec"]["template"]["spec"]["securityContext"]
    assert (int(user), int(group)) == (pod["runAsUser"], pod["runAsGroup"])
    assert int(user) != 0


def test_the_build_context_holds_what_the_build_copies() -> None:
    allowed = {
        line[1:].rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", CONTAINERFILE, flags=re.MULTILINE)
    for sources in copied:
        for source in sources.split():
            assert source.rstrip("/") in allowed, source
