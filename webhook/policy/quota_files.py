"""GPUQuota policies from a directory or a text, through the one policy loader."""

from __future__ import annotations

from pathlib import Path

from webhook.errors import PolicyError
from webhook.policy.loader import compile_documents, load_directory, read_file
from webhook.quota.policy import GPUQuota


def load_quotas(directory: Path) -> list[GPUQuota]:
    """Every GPUQuota under `directory`; PolicyError lists every problem in every policy file."""
    return list(load_directory(directory).quotas)


def quotas_from_text(text: str, file: str) -> list[GPUQuota]:
    documents, problems = read_file(Path(file), text.encode())
    compiled, trouble = compile_documents(documents)
    if problems or trouble:
        raise PolicyError(problems + trouble)
    return list(compiled.quotas)
