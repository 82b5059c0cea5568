"""check_quota(): one admission request against the GPUQuotas of its namespace. Pure.

The state is read through QuotaView, so the same function serves the live cache,
an inventory file and the strict-mode ledger. The outcome keeps the usage before
and after, for the decision message and for the audit log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple, Protocol

from webhook.accounting.count import GpuCount
from webhook.accounting.demand import (
    DEFAULT_SETTINGS,
    PodShape,
    QuotaInputError,
    QuotaSettings,
    is_finished,
    pod_shape,
)
from webhook.accounting.tally import (
    NONE,
    Amount,
    Tally,
    canonical,
    demand_tally,
    exact_text,
    unit_of,
    unscaled,
)
from webhook.accounting.tally import demand as quota_demand
from webhook.accounting.usage import GPU_MEMORY, GPUS, NOTHING, Usage, format_dimension
from webhook.decision import Decision, Finding, clamp_warnings, deny
from webhook.dra.index import DraIndex
from webhook.quota.policy import GPUQuota
from webhook.types import AdmissionRequest, EnforcementAction, KubeObject

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
ACTION_RANK: dict[EnforcementAction, int] = {"dryrun": 0, "warn": 1, "deny": 2}


class QuotaView(Protocol):
    """Read access to cluster state, as quota needs it."""

    def namespace_labels(self, namespace: str) -> Mapping[str, str]: ...

    def tally(self, namespace: str, settings: QuotaSettings) -> Tally:
        """Demand of every unfinished pod in the namespace plus admissions in flight, in units."""
        ...

    def dra(self) -> DraIndex | None:
        """The DRA snapshot that resolves a pod's resource claims; None: claims are not counted."""
        ...

    def claims_in_use(self, namespace: str) -> frozenset[str]:
        """Shared ResourceClaims (namespace/name) already counted in the namespace's usage."""
        ...


class LimitCheck(NamedTuple):
    """One limit the pod touches. Amounts are held in the dimension's unit (webhook/accounting/tally.py),
    so the decision is integer arithmetic; the Fraction properties serve the messages. A NamedTuple:
    one is built per limit and request, and a frozen dataclass takes nearly three times as long to build."""

    dimension: str
    limit_units: Amount
    used_units: Amount
    asked_units: Amount
    exceeded: bool

    @classmethod
    def of(cls, dimension: str, limit: Amount, used: Amount, asked: Amount) -> LimitCheck:
        return cls(dimension, limit, used, asked, asked > 0 and used + asked > limit)

    @property
    def limit(self) -> Fraction:
        return unscaled(self.limit_units, unit_of(self.dimension))

    @property
    def used(self) -> Fraction:
        return unscaled(self.used_units, unit_of(self.dimension))

    @property
    def asked(self) -> Fraction:
        return unscaled(self.asked_units, unit_of(self.dimension))

    @property
    def after(self) -> Fraction:
        return self.used + self.asked

    def need(self) -> str:
        """'needs 2 GPUs, 7 of 8 are in use'."""
        asked, used, limit = self._shown()
        verb = "is" if self.used == 1 else "are"
        return f"needs {asked} {_unit(self.dimension, self.asked)}, {used} of {limit} {verb} in use"

    def summary(self) -> str:
        asked, used, limit = self._shown()
        return f"{self.dimension} used {used}, asked {asked}, limit {limit}"

    def _shown(self) -> tuple[str, str, str]:
        def show(value: Fraction) -> str:
            return format_dimension(self.dimension, value)

        return show(self.asked), show(self.used), show(self.limit)

    def audit(self) -> dict[str, str]:
        unit = unit_of(self.dimension)
        return {
            "limit": exact_text(self.limit_units, unit),
            "used": exact_text(self.used_units, unit),
            "asked": exact_text(self.asked_units, unit),
        }


class QuotaCheck(NamedTuple):
    """One GPUQuota's verdict: the limits this pod touches, with the namespace's usage before and
    after it (in units)."""

    quota: str
    action: EnforcementAction
    limits: tuple[LimitCheck, ...]
    used: Tally
    total: Tally
    exceeded: bool

    @property
    def before(self) -> Usage:
        return self.used.usage()

    @property
    def after(self) -> Usage:
        return self.total.usage()

    def message(self, namespace: str) -> str:
        needs = "; it ".join(limit.need() for limit in self.limits if limit.exceeded)
        listing = "; ".join(limit.summary() for limit in self.limits)
        return f"{self._head(namespace)}: this pod {needs} (limits: {listing})"

    def headline(self, namespace: str) -> str:
        first = next(limit for limit in self.limits if limit.exceeded)
        return f"{self._head(namespace)}: this pod {first.need()}"

    def _head(self, namespace: str) -> str:
        return f'GPU quota "{self.quota}" exceeded in namespace {namespace}'

    def audit(self) -> dict[str, Any]:
        return {
            "quota": self.quota,
            "action": self.action,
            "exceeded": self.exceeded,
            "limits": {limit.dimension: limit.audit() for limit in self.limits},
            "before": self.used.as_json(),
            "after": self.total.as_json(),
        }


@dataclass(frozen=True)
class QuotaOutcome:
    """What quota says about one request; `reserve_key` is set when an admission must be counted."""

    namespace: str = ""
    pod: str = ""
    uid: str = ""
    shape: PodShape | None = None
    demand: Usage = NOTHING
    checks: tuple[QuotaCheck, ...] = ()
    error: str = ""
    error_action: EnforcementAction = "deny"
    dry_run: bool = False
    # `demand` in units (always Tally.of(demand)), for the audit record.
    demand_units: Tally = NONE

    @property
    def applies(self) -> bool:
        return bool(self.checks) or bool(self.error)

    @property
    def allowed(self) -> bool:
        """No denial: what `_denials()` finds, without writing its messages."""
        if self.error and self.error_action == "deny":
            return False
        return not any(c.exceeded and c.action == "deny" for c in self.checks)

    @property
    def reserve_key(self) -> str | None:
        """The in-flight reservation to record if the pod is admitted: none for dry runs or no demand."""
        if self.dry_run or self.shape is None or self.demand.is_zero or not self.checks or not self.allowed:
            return None
        return self.pod

    def decision(self) -> Decision:
        findings = self.findings()
        denials = self._denials()
        if denials:
            code = 422 if self.error else 403
            return deny(". ".join(denials), code=code, findings=findings)
        return Decision(allowed=True, warnings=clamp_warnings(self.warnings()), findings=findings)

    def findings(self) -> tuple[Finding, ...]:
        found = [
            Finding(f"GPUQuota/{check.quota}", check.action, check.message(self.namespace))
            for check in self.checks
            if check.exceeded
        ]
        if self.error:
            found.append(Finding("GPUQuota", self.error_action, self._error_message()))
        return tuple(found)

    def warnings(self) -> list[str]:
        found = [c.headline(self.namespace) for c in self.checks if c.exceeded and c.action == "warn"]
        if self.error and self.error_action == "warn":
            found.append(self._error_message())
        return found

    def audit(self) -> dict[str, Any]:
        """Before/after usage and every limit touched, for the decision log."""
        return {
            "namespace": self.namespace,
            "pod": self.pod,
            "dryRun": self.dry_run,
            "demand": self.demand_units.as_json(),
            "checks": [check.audit() for check in self.checks],
            **({"error": self.error} if self.error else {}),
        }

    def _denials(self) -> list[str]:
        found = [c.message(self.namespace) for c in self.checks if c.exceeded and c.action == "deny"]
        if self.error and self.error_action == "deny":
            found.insert(0, self._error_message())
        return found

    def _error_message(self) -> str:
        return f"GPU quota cannot count this pod in namespace {self.namespace}: {self.error}"


NOT_APPLICABLE = QuotaOutcome()


def check_quota(
    request: AdmissionRequest,
    quotas: Sequence[GPUQuota],
    state: QuotaView,
    settings: QuotaSettings = DEFAULT_SETTINGS,
    reading: GpuCount | None = None,
) -> QuotaOutcome:
    """The quota outcome of an admission request: only Pod CREATE can change GPU usage.
    `reading`: the pod as review() read it for every rule; else it is read here."""
    pod = _created_pod(request)
    if pod is None:
        return NOT_APPLICABLE
    namespace = _namespace(request, pod)
    matching = _matching(quotas, namespace, state)
    if not matching:
        return NOT_APPLICABLE
    key, uid, dry_run = pod_key(request, pod, namespace), _text(_meta(pod).get("uid")), _dry(request)
    try:
        shape = _shape(pod, state, namespace, reading)
    except QuotaInputError as e:
        action = max((q.action for q in matching), key=ACTION_RANK.__getitem__)
        return QuotaOutcome(namespace, key, uid, error=str(e), error_action=action, dry_run=dry_run)
    if shape is None or is_finished(pod):
        return QuotaOutcome(namespace, key, uid, dry_run=dry_run)
    # A shared ResourceClaim some pod of the namespace already holds is counted already.
    counted = shape.without_claims(state.claims_in_use(namespace)) if shape.claims else shape
    checks = tuple(_check(q, namespace, counted, state, settings) for q in matching)
    demand, units = quota_demand(counted, settings)
    return QuotaOutcome(
        namespace, key, uid, shape, demand, _relevant(checks), dry_run=dry_run, demand_units=units
    )


def _matching(quotas: Sequence[GPUQuota], namespace: str, state: QuotaView) -> list[GPUQuota]:
    """The quotas that apply to the namespace; its labels are read only if some quota selects by them."""
    labels: Mapping[str, str] = {}
    if any(q.match.namespace_selector is not None for q in quotas):
        labels = {NAMESPACE_NAME_LABEL: namespace, **state.namespace_labels(namespace)}
    return [q for q in quotas if q.applies_to(namespace, labels)]


def _shape(pod: KubeObject, state: QuotaView, namespace: str, reading: GpuCount | None) -> PodShape | None:
    if reading is None:
        shape = pod_shape(pod, state.dra(), namespace)
        return None if shape is None else canonical(shape)
    if reading.error is not None:
        raise QuotaInputError(reading.error)
    return None if reading.shape is None else canonical(reading.shape)


def request_pod_key(request: AdmissionRequest) -> str | None:
    """The reservation key of the pod a request creates, or None when it creates no pod."""
    pod = _created_pod(request)
    if pod is None:
        return None
    return pod_key(request, pod, _namespace(request, pod))


def pod_key(request: AdmissionRequest, pod: KubeObject, namespace: str) -> str:
    """namespace/name, as the watch will see the pod; a uid when the name is not known yet."""
    name = _text(_meta(pod).get("name")) or _text(request.get("name"))
    if name:
        return f"{namespace}/{name}"
    return f"{namespace}/uid:{_text(_meta(pod).get('uid')) or request['uid']}"


def _check(
    quota: GPUQuota, namespace: str, shape: PodShape, state: QuotaView, default: QuotaSettings
) -> QuotaCheck:
    settings = quota.settings_or(default)
    demand = demand_tally(shape, settings)
    before = state.tally(namespace, settings)
    limits = tuple(
        LimitCheck.of(dimension, limit, before.amount(dimension), asked)
        for dimension, limit in quota.limit_units
        if (asked := demand.amount(dimension)) > 0
    )
    exceeded = any(limit.exceeded for limit in limits)
    return QuotaCheck(quota.name, quota.action, limits, before, before + demand, exceeded)


def _relevant(checks: tuple[QuotaCheck, ...]) -> tuple[QuotaCheck, ...]:
    return tuple(check for check in checks if check.limits)


def _created_pod(request: AdmissionRequest) -> KubeObject | None:
    kind = request.get("kind") or {}
    if kind.get("kind") != "Pod" or kind.get("group", "") != "":
        return None
    if request.get("operation") != "CREATE" or request.get("subResource"):
        return None
    pod = request.get("object")
    return pod if isinstance(pod, dict) else None


def _namespace(request: AdmissionRequest, pod: KubeObject) -> str:
    return _text(request.get("namespace")) or _text(_meta(pod).get("namespace")) or "default"


def _text(value: object) -> str:
    """A string field of an untrusted object, or "" when it is anything else."""
    return value if isinstance(value, str) else ""


def _dry(request: AdmissionRequest) -> bool:
    return bool(request.get("dryRun"))


def _meta(pod: KubeObject) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _unit(dimension: str, amount: Fraction) -> str:
    if dimension == GPUS:
        return "GPU" if amount <= 1 else "GPUs"
    if dimension == GPU_MEMORY:
        return "of GPU memory"
    return dimension
