"""`audit verify`: walk the chain through every file, in log order, and name the first bad record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from webhook.audit.chain import ChainVerifier, Location, Problem, Record, SignatureCheck
from webhook.audit.files import read_file
from webhook.audit.signing import checkpoint_error


@dataclass(frozen=True)
class Verification:
    files: tuple[Path, ...]
    records: int
    first_seq: int | None
    last_seq: int | None
    head: str | None
    checkpoints: int
    signatures: int
    last_signed_seq: int | None
    problem: Problem | None
    signed: bool

    @property
    def ok(self) -> bool:
        return self.problem is None

    def describe(self) -> str:
        if self.problem is not None:
            return f"FAILED: {self.problem}"
        if not self.records:
            return f"OK: no records in {len(self.files)} file(s)"
        lines = [
            f"OK: {self.records} records in {len(self.files)} file(s), seq {self.first_seq}..{self.last_seq}",
            f"head: {self.head}",
        ]
        if self.signed:
            unsigned = (self.last_seq or 0) - (self.last_signed_seq or 0)
            lines.append(
                f"signatures: {self.signatures} checkpoints verified; last at seq {self.last_signed_seq}; "
                f"{unsigned} records after it are covered by the chain only"
            )
        elif self.checkpoints:
            lines.append(f"checkpoints: {self.checkpoints} (signatures not checked; give --public-key)")
        if self.first_seq and self.first_seq > 1:
            lines.append(f"note: the log starts at seq {self.first_seq}; earlier files were rotated away")
        return "\n".join(lines)


def verify(
    files: Sequence[Path], *, public_key: Ed25519PublicKey | None = None, from_genesis: bool = False
) -> Verification:
    check = None if public_key is None else signature_check(public_key)
    chain = ChainVerifier(check, from_genesis=from_genesis)
    for path in files:
        chain.start_file()
        for line in read_file(path):
            chain.feed(Location(str(path), line.number), line.data, complete=line.complete)
            if chain.problem is not None:
                break
        if chain.problem is not None:
            break
    problem = chain.finish()
    if problem is None and public_key is not None and chain.records and not chain.signatures:
        location = chain.last.location if chain.last else Location(str(files[-1]), 0)
        problem = Problem(location, None, "signature", "no signed checkpoint found; was the log re-written?")
    return Verification(
        files=tuple(files),
        records=chain.records,
        first_seq=chain.first_seq,
        last_seq=chain.last.seq if chain.last else None,
        head=chain.last.hash if chain.last else None,
        checkpoints=chain.checkpoints,
        signatures=chain.signatures,
        last_signed_seq=chain.last_checkpoint_seq,
        problem=problem,
        signed=public_key is not None,
    )


def signature_check(public_key: Ed25519PublicKey) -> SignatureCheck:
    def check(record: Record) -> str | None:
        return checkpoint_error(public_key, record)

    return check
