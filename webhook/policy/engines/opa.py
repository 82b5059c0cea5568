"""Remote Rego on an OPA server through its REST API (opa-python-client).

The same modules as the in-process engine are pushed as policies (`PUT /v1/policies`),
constraint parameters as data (`PUT /v1/data/gk_parameters`), and each request is
one query (`POST /v1/data/gkw_all/results`). When OPA cannot be reached, the
`fail_open` setting decides: fail closed (default) reports every applicable
constraint as failed; fail open lets them pass, marked as not evaluated.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from opa_client import OpaClient
from opa_client.errors import RegoParseError

from webhook.accounting.count import GpuCount
from webhook.errors import ConfigError, PolicyError, PolicyProblem
from webhook.policy.engines import ConstraintSet, Plan, plan
from webhook.policy.engines.layout import (
    COMPAT,
    PARAMETERS_DATA,
    WRAPPERS,
    Module,
    ParameterTable,
    all_results_module,
    read_results,
    template_modules,
)
from webhook.validation.gatekeeper import Constraint, ConstraintTemplate
from webhook.validation.gatekeeper_input import Inventory
from webhook.validation.prechecks import Precheck, prechecks_for
from webhook.validation.results import ConstraintResult

POLICY_PREFIX = "gpu-webhook/"
_UNREACHABLE = (requests.ConnectionError, requests.Timeout)


class Unreachable(Exception):
    """OPA did not answer, or answered with a gateway error."""


class EvaluationFailed(Exception):
    """OPA answered that evaluating the query failed."""


@dataclass(frozen=True)
class OpaSettings:
    url: str = "http://127.0.0.1:8181"
    timeout: float = 1.5
    retries: int = 2
    fail_open: bool = False
    token: str | None = None
    ca_file: str | None = None

    def client(self) -> OpaClient:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"--opa-url must be http(s)://host[:port], got {self.url!r}")
        ssl: bool | str = False
        if parts.scheme == "https":
            ssl = self.ca_file or True
        return OpaClient(
            host=parts.hostname,
            port=parts.port or (443 if parts.scheme == "https" else 8181),
            ssl=ssl,
            token=self.token,
            retries=self.retries,
            timeout=self.timeout,
        )


class OpaEngine:
    def __init__(
        self,
        client: OpaClient,
        settings: OpaSettings,
        templates: Mapping[str, ConstraintTemplate],
        prechecks: Mapping[str, Precheck] | None = None,
    ) -> None:
        self._client = client
        self.settings = settings
        self.templates = dict(templates)
        self._prechecks = dict(prechecks or {})  # a clean pod needs no round trip
        self._pushed: ConstraintSet | None = None
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, templates: Sequence[ConstraintTemplate], settings: OpaSettings) -> OpaEngine:
        """Push every template; raise PolicyError for what OPA rejects, ConfigError if it is unreachable."""
        problems: list[PolicyProblem] = []
        modules: list[Module] = [COMPAT]
        for template in templates:
            try:
                modules += template_modules(template, parameters_in_data=True)
            except PolicyError as e:
                problems += e.problems
        if problems:
            raise PolicyError(problems)
        modules.append(Module(f"{WRAPPERS}_all.rego", all_results_module(t.kind for t in templates), None))
        engine = cls(settings.client(), settings, {t.kind: t for t in templates}, prechecks_for(templates))
        engine._push(modules)
        return engine

    def close(self) -> None:
        self._client.close_connection()

    def _push(self, modules: Sequence[Module]) -> None:
        problems: list[PolicyProblem] = []
        try:
            stale = {p for p in self._client.get_policies_list() if str(p).startswith(POLICY_PREFIX)}
            for module in modules:
                policy_id = POLICY_PREFIX + module.name
                stale.discard(policy_id)
                try:
                    self._client.update_policy_from_string(module.text, policy_id, rego_compat=False)
                except RegoParseError as e:
                    problems += [_located(module, error) for error in e.errors] or [
                        module.problem(None, str(e))
                    ]
            for policy_id in stale:
                self._client.delete_policy(policy_id)
        except _UNREACHABLE as e:
            raise ConfigError(f"OPA at {self.settings.url} is unreachable: {e}") from e
        if problems:
            raise PolicyError(problems)

    def _sync_parameters(self, constraints: ConstraintSet) -> ParameterTable:
        """Keep OPA's copy of the parameters equal to the constraint set being evaluated."""
        with self._lock:
            if self._pushed is not constraints:
                try:
                    self._client.update_or_create_data(constraints.parameters.data, PARAMETERS_DATA)
                except _UNREACHABLE as e:
                    raise Unreachable(str(e)) from e
                self._pushed = constraints
            return constraints.parameters

    def evaluate(
        self,
        request: Mapping[str, Any],
        constraints: ConstraintSet,
        inventory: Inventory | None = None,
        *,
        may_block: bool = True,
        gpu: GpuCount | None = None,
    ) -> list[ConstraintResult]:
        work = plan(
            request, constraints, inventory, self.templates, self._prechecks, may_block=may_block, gpu=gpu
        )
        if not work.by_kind:
            return work.decided
        try:
            table = self._sync_parameters(constraints)
            value = self._query(work.input(table.keys(work.constraints)))
        except Unreachable as e:
            return work.decided + self._unreachable(work.constraints, str(e))
        except EvaluationFailed:
            return work.decided + self._one_by_one(work, table)
        results = work.decided
        for kind, group in work.by_kind.items():
            results += read_results(_field(value, kind), group, table)
        return results

    def _query(self, document: Mapping[str, Any]) -> Any:
        try:
            answer = self._client.query_rule(dict(document), f"{WRAPPERS}_all", "results")
        except _UNREACHABLE as e:
            raise Unreachable(str(e)) from e
        except requests.HTTPError as e:
            status = e.response.status_code if e.response is not None else 0
            if status in (0, 502, 503, 504):
                raise Unreachable(f"OPA answered {status}") from e
            raise EvaluationFailed(_opa_message(e.response)) from e
        return answer.get("result") if isinstance(answer, Mapping) else None

    def _one_by_one(self, work: Plan, table: ParameterTable) -> list[ConstraintResult]:
        """After a failed query, ask about each constraint alone so the failure is named."""
        results: list[ConstraintResult] = []
        for constraint in work.constraints:
            try:
                value = self._query(work.input(table.keys([constraint])))
                results += read_results(_field(value, constraint.kind), [constraint], table)
            except EvaluationFailed as e:
                results.append(ConstraintResult(constraint, error=f"evaluation failed: {e}"))
            except Unreachable as e:
                results += self._unreachable([constraint], str(e))
        return results

    def _unreachable(self, constraints: Sequence[Constraint], reason: str) -> list[ConstraintResult]:
        error = f"OPA at {self.settings.url} unreachable: {reason}"
        return [ConstraintResult(c, error=error, fail_open=self.settings.fail_open) for c in constraints]


def _field(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _located(module: Module, error: Mapping[str, Any]) -> PolicyProblem:
    location = error.get("location") or {}
    message = str(error.get("message", "rejected by OPA"))
    line = int(location.get("row") or 0)
    offset = _offset_of_line(module.text, line) if line else None
    return module.problem(offset, message)


def _offset_of_line(text: str, line: int) -> int:
    position = 0
    for _ in range(line - 1):
        position = text.find("\n", position) + 1
        if position == 0:
            return len(text)
    return position


def _opa_message(response: requests.Response | None) -> str:
    if response is None:
        return "no response"
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    errors = body.get("errors") or []
    return "; ".join(str(e.get("message", "")) for e in errors) or str(
        body.get("message", "evaluation failed")
    )
