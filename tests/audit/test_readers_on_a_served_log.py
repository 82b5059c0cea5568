"""Every reader of the audit log, held to a log the real server wrote with a GPUQuota in force.

A `gpu-webhook serve` over TLS, with a (fake) cluster, a signing key and a quota on one of two
namespaces, admits and denies GPU pods; then `audit summary`, `report`, `query`, `tail` and
`verify` read the file it wrote, through the real entry point, and must agree on which
namespace got how many GPUs. The quota writes its amounts as exact text ("2", "2/7"); the
record's own `gpus` is a number; no reader may drop a namespace over either.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.audit.logs import lines, rewrite
from tests.audit.test_report import bars, charts
from tests.conftest import BUNDLED_POLICIES
from tests.support.apiserver import check_reply
from tests.support.cli import gpu_webhook
from tests.support.fakekube import FakeKube
from tests.support.pods import gpu_pod, make_pod, namespace, quota_doc, res
from tests.support.reviews import make_review
from tests.support.server import ServerProcess, start_server
from webhook.audit.chain import Record, line_of
from webhook.audit.signing import generate

QUOTA_LIMIT = 4
SLICE = 2 / 7  # nvidia.com/mig-2g.20gb: two of seven compute slices
# (name, namespace, endpoint, pod, dry run, admitted)
TRAFFIC: list[tuple[str, str, str, dict[str, Any], bool, bool]] = [
    ("trainer", "ml-team", "mutate", gpu_pod("trainer", "ml-team", gpus=2), False, True),
    ("trainer", "ml-team", "validate", gpu_pod("trainer", "ml-team", gpus=2), False, True),
    (
        "slice",
        "ml-team",
        "validate",
        make_pod("slice", "ml-team", [res("main", {"nvidia.com/mig-2g.20gb": 1})]),
        False,
        True,
    ),
    ("greedy", "ml-team", "validate", gpu_pod("greedy", "ml-team", gpus=QUOTA_LIMIT + 1), False, False),
    ("rehearsal", "ml-team", "validate", gpu_pod("rehearsal", "ml-team", gpus=1), True, True),
    ("free-trainer", "free", "validate", gpu_pod("free-trainer", "free", gpus=1), False, True),
]
GPUS_ADMITTED = {"ml-team": 2 + SLICE, "free": 1.0}


@dataclass(frozen=True)
class Served:
    log: Path
    public_key: Path


@pytest.fixture(scope="module")
def served(cert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Served:
    root = tmp_path_factory.mktemp("served")
    policies = root / "policies"
    shutil.copytree(BUNDLED_POLICIES, policies)
    quota = quota_doc("ml-team", {"gpus": QUOTA_LIMIT}, match={"namespaces": ["ml-team"]})
    (policies / "quota.yaml").write_text(yaml.safe_dump(quota))
    private, public = generate(root / "keys")
    log = root / "audit" / "audit.log"
    fake = FakeKube().start()
    try:
        for name in ("ml-team", "free"):
            fake.create("namespaces", namespace(name))
        server = _serve(cert_dir, policies, log, private, fake.write_kubeconfig(root / "kubeconfig"), root)
        try:
            _send_traffic(server)
        finally:
            server.stop_gracefully()
    finally:
        fake.stop()
    return Served(log, public)


def _serve(
    cert_dir: Path, policies: Path, log: Path, key: Path, kubeconfig: Path, home: Path
) -> ServerProcess:
    args = [
        *("--cert-dir", str(cert_dir), "--policies", str(policies), "--kubeconfig", str(kubeconfig)),
        *("--audit-log", str(log), "--audit-signing-key", str(key), "--audit-checkpoint-records", "2"),
    ]
    server = start_server(args, ca_file=cert_dir / "ca.crt", env={"HOME": str(home), "KUBECONFIG": ""})
    while not {"pods", "namespaces"} <= _synced_kinds(server.output()):  # the quota reads both
        server.wait_for_log(lambda e: e.get("msg") == "cache synced", timeout=60)
    return server


def _synced_kinds(output: str) -> set[str]:
    entries = (json.loads(line) for line in output.splitlines() if '"msg":"cache synced"' in line)
    return {str(entry.get("kind")) for entry in entries}


def _send_traffic(server: ServerProcess) -> None:
    for name, _, endpoint, pod, dry_run, admitted in TRAFFIC:
        review = make_review(pod, dry_run=dry_run)
        response = check_reply(review, server.client().post_json(f"/{endpoint}", review), endpoint)
        assert response["allowed"] is admitted, (name, response)


def audit(*args: str) -> tuple[int, str, str]:
    result = gpu_webhook("audit", *args)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout, result.stderr


def decisions(log: Path) -> list[Record]:
    return [r for r in map(orjson.loads, lines(log)) if r["type"] == "decision"]


def counted(records: list[Record]) -> dict[str, float]:
    """GPUs of admitted pod creations by name, as the records hold them."""
    return {
        r["name"]: r["gpus"]
        for r in records
        if r["endpoint"] == "validate" and r["allowed"] and not r["dryRun"] and "gpus" in r
    }


def test_the_server_writes_each_admitted_pods_gpus_as_a_number(served: Served) -> None:
    records = decisions(served.log)
    assert [(r["name"], r["namespace"], r["endpoint"]) for r in records] == [t[:3] for t in TRAFFIC]
    gpus = counted(records)
    assert gpus == {"trainer": 2, "slice": round(SLICE, 4), "free-trainer": 1}
    assert all(type(value) is float for value in gpus.values())
    quota = {r["name"]: r["quota"]["demand"]["gpus"] for r in records if "quota" in r}
    assert quota == {
        "trainer": "2",
        "slice": "2/7",
        "greedy": "5",
        "rehearsal": "1",
    }  # the quota's exact text


def test_summary_counts_every_namespace_with_or_without_a_quota(served: Served) -> None:
    code, out, err = audit("summary", str(served.log), "-o", "json", "--public-key", str(served.public_key))
    assert code == 0, err
    summary = orjson.loads(out)
    assert summary["gpusAdmittedByNamespace"] == pytest.approx(GPUS_ADMITTED, abs=1e-4)
    assert summary["namespaces"] == {"ml-team": 5, "free": 1}
    assert summary["decisions"] == {"allowed": 5, "denied": 1}
    assert summary["deniedByPolicy"] == {"GPUQuota/ml-team": 1}
    assert summary["verification"] == "ok"
    code, text, err = audit("summary", str(served.log))
    assert code == 0, err
    section = text.split("GPU-equivalents admitted by namespace:\n")[1].split("\n\n")[0]
    assert [line.split() for line in section.splitlines()] == [["2.28571", "ml-team"], ["1", "free"]]


def test_report_charts_every_namespace_with_or_without_a_quota(served: Served, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    code, printed, err = audit("report", str(served.log), "--out", str(out))
    assert code == 0, err
    assert "6 records" in printed
    page = out.read_text()
    assert bars(charts(page)["gpus-by-namespace"]) == {"ml-team": "2.29", "free": "1"}
    assert bars(charts(page)["denials-by-namespace"]) == {"ml-team": "1"}
    assert 'data-verification="ok"' in page


def test_query_and_tail_show_each_pods_gpus(served: Served) -> None:
    code, out, err = audit("query", str(served.log), "--endpoint", "validate", "-o", "json")
    assert code == 0, err
    assert counted(orjson.loads(out)) == counted(decisions(served.log))
    code, out, err = audit("query", str(served.log), "--namespace", "free", "-o", "csv")
    assert code == 0, err
    assert [(row["name"], row["gpus"]) for row in csv.DictReader(io.StringIO(out))] == [("free-trainer", "1")]
    code, out, err = audit("query", str(served.log), "--decision", "denied")
    assert code == 0, err
    assert [line.split()[3:5] for line in out.splitlines()[1:]] == [["ml-team", "greedy"]]
    code, out, err = audit("tail", str(served.log), "-n", "4", "-o", "json")
    assert code == 0, err
    assert [(r["name"], r.get("gpus")) for r in orjson.loads(out)] == [
        ("slice", round(SLICE, 4)),
        ("greedy", None),
        ("rehearsal", 1),
        ("free-trainer", 1),
    ]


def test_verify_vouches_for_the_served_log(served: Served) -> None:
    code, out, err = audit("verify", str(served.log), "--from-start", "--public-key", str(served.public_key))
    assert code == 0, out + err
    assert out.startswith("OK: ")
    assert "checkpoints verified" in out


READERS = [
    ("summary", ["summary", "LOG"]),
    ("summary json", ["summary", "LOG", "-o", "json"]),
    ("report", ["report", "LOG", "--out", "REPORT"]),
    ("query", ["query", "LOG"]),
    ("query json", ["query", "LOG", "-o", "json", "--namespace", "ml-team"]),
]


@pytest.mark.parametrize("argv", [r[1] for r in READERS], ids=[r[0] for r in READERS])
def test_every_reader_says_when_the_served_log_was_edited(
    served: Served, tmp_path: Path, argv: list[str]
) -> None:
    """Someone gives ml-team's trainer fewer GPUs in the log: the chain catches it at that line."""
    copy = tmp_path / "audit.log"
    data = lines(served.log)
    index = next(i for i, line in enumerate(data) if b'"name":"trainer"' in line and b'"gpus":2.0' in line)
    record = orjson.loads(data[index])
    record["gpus"] = 0.5
    data[index] = line_of(record)
    rewrite(copy, data)
    report = tmp_path / "report.html"
    code, out, err = audit(*[str(copy) if a == "LOG" else str(report) if a == "REPORT" else a for a in argv])
    assert code == 1, (out, err)
    assert out.strip(), "what could be read is still printed"
    (message,) = err.splitlines()
    assert f"fails verification at {copy}:{index + 1} (seq {record['seq']}): edited" in message
    if argv[0] == "report":
        assert 'data-verification="failed"' in report.read_text()
