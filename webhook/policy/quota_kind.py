"""GPUQuota: the quota package parses it; this adapts its located problems to our documents."""

from __future__ import annotations

from webhook.errors import PolicyError, PolicyProblem
from webhook.policy.source import Document, parse_path
from webhook.quota.policy import GPUQuota, parse_quota


def compile_quota(document: Document) -> tuple[GPUQuota | None, list[PolicyProblem]]:
    problems = [document.problem(path, "field appears twice") for path in document.duplicates]
    try:
        quota = parse_quota(document.data, document.file, lambda path: document.line_of(parse_path(path)))
    except PolicyError as e:
        return None, problems + e.problems
    return (None, problems) if problems else (quota, [])
