"""Documents of other projects' kinds are skipped and reported; they never take the set down.

Our own API group is different: an unknown kind there is a typo in a policy meant for us, and
rejects the set so the last good one stays in force (tests/policy/test_loader.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.cli.test_offline_commands import gpu_webhook
from webhook.errors import PolicyError
from webhook.metrics import Metrics
from webhook.policy.loader import load_directory
from webhook.policy.sources import PolicySources
from webhook.policy.store import PolicyStore
from webhook.policy.watch import PolicyWatcher

SHARING = (
    "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUSharingPolicy\nmetadata: {{name: p}}\n"
    "spec:\n  match: {{namespaces: [team]}}\n  sharing: {{mode: {mode}}}\n"
)
KYVERNO = """# a Kyverno policy kept beside ours
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-labels}
spec: {rules: []}
"""

# (file text, where the skipped document's kind is, a fragment of its reason)
FOREIGN = [
    (KYVERNO, 3, "Kyverno policies are not run here"),
    (
        "apiVersion: expansion.gatekeeper.sh/v1alpha1\nkind: ExpansionTemplate\nmetadata: {name: e}\n",
        2,
        "judges workload templates",
    ),
    (
        "apiVersion: externaldata.gatekeeper.sh/v1beta1\nkind: Provider\nmetadata: {name: x}\n",
        2,
        "external data providers",
    ),
    (
        "apiVersion: config.gatekeeper.sh/v1alpha1\nkind: Config\nmetadata: {name: config}\n",
        2,
        "server's flags",
    ),
    ("kind: Mystery\napiVersion: example.com/v9\n", 1, "GPUSharingPolicy (gpuwebhook.io/v1alpha1)"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", 2, "this engine loads"),
]


@pytest.mark.parametrize(("text", "line", "reason"), FOREIGN)
def test_a_foreign_kind_is_one_located_problem_and_the_rest_loads(
    tmp_path: Path, text: str, line: int, reason: str
) -> None:
    (tmp_path / "ours.yaml").write_text(SHARING.format(mode="timeslice"))
    (tmp_path / "theirs.yaml").write_text(text)
    policies = load_directory(tmp_path)
    assert [p.name for p in policies.sharing] == ["p"]
    [problem] = policies.skipped
    assert (problem.file, problem.line, problem.path) == (str(tmp_path / "theirs.yaml"), line, "kind")
    assert problem.reason.startswith("skipped, not enforced: unknown kind") and reason in problem.reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUMagic\nmetadata: {name: m}\n",
            "unknown kind 'GPUMagic'",
        ),
        ("kind: ClusterPolicy\nmetadata: {name: m}\n", "needs both apiVersion and kind"),
        ("apiVersion: kyverno.io/v1\nmetadata: {name: m}\n", "needs both apiVersion and kind"),
    ],
)
def test_our_own_group_and_half_documents_still_reject_the_set(
    tmp_path: Path, text: str, reason: str
) -> None:
    (tmp_path / "ours.yaml").write_text(SHARING.format(mode="timeslice"))
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(PolicyError) as info:
        load_directory(tmp_path)
    assert [p.file for p in info.value.problems] == [str(tmp_path / "bad.yaml")]
    assert reason in info.value.problems[0].reason


def test_a_rejected_set_still_names_what_it_would_skip(tmp_path: Path) -> None:
    (tmp_path / "ours.yaml").write_text(SHARING.format(mode="magic"))
    (tmp_path / "theirs.yaml").write_text(KYVERNO)
    with pytest.raises(PolicyError) as info:
        load_directory(tmp_path)
    assert [p.file for p in info.value.skipped] == [str(tmp_path / "theirs.yaml")]


def test_a_dropped_in_foreign_file_does_not_stop_later_reloads(tmp_path: Path) -> None:
    (tmp_path / "ours.yaml").write_text(SHARING.format(mode="mig, gpuModel: A100-40GB"))
    metrics = Metrics()
    store = PolicyStore(PolicySources((tmp_path,), bundle=False), metrics)
    store.load()
    watcher = PolicyWatcher(store, interval=60)
    asyncio.run(watcher.start())
    (tmp_path / "theirs.yaml").write_text(KYVERNO)
    assert asyncio.run(watcher.check()) is True  # the rest of the set is swapped in
    (tmp_path / "ours.yaml").write_text(SHARING.format(mode="timeslice"))
    assert asyncio.run(watcher.check()) is True
    assert store.current.sharing[0].sharing.mode == "timeslice" and store.last_error is None
    assert len(store.current.skipped) == 1
    assert b"gpu_webhook_policy_documents_skipped 1.0" in metrics.render()
    (tmp_path / "theirs.yaml").unlink()
    assert asyncio.run(watcher.check()) is True
    assert b"gpu_webhook_policy_documents_skipped 0.0" in metrics.render()


def test_policies_check_warns_and_strict_fails(tmp_path: Path) -> None:
    (tmp_path / "ours.yaml").write_text(SHARING.format(mode="timeslice"))
    (tmp_path / "theirs.yaml").write_text(KYVERNO)
    warned = gpu_webhook("policies", "check", "--no-bundle", str(tmp_path))
    assert warned.returncode == 0 and ", 1 document skipped; version " in warned.stdout
    assert warned.stderr.startswith(f"warning: {tmp_path / 'theirs.yaml'}:3: kind: skipped, not enforced")
    strict = gpu_webhook("policies", "check", "--no-bundle", "--strict", str(tmp_path))
    assert strict.returncode == 1
    assert strict.stderr.strip().splitlines()[-1] == f"1 document(s) skipped in {tmp_path}"
