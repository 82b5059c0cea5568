"""The current policy set, swapped whole; readers never see a half-loaded set."""

from __future__ import annotations

import logging

from webhook.errors import PolicyError
from webhook.metrics import Metrics
from webhook.policy.loader import EngineFactory, regopy_engine
from webhook.policy.model import PolicySet
from webhook.policy.sources import PolicySources, load_policies

log = logging.getLogger(__name__)


class PolicyStore:
    def __init__(
        self, sources: PolicySources, metrics: Metrics, engine: EngineFactory = regopy_engine
    ) -> None:
        self.sources = sources
        self._engine = engine
        self._metrics = metrics
        self._current: PolicySet | None = None
        self.last_error: str | None = None

    @property
    def current(self) -> PolicySet:
        if self._current is None:
            raise RuntimeError("policy store read before the first load")
        return self._current

    @property
    def loaded(self) -> bool:
        return self._current is not None

    def load(self) -> bool:
        """Load the directory; on failure keep the last good set. True if a new set is in force."""
        try:
            candidate = load_policies(self.sources, self._engine)
        except PolicyError as e:
            self._metrics.policy_load_errors.inc()
            self.last_error = f"{len(e.problems)} problem(s), first: {e.problems[0]}"
            log.error(
                "policy set rejected",
                extra={"policies": self.sources.describe(), "problems": [str(p) for p in e.problems]},
            )
            if self._current is None:
                raise
            return False
        self._current = candidate
        self.last_error = None
        self._metrics.policy_generation.inc()
        self._metrics.policy_documents_skipped.set(len(candidate.skipped))
        if candidate.skipped:
            log.warning(
                "policy documents skipped, not enforced",
                extra={"policies": self.sources.describe(), "skipped": [str(p) for p in candidate.skipped]},
            )
        log.info(
            "policy set loaded",
            extra={
                "version": candidate.version,
                "files": len(candidate.files),
                "policies": self.sources.describe(),
            },
        )
        return True
