"""The GPUQuota policy kind: its model and a strict parser. Pure.

    apiVersion: gpuwebhook.io/v1alpha1
    kind: GPUQuota
    metadata: {name: ml-team}
    spec:
      match: {namespaces: [ml-team], excludedNamespaces: [], namespaceSelector: {...}}
      limits: {gpus: 8, gpuMemory: 320Gi, resources: {nvidia.com/mig-1g.10gb: 14}}
      accounting: {cardMemory: 80Gi, sharedReplicas: {nvidia.com/gpu.shared: 4}}   # optional
      enforcementAction: deny          # deny | warn | dryrun

Field paths in problems use dots for fields and brackets for map keys and list
indexes: `spec.limits.resources[nvidia.com/gpu]`, `spec.match.namespaces[0]`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from typing import Any

from webhook import gpu, quantity
from webhook.accounting.demand import QuotaSettings
from webhook.accounting.tally import Amount, scaled, unit_of
from webhook.accounting.usage import GPU_MEMORY, GPUS
from webhook.errors import PolicyError, PolicyProblem
from webhook.match import LabelSelector, Match, SelectorError, check_glob
from webhook.types import EnforcementAction

API_VERSION = "gpuwebhook.io/v1alpha1"
KIND = "GPUQuota"
ACTIONS: tuple[EnforcementAction, ...] = ("deny", "warn", "dryrun")
# Bounds the memo of applies_to: namespaces are few, but a request can name any.
MAX_REMEMBERED_NAMESPACES = 4096
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_FIELDS = {
    "": {"apiVersion", "kind", "metadata", "spec"},
    "spec": {"match", "limits", "accounting", "enforcementAction"},
    "spec.match": {"namespaces", "excludedNamespaces", "namespaceSelector"},
    "spec.limits": {"gpus", "gpuMemory", "resources"},
    "spec.accounting": {"cardMemory", "gpuModel", "sharedReplicas"},
}


@dataclass(frozen=True)
class QuotaLimits:
    gpus: Fraction | None = None
    gpu_memory_mib: Fraction | None = None
    resources: tuple[tuple[str, Fraction], ...] = ()

    def items(self) -> list[tuple[str, Fraction]]:
        """(dimension, limit) for every limit that is set; dimensions as Usage.amount names them."""
        found = [(GPUS, self.gpus), (GPU_MEMORY, self.gpu_memory_mib), *self.resources]
        return [(name, limit) for name, limit in found if limit is not None]


@dataclass(frozen=True)
class GPUQuota:
    """One budget of GPU limits that every matching namespace gets on its own."""

    name: str
    limits: QuotaLimits
    match: Match = field(default_factory=Match)
    action: EnforcementAction = "deny"
    settings: QuotaSettings | None = None
    file: str = ""
    line: int = 0
    # Per policy load: whether the quota applies to a namespace, where its labels do not matter.
    _by_namespace: dict[str, bool] = field(
        init=False, default_factory=dict, compare=False, repr=False, hash=False
    )

    def applies_to(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.match.namespace_selector is not None:
            return self.match.matches(namespace, labels, {})
        found = self._by_namespace.get(namespace)
        if found is None:
            if len(self._by_namespace) >= MAX_REMEMBERED_NAMESPACES:
                self._by_namespace.clear()
            found = self._by_namespace[namespace] = self.match.matches(namespace, {}, {})
        return found

    @cached_property
    def limit_units(self) -> tuple[tuple[str, Amount], ...]:
        """limits.items() in each dimension's unit (webhook/accounting/tally.py), for integer checks."""
        return tuple(
            (dimension, scaled(limit, unit_of(dimension))) for dimension, limit in self.limits.items()
        )

    def settings_or(self, default: QuotaSettings) -> QuotaSettings:
        return self.settings or default


def parse_quota(doc: Mapping[str, Any], file: str, line_of: Callable[[str], int]) -> GPUQuota:
    """Build a GPUQuota, or raise PolicyError with every problem found (file, line, field path)."""
    parser = _Parser(file, line_of)
    quota = parser.quota(doc)
    if parser.problems or quota is None:
        raise PolicyError(parser.problems)
    return quota


def field_path(base: str, key: str | int) -> str:
    if isinstance(key, int) or not re.match(r"^[A-Za-z][A-Za-z0-9]*$", key):
        return f"{base}[{key}]"
    return f"{base}.{key}" if base else key


class _Parser:
    def __init__(self, file: str, line_of: Callable[[str], int]) -> None:
        self.file = file
        self.line_of = line_of
        self.problems: list[PolicyProblem] = []

    def problem(self, path: str, reason: str) -> None:
        self.problems.append(PolicyProblem(self.file, self.line_of(path), path, reason))

    def quota(self, doc: Mapping[str, Any]) -> GPUQuota | None:
        if not isinstance(doc, Mapping):
            self.problem("", "a policy must be a mapping")
            return None
        self.known_fields(doc, "")
        if doc.get("apiVersion") != API_VERSION:
            self.problem("apiVersion", f"must be {API_VERSION}, got {_show(doc.get('apiVersion'))}")
        if doc.get("kind") != KIND:
            self.problem("kind", f"must be {KIND}, got {_show(doc.get('kind'))}")
        name = self.name(doc.get("metadata"))
        spec = self.mapping(doc.get("spec"), "spec", required=True)
        limits = self.limits(self.mapping(spec.get("limits"), "spec.limits", required=bool(spec)))
        quota = GPUQuota(
            name=name,
            limits=limits,
            match=self.match(self.mapping(spec.get("match"), "spec.match")),
            action=self.action(spec.get("enforcementAction", "deny")),
            settings=self.accounting(spec.get("accounting")),
            file=self.file,
            line=self.line_of(""),
        )
        return None if self.problems else quota

    def known_fields(self, raw: Mapping[str, Any], path: str) -> None:
        for key in raw:
            if key not in _FIELDS[path]:
                expected = ", ".join(sorted(_FIELDS[path]))
                self.problem(field_path(path, str(key)), f"unknown field (expected one of {expected})")

    def mapping(self, value: object, path: str, *, required: bool = False) -> Mapping[str, Any]:
        if value is None:
            if required:
                self.problem(path, "is required")
            return {}
        if not isinstance(value, Mapping):
            self.problem(path, f"must be a mapping, got {type(value).__name__}")
            return {}
        if path in _FIELDS:
            self.known_fields(value, path)
        return value

    def name(self, metadata: object) -> str:
        meta = self.mapping(metadata, "metadata", required=True)
        name = meta.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            self.problem("metadata.name", f"must be a lower-case DNS name, got {_show(name)}")
            return ""
        return name

    def action(self, value: object) -> EnforcementAction:
        for action in ACTIONS:
            if value == action:
                return action
        self.problem("spec.enforcementAction", f"must be one of {', '.join(ACTIONS)}, got {_show(value)}")
        return "deny"

    def match(self, raw: Mapping[str, Any]) -> Match:
        selector = None
        if raw.get("namespaceSelector") is not None:
            selector = self.selector(raw["namespaceSelector"], "spec.match.namespaceSelector")
        return Match(
            namespaces=self.globs(raw.get("namespaces"), "spec.match.namespaces"),
            excluded_namespaces=self.globs(raw.get("excludedNamespaces"), "spec.match.excludedNamespaces"),
            namespace_selector=selector,
        )

    def globs(self, value: object, path: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.problem(path, "must be a list of namespace names or globs")
            return ()
        for index, pattern in enumerate(value):
            try:
                check_glob(pattern if isinstance(pattern, str) else "")
            except SelectorError as e:
                self.problem(
                    field_path(path, index), e.reason if isinstance(pattern, str) else "must be a string"
                )
        return tuple(p for p in value if isinstance(p, str))

    def selector(self, value: object, path: str) -> LabelSelector | None:
        if not isinstance(value, Mapping):
            self.problem(path, "must be a label selector mapping")
            return None
        unknown = set(value) - {"matchLabels", "matchExpressions"}
        for key in sorted(unknown, key=str):
            self.problem(field_path(path, str(key)), "unknown field (expected matchLabels, matchExpressions)")
        try:
            return LabelSelector.parse(value)
        except SelectorError as e:
            self.problem(f"{path}.{e.path}" if e.path else path, e.reason)
        except (AttributeError, TypeError):
            self.problem(path, "matchLabels must be a mapping and matchExpressions a list of mappings")
        return None

    def limits(self, raw: Mapping[str, Any]) -> QuotaLimits:
        gpus = self.amount(raw.get("gpus"), "spec.limits.gpus")
        memory = self.memory(raw.get("gpuMemory"), "spec.limits.gpuMemory")
        resources = self.resources(raw.get("resources"), "spec.limits.resources")
        limits = QuotaLimits(gpus, memory, resources)
        reported = any(p.path == "spec" or p.path.startswith("spec.limits") for p in self.problems)
        if not limits.items() and not reported:
            self.problem("spec.limits", "must set at least one of gpus, gpuMemory, resources")
        return limits

    def amount(self, value: object, path: str) -> Fraction | None:
        if value is None:
            return None
        try:
            amount = quantity.parse(value)
        except quantity.QuantityError as e:
            self.problem(path, str(e))
            return None
        if amount < 0:
            self.problem(path, f"must not be negative, got {_show(value)}")
            return None
        return amount

    def memory(self, value: object, path: str) -> Fraction | None:
        amount = self.amount(value, path)
        return None if amount is None else amount / quantity.MiB

    def resources(self, value: object, path: str) -> tuple[tuple[str, Fraction], ...]:
        if value is None:
            return ()
        if not isinstance(value, Mapping):
            self.problem(path, "must map resource names to counts")
            return ()
        found: list[tuple[str, Fraction]] = []
        for name, raw in value.items():
            where = field_path(path, str(name))
            if not isinstance(name, str) or not _RESOURCE.fullmatch(name):
                self.problem(where, f"{_show(name)} is not an extended resource name like nvidia.com/gpu")
                continue
            if gpu.is_mig_resource(name) and gpu.parse_mig_resource(name) is None:
                # The device plugin never advertises it (k8s-device-plugin internal/rm/rm.go).
                self.problem(where, f"{name} is not a MIG profile the device plugin advertises")
                continue
            amount = self.amount(raw, where)
            if amount is not None and amount.denominator != 1:
                self.problem(where, f"must be a whole number of devices, got {_show(raw)}")
            elif amount is not None:
                found.append((name, amount))
        return tuple(sorted(found))

    def accounting(self, value: object) -> QuotaSettings | None:
        if value is None:
            return None
        raw = self.mapping(value, "spec.accounting")
        settings = QuotaSettings()
        model = raw.get("gpuModel")
        if model is not None:
            if model not in gpu.GPU_MODELS:
                known = ", ".join(gpu.GPU_MODELS)
                self.problem("spec.accounting.gpuModel", f"unknown GPU model {_show(model)} (known: {known})")
            else:
                settings = replace(
                    settings,
                    card_memory_mib=gpu.model_memory_mib(model),
                    mig_slices_per_gpu=gpu.model_slices(model),  # 4 on A30 and RTX PRO 6000
                    gpu_model=model,
                )
        card = self.memory(raw.get("cardMemory"), "spec.accounting.cardMemory")
        if card is not None and model is not None:
            self.problem("spec.accounting.cardMemory", "set gpuModel or cardMemory, not both")
        elif card is not None and card < 1:
            self.problem("spec.accounting.cardMemory", "must be at least 1Mi")
        elif card is not None:
            settings = replace(settings, card_memory_mib=int(card))
        replicas = self.replicas(raw.get("sharedReplicas"), "spec.accounting.sharedReplicas")
        if replicas is not None:
            settings = replace(settings, shared_replicas=replicas)
        return settings

    def replicas(self, value: object, path: str) -> tuple[tuple[str, int], ...] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.problem(path, "must map resource names to replica counts")
            return None
        found: list[tuple[str, int]] = []
        for name, raw in value.items():
            where = field_path(path, str(name))
            if not isinstance(name, str) or not _RESOURCE.fullmatch(name):
                self.problem(where, f"{_show(name)} is not an extended resource name")
            elif isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
                self.problem(where, f"replicas must be a whole number of at least 1, got {_show(raw)}")
            else:
                found.append((name, raw))
        return tuple(sorted(found))


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
