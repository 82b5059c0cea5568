"""What every benchmark shares: the AdmissionReview it sends and the results file it writes."""

from __future__ import annotations

import datetime as dt
import os
import platform
import uuid
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
RESOURCES = {"Pod": ("", "pods"), "Deployment": ("apps", "deployments")}


def admission_review(obj: dict[str, Any]) -> bytes:
    """A CREATE of `obj` by an ordinary user, as kube-apiserver sends it."""
    group, resource = RESOURCES[obj["kind"]]
    gvk = {"group": group, "version": "v1", "kind": obj["kind"]}
    request = {
        "uid": str(uuid.uuid4()),
        "kind": gvk,
        "resource": {"group": group, "version": "v1", "resource": resource},
        "namespace": obj["metadata"]["namespace"],
        "name": obj["metadata"]["name"],
        "operation": "CREATE",
        "userInfo": {"username": "alice@example.com", "groups": ["system:authenticated"]},
        "object": obj,
        "dryRun": False,
    }
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def save_results(out: Path, label: str, settings: dict[str, Any], **sections: Any) -> Path:
    """`out/<label><UTC time>.json`, with the machine and the settings every run records."""
    out.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    document = {
        "date": now.isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "settings": settings,
        **sections,
    }
    path = out / f"{label}{now:%Y-%m-%dT%H%M%S}.json"
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    print(f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return path
