"""Reading a log while checking it: `summary`, `report` and `query` walk the hash chain (and, given
the public key, the checkpoint signatures) of every file they read, in the same pass, so that
what they print is never silently drawn from a log that fails `audit verify` (docs/audit.md,
"A log that fails verification").

Each line is parsed once, for the chain and for the filter. The block search of query.select is
what this costs: every line is parsed and hashed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from webhook.audit.chain import ChainVerifier, Location, Problem, Record
from webhook.audit.files import read_file
from webhook.audit.query import Filter
from webhook.audit.verify import signature_check


class CheckedRead:
    """The records that match `where` of each log in `groups` (a log file with its rotated
    siblings, in log order), one log after the other; `problem()` then says whether they verify,
    each log as a chain of its own. A torn last line of a log's newest file is a write in
    progress: skipped, as query.select skips it, not a problem."""

    def __init__(
        self,
        groups: Sequence[Sequence[Path]],
        where: Filter,
        *,
        public_key: Ed25519PublicKey | None = None,
    ) -> None:
        self._where = where
        self._check = None if public_key is None else signature_check(public_key)
        self._chains = [ChainVerifier(self._check) for _ in groups]
        self._records = self._walk(groups)

    def __iter__(self) -> Iterator[Record]:
        return self._records

    def problem(self) -> Problem | None:
        """The first problem found: what a consumer left unread (query --limit) is read now, since
        a record is only vouched for by the records after it."""
        for _ in self._records:
            pass
        return next((p for p in (chain.finish() for chain in self._chains) if p is not None), None)

    def _walk(self, groups: Sequence[Sequence[Path]]) -> Iterator[Record]:
        for chain, files in zip(self._chains, groups, strict=True):
            yield from self._log(chain, files)

    def _log(self, chain: ChainVerifier, files: Sequence[Path]) -> Iterator[Record]:
        newest = len(files) - 1
        for index, path in enumerate(files):
            chain.start_file()
            for line in read_file(path):
                if not line.complete and index == newest:
                    break
                record = chain.feed(Location(str(path), line.number), line.data, complete=line.complete)
                if record is not None and self._where.matches(record):
                    yield record
