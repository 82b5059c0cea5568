"""The journal helper process (webhook/audit/journald.py, remote.py): a real child that builds,
chains, writes and fsyncs records; answers only once they are durable; fails its callers, not
the chain, when it cannot write or dies; and leaves the worker writing when it is gone."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from tests.audit.logs import START, entry, numbered, records, request
from webhook.audit.facts import encode_facts
from webhook.audit.journal import AuditWriteError, FsyncMode, Journal, JournalOptions
from webhook.audit.journald import HelperConfig
from webhook.audit.metrics import AuditMetrics
from webhook.audit.record import decision_record
from webhook.audit.recorder import AuditRecorder
from webhook.audit.remote import JournalHelper, RecordNotBuilt
from webhook.audit.signing import generate, load_public
from webhook.audit.verify import verify
from webhook.audit.writer import AuditWriter
from webhook.config import FailureMode
from webhook.decision import Decision, Finding


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def config(log: Path, fsync: FsyncMode = "batch", **fields: Any) -> HelperConfig:
    return HelperConfig(path=str(log), fsync=fsync, max_bytes=0, keep=5, instance="pod-0/1", **fields)


@asynccontextmanager
async def writing(helper: JournalHelper, log: Path) -> AsyncIterator[AuditWriter]:
    writer = AuditWriter(Journal(JournalOptions(path=log)), helper=helper)
    await writer.start()
    try:
        yield writer
    finally:
        await writer.close()


def helper_pid(helper: JournalHelper) -> int:
    assert helper.pid is not None
    return helper.pid


def body_of(uid: str) -> bytes:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request(uid)}
    return orjson.dumps(review)


def facts(decision: Decision) -> bytes:
    return encode_facts(
        decision, endpoint="validate", latency_ms=2.5, now=START, instance="pod-0/1", policy_version="p1"
    )


def test_a_decision_is_recorded_by_the_helper_as_the_worker_would_record_it(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    decision = Decision(allowed=False, code=403, message="no", findings=(Finding("p", "deny", "no"),))

    async def scenario() -> None:
        async with writing(JournalHelper(config(log)), log) as writer:
            assert writer.remote
            await writer.append_decision(facts(decision), body_of("uid-1"))
            assert [r["uid"] for r in records(log)] == ["uid-1"], "in the file when the call returns"

    run(scenario)
    (written,) = records(log)
    expected = decision_record(
        request("uid-1"),
        decision,
        endpoint="validate",
        latency_ms=2.5,
        now=START,
        instance="pod-0/1",
        policy_version="p1",
    )
    assert {k: v for k, v in written.items() if k not in ("seq", "prev", "hash")} == expected
    assert verify([log], from_genesis=True).ok


def test_concurrent_decisions_share_one_write_and_fsync(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    batches: list[int] = []

    async def scenario() -> None:
        async with writing(JournalHelper(config(log), on_batch=batches.append), log) as writer:
            await asyncio.gather(
                *(writer.append_decision(facts(Decision(True)), body_of(f"u{i}")) for i in range(32))
            )

    run(scenario)
    assert sum(batches) == 32 and len(batches) < 32
    assert verify([log], from_genesis=True).records == 32


def test_an_entry_comes_back_sealed_and_the_chain_goes_on_across_both_writers(tmp_path: Path) -> None:
    """The helper and the worker's own journal (a scan's thread) chain into one log."""
    log = tmp_path / "audit.log"

    async def scenario() -> None:
        async with writing(JournalHelper(config(log)), log) as writer:
            first = await writer.append(entry("start"))
            writer.journal.append(numbered(2))  # what a scan thread does
            last = await writer.append(entry("after"))
            assert (first["seq"], last["seq"]) == (1, 4)

    run(scenario)
    assert [r["seq"] for r in records(log)] == [1, 2, 3, 4]
    assert verify([log], from_genesis=True).ok


def test_a_write_the_disk_refuses_fails_its_callers_and_leaves_no_record(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"

    async def scenario() -> None:
        helper = JournalHelper(config(log))
        async with writing(helper, log) as writer:
            await writer.append(entry("kept"))
            size = log.stat().st_size
            pid = helper_pid(helper)
            _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, hard))  # EFBIG for the helper's next write
            with pytest.raises(AuditWriteError, match="cannot write the audit log"):
                await writer.append_decision(facts(Decision(True)), body_of("refused"))
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
            await writer.append_decision(facts(Decision(True)), body_of("later"))

    run(scenario)
    assert [r["uid"] for r in records(log)] == ["kept", "later"]
    assert verify([log], from_genesis=True).ok


def test_a_killed_helper_fails_what_it_held_and_the_worker_writes_from_then_on(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"

    async def scenario() -> None:
        helper = JournalHelper(config(log))
        async with writing(helper, log) as writer:
            await writer.append(entry("before"))
            pid = helper_pid(helper)
            os.kill(pid, signal.SIGSTOP)  # it holds the next request unanswered
            pending = asyncio.ensure_future(writer.append_decision(facts(Decision(True)), body_of("held")))
            await asyncio.sleep(0)
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(AuditWriteError, match="helper exited"):
                await pending
            assert not writer.remote
            assert (await writer.append(entry("after")))["seq"] == 2

    run(scenario)
    assert [r["uid"] for r in records(log)] == ["before", "after"]


def test_a_helper_that_cannot_start_leaves_the_records_to_the_worker(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"

    async def scenario() -> None:
        broken = JournalHelper(config(log, signing_key=str(tmp_path / "missing.key")))
        async with writing(broken, log) as writer:
            assert not writer.remote and broken.pid is None
            assert (await writer.append(entry("by the worker")))["seq"] == 1

    run(scenario)
    assert [r["uid"] for r in records(log)] == ["by the worker"]


@pytest.mark.parametrize("fsync", ["always", "batch", "never"])
def test_every_mode_writes_through_the_helper_and_it_signs_a_last_checkpoint(
    tmp_path: Path, fsync: FsyncMode
) -> None:
    log = tmp_path / "audit.log"
    private, public = generate(tmp_path / "keys")

    async def scenario() -> None:
        helper = JournalHelper(config(log, fsync, signing_key=str(private)))
        async with writing(helper, log) as writer:
            assert writer.remote
            await asyncio.gather(
                *(writer.append_decision(facts(Decision(True)), body_of(f"u{i}")) for i in range(3))
            )

    run(scenario)
    written = records(log)
    assert [r["type"] for r in written] == ["decision"] * 3 + ["checkpoint"]
    assert written[-1]["instance"] == "pod-0/1" and written[-1]["records"] == 3
    assert verify([log], public_key=load_public(public), from_genesis=True).ok


def test_a_record_the_helper_cannot_build_fails_only_its_own_decision(tmp_path: Path) -> None:
    """Not an outage of the log: the recorder sends that decision unrecorded, as when it cannot
    build a record itself, and the batch's other records are written."""
    log = tmp_path / "audit.log"

    async def scenario() -> None:
        async with writing(JournalHelper(config(log)), log) as writer:
            broken, fine = await asyncio.gather(
                writer.append_decision(b"{not json", body_of("broken")),
                writer.append_decision(facts(Decision(True)), body_of("fine")),
                return_exceptions=True,
            )
            assert isinstance(broken, RecordNotBuilt) and fine is None

    run(scenario)
    assert [r["uid"] for r in records(log)] == ["fine"]


@pytest.mark.parametrize(("mode", "code"), [("closed", 500), ("open", 200)])
def test_a_helper_dying_under_a_decision_answers_it_by_the_failure_mode(
    tmp_path: Path, mode: FailureMode, code: int
) -> None:
    log = tmp_path / "audit.log"
    answers: list[Decision] = []

    async def scenario() -> None:
        helper = JournalHelper(config(log))
        writer = AuditWriter(Journal(JournalOptions(path=log)), helper=helper)
        recorder = AuditRecorder(
            writer, policy_version=lambda: "p1", failure_mode=mode, metrics=AuditMetrics(CollectorRegistry())
        )
        await recorder.start()
        pid = helper_pid(helper)
        os.kill(pid, signal.SIGSTOP)
        held = asyncio.ensure_future(
            recorder.record(request("held"), "validate", Decision(True), 0.001, body_of("held"))
        )
        await asyncio.sleep(0)
        os.kill(pid, signal.SIGKILL)
        answers.append(await held)
        answers.append(
            await recorder.record(request("next"), "validate", Decision(True), 0.001, body_of("next"))
        )
        await recorder.stop()
        await writer.close()

    run(scenario)
    assert [a.code for a in answers] == [code, 200]
    assert [r.get("uid") for r in records(log) if r["type"] == "decision"] == ["next"]
    assert verify([log], from_genesis=True).ok
