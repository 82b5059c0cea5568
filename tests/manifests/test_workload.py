"""The StatefulSet and its companions: available, least-privileged, and consistent with each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.manifests.objects import one
from tests.support.policies import TEAM_SHARING
from webhook.bundle import ship
from webhook.cli import build_parser
from webhook.dra.index import DRA_KINDS, GROUP
from webhook.manifests import Manifest
from webhook.scan.kinds import SCAN_KINDS

Spec = dict[str, Any]
TLS_DIR = Path("/etc/gpu-webhook/tls")
POLICY_DIR = Path("/etc/gpu-webhook/policies")


@pytest.fixture(scope="module")
def pod_spec(rendered: list[Manifest]) -> Spec:
    spec: Spec = one(rendered, "StatefulSet")["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def webhook_container(pod_spec: Spec) -> Spec:
    (container,) = pod_spec["containers"]
    assert "initContainers" not in pod_spec
    return dict(container)


def test_highly_available(rendered: list[Manifest], pod_spec: Spec) -> None:
    spec = one(rendered, "StatefulSet")["spec"]
    assert spec["replicas"] >= 2
    # One replica replaced at a time, each on its own volume; replicas start independently.
    assert spec["updateStrategy"]["type"] == "RollingUpdate"
    assert spec["podManagementPolicy"] == "Parallel"
    assert pod_spec["priorityClassName"] == "system-cluster-critical"
    by_key = {c["topologyKey"]: c for c in pod_spec["topologySpreadConstraints"]}
    hostname = by_key["kubernetes.io/hostname"]
    assert (hostname["maxSkew"], hostname["whenUnsatisfiable"]) == (1, "DoNotSchedule")
    assert hostname["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    pdb = one(rendered, "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == 1
    assert pdb["selector"] == spec["selector"]


def test_priority_class_is_admitted_by_a_scoped_quota(rendered: list[Manifest]) -> None:
    quota = one(rendered, "ResourceQuota")["spec"]
    (scope,) = quota["scopeSelector"]["matchExpressions"]
    assert scope == {"scopeName": "PriorityClass", "operator": "In", "values": ["system-cluster-critical"]}
    assert int(quota["hard"]["pods"]) > one(rendered, "StatefulSet")["spec"]["replicas"]


@pytest.mark.parametrize(("probe", "path"), [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")])
def test_probes_use_https(webhook_container: Spec, probe: str, path: str) -> None:
    get = webhook_container[probe]["httpGet"]
    assert (get["path"], get["port"], get["scheme"]) == (path, "https", "HTTPS")
    assert {"name": "https", "containerPort": 8443, "protocol": "TCP"} in webhook_container["ports"]


def test_liveness_is_slower_to_give_up_than_readiness(webhook_container: Spec) -> None:
    """A busy replica should leave the Service before kubelet considers killing it."""

    def patience(probe: Spec) -> int:
        return int(probe["periodSeconds"]) * int(probe["failureThreshold"])

    assert patience(webhook_container["livenessProbe"]) > patience(webhook_container["readinessProbe"])


def test_restricted_security_context(pod_spec: Spec, webhook_container: Spec) -> None:
    pod = pod_spec["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    container = webhook_container["securityContext"]
    assert container["runAsNonRoot"] is True
    assert container["readOnlyRootFilesystem"] is True
    assert container["allowPrivilegeEscalation"] is False
    assert container["capabilities"] == {"drop": ["ALL"]}
    assert container["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "privileged" not in container and "add" not in container["capabilities"]
    assert not pod_spec.get("hostNetwork") and not pod_spec.get("hostPID") and not pod_spec.get("hostIPC")


def test_requests_and_limits(webhook_container: Spec) -> None:
    resources = webhook_container["resources"]
    assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}


def _mounts(pod_spec: Spec, container: Spec, claims: Spec | None = None) -> dict[Path, tuple[Spec, Spec]]:
    """mountPath -> (mount, volume); a claim template counts as a volume of the same name."""
    volumes = {volume["name"]: volume for volume in pod_spec["volumes"]}
    for name, claim in (claims or {}).items():
        volumes[name] = {"name": name, "persistentVolumeClaim": claim}
    return {Path(m["mountPath"]): (m, volumes[m["name"]]) for m in container["volumeMounts"]}


def test_tls_and_policies_are_mounted_whole_and_read_only(
    rendered: list[Manifest], pod_spec: Spec, webhook_container: Spec
) -> None:
    """No subPath: only whole-volume mounts see Secret rotation and ConfigMap `..data` swaps."""
    mounts = _mounts(pod_spec, webhook_container, _claims(rendered))
    tls_mount, tls_volume = mounts[TLS_DIR]
    policy_mount, policy_volume = mounts[POLICY_DIR]
    assert tls_volume["secret"]["secretName"] == one(rendered, "Secret")["metadata"]["name"]
    assert policy_volume["configMap"]["name"] == one(rendered, "ConfigMap")["metadata"]["name"]
    assert "items" not in policy_volume["configMap"]
    for mount in (tls_mount, policy_mount):
        assert mount["readOnly"] is True
        assert "subPath" not in mount and "subPathExpr" not in mount


def _claims(rendered: list[Manifest]) -> dict[str, Spec]:
    templates = one(rendered, "StatefulSet")["spec"].get("volumeClaimTemplates", [])
    return {claim["metadata"]["name"]: claim for claim in templates}


def test_the_audit_log_is_on_a_volume_of_its_own_replica(
    rendered: list[Manifest], pod_spec: Spec, webhook_container: Spec
) -> None:
    """A deleted or moved replica comes back with the same claim, so its log continues:
    the log sits on a claim template (one PersistentVolumeClaim per replica), never on an
    emptyDir, and the claims outlive scale-down and deletion."""
    statefulset = one(rendered, "StatefulSet")
    mounts = _mounts(pod_spec, webhook_container, _claims(rendered))
    audit_log = _serve_args(webhook_container).audit_log
    (mount, volume), *others = [v for path, v in mounts.items() if audit_log.is_relative_to(path)]
    assert not others and not mount.get("readOnly")
    claim = volume["persistentVolumeClaim"]["spec"]
    assert claim["accessModes"] == ["ReadWriteOnce"]
    assert "storage" in claim["resources"]["requests"]
    assert statefulset["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    # The replica names itself in the chain's `start` record: its stable pod name and node.
    env = {
        e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        for e in webhook_container["env"]
    }
    assert env["GPU_WEBHOOK_AUDIT_REPLICA"] == "metadata.name"
    assert env["GPU_WEBHOOK_AUDIT_NODE"] == "spec.nodeName"


def test_every_other_writable_path_is_bounded_scratch(
    rendered: list[Manifest], pod_spec: Spec, webhook_container: Spec
) -> None:
    claims = _claims(rendered)
    for path, (mount, volume) in _mounts(pod_spec, webhook_container, claims).items():
        if not mount.get("readOnly") and mount["name"] not in claims:
            assert set(volume) == {"name", "emptyDir"}, path
            assert "sizeLimit" in volume["emptyDir"], path


def _serve_args(container: Spec) -> Any:
    assert container["command"] == ["gpu-webhook", "serve"]
    return build_parser().parse_args(["serve", *container["args"]])


def test_the_server_is_started_with_flags_it_knows(webhook_container: Spec) -> None:
    """Parsed by the real `serve` parser: a renamed or removed flag fails here, not in the cluster."""
    args = _serve_args(webhook_container)
    assert (args.host, args.port) == ("0.0.0.0", 8443)
    assert (args.cert_dir, args.policies) == (TLS_DIR, [POLICY_DIR])  # --policies is repeatable
    assert args.failure_mode == "closed"
    assert all(arg.startswith("--") and "=" in arg for arg in webhook_container["args"])


def test_service_and_network_policy_expose_only_the_https_port(rendered: list[Manifest]) -> None:
    deployment = one(rendered, "StatefulSet")
    (port,) = one(rendered, "Service")["spec"]["ports"]
    assert (port["port"], port["targetPort"], port["protocol"]) == (443, "https", "TCP")
    assert one(rendered, "Service")["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    policy = one(rendered, "NetworkPolicy")["spec"]
    assert policy["podSelector"] == deployment["spec"]["selector"]
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8443}]


def _rules(obj: Manifest) -> list[Spec]:
    rules: list[Spec] = obj["rules"]
    return rules


@pytest.mark.parametrize("kind", ["ClusterRole", "Role"])
def test_rbac_has_no_wildcards_and_no_secrets(rendered: list[Manifest], kind: str) -> None:
    for rule in _rules(one(rendered, kind)):
        for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            assert "*" not in rule.get(key, []), (kind, rule)
        assert "secrets" not in rule["resources"]
        assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"])
        if "delete" in rule["verbs"]:  # only the keeper's own templates, retired after a grace period
            assert (rule["apiGroups"], rule["resources"]) == (["resource.k8s.io"], ["resourceclaimtemplates"])


def _grants(role: Manifest) -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> verbs, over every rule of a role."""
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in _rules(role):
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


READ = {"get", "list", "watch"}
SCANNED = {
    ("", "replicationcontrollers"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("apps", "replicasets"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
}


def test_cluster_role_reads_what_the_caches_and_the_scan_read_and_writes_only_templates(
    rendered: list[Manifest],
) -> None:
    dra = {
        ("resource.k8s.io", r): READ
        for r in ("resourceclaims", "resourceclaimtemplates", "deviceclasses", "resourceslices")
    }
    dra[("resource.k8s.io", "resourceclaimtemplates")] = READ | {"create", "update", "delete"}
    caches = {("", "pods"): READ, ("", "namespaces"): READ, ("", "nodes"): READ}  # nodes: resource names
    expected = caches | dict.fromkeys(SCANNED, READ) | dra
    assert _grants(one(rendered, "ClusterRole")) == expected


def test_the_cluster_role_covers_every_kind_the_scan_lists(rendered: list[Manifest]) -> None:
    granted = _grants(one(rendered, "ClusterRole"))
    for kind in SCAN_KINDS:
        assert granted[(kind.group, kind.resource)] >= READ, kind


def test_the_cluster_role_reads_every_dra_kind_the_caches_watch(rendered: list[Manifest]) -> None:
    """Slices too: without them claims still resolve, but count conservatively."""
    granted = _grants(one(rendered, "ClusterRole"))
    for resource in DRA_KINDS:
        assert granted[(GROUP, resource)] >= READ, resource


def test_namespaced_role_covers_the_ledger_the_leases_and_denial_events(rendered: list[Manifest]) -> None:
    """Events: --emit-denial-events (webhook/events.py) creates them and patches their count."""
    role = one(rendered, "Role")
    assert role["metadata"]["namespace"] == "gpu-system"
    by_name = {"get", "create", "update"}  # both are read and written by name: no list, no watch
    assert _grants(role) == {
        ("coordination.k8s.io", "leases"): by_name,
        ("", "configmaps"): by_name,
        ("", "events"): {"create", "patch"},
    }


def test_the_deployment_scans_hourly(rendered: list[Manifest]) -> None:
    args = one(rendered, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--scan-interval=3600" in args


@pytest.mark.parametrize(
    ("binding", "role"), [("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")]
)
def test_bindings_grant_our_service_account_only(rendered: list[Manifest], binding: str, role: str) -> None:
    bound = one(rendered, binding)
    account = one(rendered, "ServiceAccount")["metadata"]
    assert bound["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role,
        "name": one(rendered, role)["metadata"]["name"],
    }
    assert bound["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]
    assert one(rendered, "StatefulSet")["spec"]["template"]["spec"]["serviceAccountName"] == account["name"]


def test_the_namespace_enforces_the_restricted_pod_security_standard(rendered: list[Manifest]) -> None:
    labels = one(rendered, "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_policies_config_map_holds_the_bundle_and_the_team_policies(rendered: list[Manifest]) -> None:
    """The packaged security bundle under `security__`, the team's directory flattened, its suite left out."""
    assert one(rendered, "ConfigMap")["data"] == {**ship([]).data, "team__sharing.yaml": TEAM_SHARING}


def test_the_service_monitor_scrapes_our_service_with_our_ca(rendered: list[Manifest]) -> None:
    (monitor,) = yaml.safe_load_all((REPO / "manifests/monitoring/servicemonitor.yaml").read_text())
    service = one(rendered, "Service")
    secret = one(rendered, "Secret")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [service["metadata"]["namespace"]]}
    assert monitor["metadata"]["namespace"] == secret["metadata"]["namespace"]
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert (endpoint["scheme"], endpoint["path"]) == ("https", "/metrics")
    assert endpoint["tlsConfig"]["ca"]["secret"] == {"name": secret["metadata"]["name"], "key": "ca.crt"}
    assert endpoint["tlsConfig"]["serverName"] == "gpu-webhook.gpu-system.svc"
