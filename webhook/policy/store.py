"""The current policy set, swapped whole; readers never see a half-loaded set."""

from __future__ import annotations

import logging
from pathlib import Path

from webhook.errors import PolicyError
from webhook.metrics import Metrics
from webhook.policy.loader import EngineFactory, load_directory, regopy_engine
from webhook.policy.model import PolicySet

log = logging.getLogger(__name__)


class PolicyStore:
    def __init__(self, directory: Path, metrics: Metrics, engine: EngineFactory = regopy_engine) -> None:
        self.directory = directory
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
            candidate = load_directory(self.directory, self._engine)
        except PolicyError as e:
            self._metrics.policy_load_errors.inc()
            self.last_error = f"{len(e.problems)} problem(s), first: {e.problems[0]}"
            log.error(
                "policy set rejected",
                extra={"dir": str(self.directory), "problems": [str(p) for p in e.problems]},
            )
            if self._current is None:
                raise
            return False
        self._current = candidate
        self.last_error = None
        self._metrics.policy_generation.inc()
        log.info("policy set loaded", extra={"version": candidate.version, "files": len(candidate.files)})
        return True
