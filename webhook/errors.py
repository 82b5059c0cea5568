"""The exception tree. HTTP statuses are assigned in `app.py` alone."""

from __future__ import annotations

from dataclasses import dataclass


class WebhookError(Exception):
    """Base of every error this package raises on purpose."""


class RequestError(WebhookError):
    """The client sent something we cannot review."""


class MalformedReview(RequestError):
    """The body is not a well-formed AdmissionReview admission.k8s.io/v1."""


class PayloadTooLarge(RequestError):
    """The body exceeds the configured size limit."""


class RequestTimeout(RequestError):
    """The client did not send its body in time (a slow or stalled client)."""


class UnsupportedMediaType(RequestError):
    """The body is not declared as JSON."""


class AdmissionDenied(WebhookError):
    """The object cannot be admitted as it is; the message is written for the person who sent it."""


class AuditUnavailable(WebhookError):
    """A decision cannot be recorded and must not be acknowledged."""


class ConfigError(WebhookError):
    """A setting or a file named by a setting is unusable."""


class CertError(WebhookError):
    """Certificates cannot be generated, read or loaded."""


class ClusterError(WebhookError):
    """The Kubernetes API failed or answered with something unusable."""


class ResourceExpired(ClusterError):
    """410 Gone: a watch or list continuation is too old; list again."""


class Conflict(ClusterError):
    """409 Conflict: the object changed since it was read (or already exists); read and retry."""


@dataclass(frozen=True)
class PolicyProblem:
    """One reason a policy file was rejected, located for the person who edits it."""

    file: str
    line: int
    path: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        field = f" {self.path}:" if self.path else ""
        return f"{where}:{field} {self.reason}"


class PolicyError(WebhookError):
    """A policy set failed to load; carries every problem found, not just the first.

    `skipped` are documents of other projects' kinds found on the way: they are not why the
    set failed, but a user fixing the set should see them in the same pass.
    """

    def __init__(self, problems: list[PolicyProblem], skipped: tuple[PolicyProblem, ...] = ()) -> None:
        self.problems = problems
        self.skipped = skipped
        super().__init__("\n".join(str(p) for p in problems))


class WouldBlock(WebhookError):
    """A review asked not to block reached work that may (Rego, a remote engine): run it on a thread."""
