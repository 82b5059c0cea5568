"""`gpu-webhook manifests`: the whole install as multi-document YAML, rendered from manifests/base.

The kustomize base is the single source: this module reads its files in kustomization order and
only fills in what a plain base cannot know (namespace, image, replicas, the TLS Secret, the
caBundle, a team's own policy files, the failure policies, the control plane's addresses, the
StorageClass), so `kubectl kustomize manifests/base` and this output cannot drift. Where a
kustomize component does the same (control-plane-only, non-gpu-fail-open), tests/manifests keep
the two equal. The policies ConfigMap always carries the security bundle the package ships
(bundle.py).
"""

from __future__ import annotations

import argparse
import base64
import copy
import datetime as dt
import ipaddress
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from webhook import __version__, bundle, certs
from webhook.config import DEFAULT_NAMESPACE, exempt_namespaces
from webhook.errors import CertError, ConfigError
from webhook.policy.model import PolicySet

Manifest = dict[str, Any]
FailurePolicy = Literal["Fail", "Ignore"]

KUSTOMIZATION = "kustomization.yaml"
BASE_NAMESPACE = "gpu-system"
WORKLOADS_WEBHOOK = "workloads.validate.gpuwebhook.io"
GPU_MUTATING_WEBHOOK = "gpu-pods.mutate.gpuwebhook.io"
NON_GPU_MUTATING_WEBHOOK = "non-gpu-pods.mutate.gpuwebhook.io"
# Prometheus's namespace, admitted beside the control plane (as manifests/components/control-plane-only).
METRICS_NAMESPACE = "monitoring"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
SERVER = "StatefulSet"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# An image reference as container runtimes parse it: [host[:port]/]path[:tag][@digest].
_HOST_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_HOST = rf"(?:{_HOST_LABEL}(?:\.{_HOST_LABEL})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"^(?:{_HOST}/)?{_PATH}(?:/{_PATH})*(?::[\w][\w.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)
_WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
_PACKAGED_BASE = Path(__file__).resolve().parent / "base_manifests"
_CHECKOUT_BASE = Path(__file__).resolve().parent.parent / "manifests" / "base"


@dataclass(frozen=True)
class RenderOptions:
    """What the base does not know. None means: keep the base's value."""

    namespace: str = DEFAULT_NAMESPACE
    image: str | None = None
    replicas: int | None = None
    cert_dir: Path | None = None
    policies: Mapping[str, str] | None = None
    # Every webhook that pods without GPUs pass: non-gpu-pods.mutate and workloads.validate.
    non_gpu_failure_policy: FailurePolicy = "Fail"
    # workloads.validate alone (pods without GPUs and workload templates); None: as the above.
    workloads_failure_policy: FailurePolicy | None = None
    serve_flags: Mapping[str, str] = field(default_factory=dict)
    # Only these addresses (and Prometheus's namespace) may reach the server's port; empty: anyone.
    control_plane_cidrs: Sequence[str] = ()
    storage_class: str | None = None


# serve --scan-publish's report resources by API flavour, as webhook.scan.reports.APIS names them
# (tests/manifests/test_report_rbac.py holds the two together; this layer cannot import the scan).
REPORT_RESOURCES: Mapping[str, tuple[str, tuple[str, str]]] = {
    "policyreport": ("wgpolicyk8s.io", ("policyreports", "clusterpolicyreports")),
    "openreports": ("openreports.io", ("reports", "clusterreports")),
}


def base_directory() -> Path:
    """The kustomize base: packaged with the wheel (a symlink in a checkout), or the checkout's own."""
    for candidate in (_PACKAGED_BASE, _CHECKOUT_BASE):
        if (candidate / KUSTOMIZATION).is_file():
            return candidate
    raise ConfigError(f"the kustomize base is missing; looked in {_PACKAGED_BASE} and {_CHECKOUT_BASE}")


def load_base(directory: Path | None = None) -> list[Manifest]:
    """Every object of the base, in the order its kustomization lists the files."""
    directory = directory or base_directory()
    kustomization = yaml.safe_load((directory / KUSTOMIZATION).read_text("utf-8"))
    objects: list[Manifest] = []
    for resource in kustomization["resources"]:
        text = (directory / resource).read_text("utf-8")
        objects += [_plain(doc) for doc in yaml.safe_load_all(text) if doc is not None]
    return objects


def _plain(document: Any) -> Manifest:
    """JSON-shaped and unshared: a YAML alias must not tie two objects together once edited."""
    plain: Manifest = json.loads(json.dumps(document))
    return plain


def render(options: RenderOptions, base: list[Manifest] | None = None) -> list[Manifest]:
    """The base with `options` applied; a TLS Secret is added when a cert dir is given."""
    objects = copy.deepcopy(base if base is not None else load_base())
    _check_namespace(options.namespace)
    _check_image(options.image)
    cidrs = control_plane_networks(options.control_plane_cidrs)
    for obj in objects:
        _move_namespace(obj, BASE_NAMESPACE, options.namespace)
    server = find(objects, SERVER)
    _configure_server(server, options)
    _fit_quota(find(objects, "ResourceQuota"), server["spec"]["replicas"])
    _set_failure_policy(objects, NON_GPU_MUTATING_WEBHOOK, options.non_gpu_failure_policy)
    workloads = options.workloads_failure_policy or options.non_gpu_failure_policy
    _set_failure_policy(objects, WORKLOADS_WEBHOOK, workloads)
    if cidrs:
        restrict_ingress(find(objects, "NetworkPolicy"), cidrs)
    if options.policies is not None:
        find(objects, "ConfigMap")["data"] = dict(options.policies)
    if options.cert_dir is not None:
        _add_certificates(objects, options.cert_dir, options.namespace)
    _grant_reports(find(objects, "ClusterRole"), options.serve_flags.get("scan-publish"))
    return objects


def _grant_reports(role: Manifest, flavour: str | None) -> None:
    """With serve --scan-publish, the scan writes one report per namespace: it may then read, create
    and update the reports of that API group (by name: it never lists them), and nothing else."""
    granted = REPORT_RESOURCES.get(flavour or "")
    if granted is not None:
        group, resources = granted
        role["rules"].append(
            {"apiGroups": [group], "resources": list(resources), "verbs": ["get", "create", "update"]}
        )


def _add_certificates(objects: list[Manifest], cert_dir: Path, namespace: str) -> None:
    """The TLS Secret the server mounts, placed before it, and the CA in every caBundle."""
    check_serving_cert(cert_dir, find(objects, "Service")["metadata"]["name"], namespace)
    for webhook in webhooks(objects):
        webhook["clientConfig"]["caBundle"] = certs.ca_bundle(cert_dir)
    secret = tls_secret(cert_dir, _tls_secret_name(find(objects, SERVER)), namespace)
    objects.insert(objects.index(find(objects, "ConfigMap")) + 1, secret)


def to_yaml(objects: list[Manifest]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, explicit_start=True, width=100)


def find(objects: list[Manifest], kind: str) -> Manifest:
    """The one object of `kind`; the base has exactly one of each kind this module edits."""
    (found,) = (obj for obj in objects if obj["kind"] == kind)
    return found


def webhooks(objects: list[Manifest]) -> Iterator[dict[str, Any]]:
    for obj in objects:
        if obj["kind"] in _WEBHOOK_KINDS:
            yield from obj["webhooks"]


def set_flag(args: list[str], flag: str, value: str) -> list[str]:
    """`args` with `--flag=value` in place of an earlier setting of that flag, or appended."""
    option = "--" + flag.removeprefix("--")
    setting = f"{option}={value}"
    positions = [i for i, arg in enumerate(args) if arg == option or arg.startswith(option + "=")]
    if not positions:
        return [*args, setting]
    kept = [arg for i, arg in enumerate(args) if i not in positions[1:]]
    kept[positions[0]] = setting
    return kept


def tls_secret(cert_dir: Path, name: str, namespace: str) -> Manifest:
    data = {
        file: base64.b64encode(_read_bytes(cert_dir / file)).decode("ascii")
        for file in (certs.CA_CERT, certs.TLS_CERT, certs.TLS_KEY)
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "gpu-webhook"},
        },
        "type": "kubernetes.io/tls",
        "data": data,
    }


def check_serving_cert(cert_dir: Path, service: str, namespace: str, now: dt.datetime | None = None) -> None:
    """Refuse certificates kube-apiserver would reject: with failurePolicy Fail that blocks GPU pods."""
    serving = certs.describe(cert_dir)[certs.TLS_CERT]
    wanted = f"{service}.{namespace}.svc"
    if wanted not in serving.dns_names:
        named = ", ".join(serving.dns_names)
        raise CertError(
            f"{cert_dir / certs.TLS_CERT} is not valid for {wanted} (it names {named}); "
            f"run `gpu-webhook certs generate --out DIR --service {service} --namespace {namespace}`"
        )
    if serving.not_after <= (now or dt.datetime.now(dt.UTC)):
        raise CertError(f"{cert_dir / certs.TLS_CERT} expired on {serving.not_after:%Y-%m-%d}")


def _move_namespace(node: Any, old: str, new: str) -> None:
    """Rename our namespace wherever the base names it: metadata, subjects, services, selectors."""
    if isinstance(node, dict):
        if node.get("kind") == "Namespace" and node["metadata"]["name"] == old:
            node["metadata"]["name"] = new
        if node.get("namespace") == old:
            node["namespace"] = new
        if node.get("key") == NAMESPACE_NAME_LABEL and isinstance(node.get("values"), list):
            node["values"] = [new if value == old else value for value in node["values"]]
        for value in node.values():
            _move_namespace(value, old, new)
    elif isinstance(node, list):
        for item in node:
            _move_namespace(item, old, new)


def server_args(objects: list[Manifest]) -> list[str]:
    """The `gpu-webhook serve` arguments the rendered install runs with."""
    args: list[str] = find(objects, SERVER)["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def control_plane_networks(cidrs: Sequence[str]) -> list[str]:
    """Each CIDR in the form a NetworkPolicy's ipBlock takes (`10.0.0.5` becomes `10.0.0.5/32`)."""
    networks = []
    for text in cidrs:
        try:
            network = ipaddress.ip_network(text.strip(), strict=True)
        except ValueError as e:
            raise ConfigError(
                f"--control-plane-cidr {text!r}: {e}; expected a network such as 10.0.0.0/28"
            ) from e
        if network.prefixlen == 0:
            raise ConfigError(
                f"--control-plane-cidr {text!r} admits every address; leave the flag out instead"
            )
        networks.append(str(network))
    return networks


def restrict_ingress(policy: Manifest, cidrs: Sequence[str]) -> None:
    """The NetworkPolicy of manifests/components/control-plane-only, for these addresses: only the
    control plane, and Prometheus's namespace, may reach the server's port."""
    ports = [port for rule in policy["spec"]["ingress"] for port in rule["ports"]]
    metrics = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: METRICS_NAMESPACE}}}
    policy["spec"]["ingress"] = [
        {"from": [{"ipBlock": {"cidr": cidr}} for cidr in cidrs], "ports": copy.deepcopy(ports)},
        {"from": [metrics], "ports": copy.deepcopy(ports)},
    ]


def _configure_server(server: Manifest, options: RenderOptions) -> None:
    if options.replicas is not None:
        server["spec"]["replicas"] = options.replicas
    if options.storage_class is not None:
        _check_storage_class(options.storage_class)
        for claim in server["spec"]["volumeClaimTemplates"]:
            claim["spec"]["storageClassName"] = options.storage_class
    container = server["spec"]["template"]["spec"]["containers"][0]
    if options.image is not None:
        container["image"] = options.image
    # Never review our own namespace or our own requests, wherever we are installed: no deadlock.
    exempt = ",".join(exempt_namespaces(options.namespace))
    container["args"] = set_flag(container["args"], "--exclude-namespaces", exempt)
    account = server["spec"]["template"]["spec"].get("serviceAccountName", "gpu-webhook")
    own = f"system:serviceaccount:{options.namespace}:{account}"
    container["args"] = set_flag(container["args"], "--own-username", own)
    for flag, value in options.serve_flags.items():
        container["args"] = set_flag(container["args"], flag, value)


def _fit_quota(quota: Manifest, replicas: int) -> None:
    """Leave room for every replica plus the one a rolling update surges."""
    hard = quota["spec"]["hard"]
    hard["pods"] = str(max(int(hard["pods"]), replicas + 1))


def _set_failure_policy(objects: list[Manifest], name: str, policy: FailurePolicy) -> None:
    (webhook,) = (hook for hook in webhooks(objects) if hook["name"] == name)
    webhook["failurePolicy"] = policy


def _tls_secret_name(server: Manifest) -> str:
    volumes = server["spec"]["template"]["spec"]["volumes"]
    (name,) = (volume["secret"]["secretName"] for volume in volumes if "secret" in volume)
    return str(name)


def _check_namespace(namespace: str) -> None:
    if not _DNS_LABEL.fullmatch(namespace):
        raise ConfigError(f"namespace {namespace!r} is not a valid DNS label")


def _check_image(image: str | None) -> None:
    if image is not None and not _IMAGE.fullmatch(image):
        raise ConfigError(
            f"--image {image!r} is not an image reference such as registry.example.com/gpu-webhook:1.0"
        )


def _check_storage_class(name: str) -> None:
    if not _DNS_SUBDOMAIN.fullmatch(name):
        raise ConfigError(
            f"--storage-class {name!r} is not a StorageClass name (lowercase letters, digits, '-' and '.')"
        )


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from e


# The command line. cli.py registers it with one call, keeping this feature's flags in one place.

ArgsCheck = Callable[[Sequence[str]], None]


def add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], check_serve_args: ArgsCheck
) -> None:
    parser = commands.add_parser(
        "manifests",
        help="print the Kubernetes install as multi-document YAML",
        description="Print the install (manifests/base with everything filled in) for `kubectl apply -f -`. "
        "The policies ConfigMap holds the default security bundle, plus your own policies with --policies.",
    )
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help="where the webhook runs")
    parser.add_argument(
        "--cert-dir",
        type=Path,
        help="ca.crt, tls.crt and tls.key: the TLS Secret and every caBundle; omit with cert-manager",
    )
    parser.add_argument(
        "--image",
        help="the image built from Containerfile, where your nodes pull it; default: the base's "
        "placeholder gpu-webhook:" + __version__,
    )
    parser.add_argument("--replicas", type=_at_least_one, help="default: the base's")
    parser.add_argument(
        "--control-plane-cidr",
        action="append",
        default=[],
        metavar="CIDR",
        help="only these addresses (kube-apiserver's) and the monitoring namespace may reach the server; "
        "repeatable. Default: any address may",
    )
    parser.add_argument(
        "--storage-class",
        metavar="NAME",
        help="StorageClass of each replica's audit log volume; default: the cluster's default StorageClass",
    )
    parser.add_argument(
        "--policies",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="a directory of your own policies (GPU sharing, quotas, more constraints), shipped beside "
        "the security bundle; repeatable. Test suites (*.test.yaml) in it are left out",
    )
    parser.add_argument(
        "--no-security-bundle",
        action="store_true",
        help="leave the default security bundle out, for a team that ships its own copy with --policies",
    )
    parser.add_argument(
        "--allow-empty-policies",
        action="store_true",
        help="render even when no policy would be shipped (the webhook would then enforce nothing)",
    )
    parser.add_argument(
        "--non-gpu-failure-policy",
        choices=["Fail", "Ignore"],
        default="Fail",
        help=f"failurePolicy of {NON_GPU_MUTATING_WEBHOOK} and {WORKLOADS_WEBHOOK}, which pods without "
        "GPUs pass: Fail stops them while the webhook is down, Ignore admits them without "
        "NVIDIA_VISIBLE_DEVICES=void and the escape rules (docs/operations.md)",
    )
    parser.add_argument(
        "--workloads-failure-policy",
        choices=["Fail", "Ignore"],
        help=f"failurePolicy of {WORKLOADS_WEBHOOK} alone (escape rules and workload templates); "
        "default: --non-gpu-failure-policy",
    )
    parser.add_argument(
        "--serve-flag",
        action="append",
        default=[],
        metavar="FLAG=VALUE",
        type=_flag_assignment,
        help="set a `gpu-webhook serve` flag in the StatefulSet, e.g. log-level=debug; repeatable",
    )
    parser.set_defaults(command=lambda args: _run(args, check_serve_args))


def _run(args: argparse.Namespace, check_serve_args: ArgsCheck) -> int:
    shipment = bundle.ship(args.policies, bundle=not args.no_security_bundle)
    policies = bundle.compile_shipment(shipment)
    if bundle.is_empty(policies) and not args.allow_empty_policies:
        raise ConfigError(
            "no policies to ship: the webhook would sit in every pod creation and enforce nothing. "
            "Keep the security bundle, give --policies DIR, or pass --allow-empty-policies"
        )
    options = RenderOptions(
        namespace=args.namespace,
        image=args.image,
        replicas=args.replicas,
        cert_dir=args.cert_dir,
        policies=shipment.data,
        non_gpu_failure_policy=args.non_gpu_failure_policy,
        workloads_failure_policy=args.workloads_failure_policy,
        # The ConfigMap is the whole set when the bundle is left out of it: the server must not
        # add its packaged copy back.
        serve_flags={**({"no-bundle": "true"} if args.no_security_bundle else {}), **dict(args.serve_flag)},
        control_plane_cidrs=args.control_plane_cidr,
        storage_class=args.storage_class,
    )
    objects = render(options)
    check_serve_args(server_args(objects))
    for note in _notes(options, shipment, policies):
        print(f"gpu-webhook manifests: {note}", file=sys.stderr)
    sys.stdout.write(to_yaml(objects))
    return 0


def _notes(options: RenderOptions, shipment: bundle.Shipment, policies: PolicySet) -> list[str]:
    notes = [f"left out {reason}" for reason in shipment.skipped]
    constraints = len(policies.constraints) if policies.constraints is not None else 0
    notes.append(
        f"policies: {len(shipment.data)} files; constraints: {constraints}, "
        f"GPU sharing policies: {len(policies.sharing)}, GPU quotas: {len(policies.quotas)}"
    )
    if options.cert_dir is None:
        notes.append(
            "no --cert-dir: no TLS Secret and no caBundle are rendered; cert-manager or you must provide them"
        )
    if options.replicas == 1:
        notes.append("one replica is not highly available: GPU pods cannot start while it restarts")
    if options.image is None:
        notes.append(
            f"no --image: the StatefulSet runs the placeholder gpu-webhook:{__version__}; "
            "build Containerfile, push it where your nodes pull from, and pass --image"
        )
    if options.storage_class is None:
        notes.append("no --storage-class: the audit log volumes need a default StorageClass in the cluster")
    workloads = options.workloads_failure_policy or options.non_gpu_failure_policy
    if options.non_gpu_failure_policy == "Fail" and workloads == "Ignore":
        notes.append(
            f"{NON_GPU_MUTATING_WEBHOOK} still fails closed: pods without GPUs cannot start while the "
            "webhook is down (--non-gpu-failure-policy Ignore lets them)"
        )
    return notes


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _flag_assignment(text: str) -> tuple[str, str]:
    flag, equals, value = text.partition("=")
    if not equals or not flag.strip("-"):
        raise argparse.ArgumentTypeError(f"expected FLAG=VALUE, got {text!r}")
    return flag.strip("-"), value
