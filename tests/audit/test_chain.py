"""The hash chain holds for long logs and names the first bad record for each kind of tampering."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.audit.logs import lines, numbered, rewrite, write_log
from webhook.audit.chain import GENESIS, canonical, line_of, record_hash, seal
from webhook.audit.files import expand
from webhook.audit.verify import verify


def test_a_chain_of_ten_thousand_records_verifies(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(10_000), batch=250)
    result = verify(expand([log]), from_genesis=True)
    assert result.ok, result.describe()
    assert (result.records, result.first_seq, result.last_seq) == (10_000, 1, 10_000)
    assert result.head == orjson.loads(lines(log)[-1])["hash"]


def _edit_keeping_hash(data: list[bytes]) -> None:
    record = orjson.loads(data[4])
    record["allowed"] = not record["allowed"]
    data[4] = line_of(record)


def _edit_and_rehash(data: list[bytes]) -> None:
    record = orjson.loads(data[4])
    record["namespace"] = "kube-system"
    record["hash"] = record_hash(record)
    data[4] = line_of(record)


def _break_json(data: list[bytes]) -> None:
    data[4] = data[4][:40] + b"\n"


def _delete(data: list[bytes]) -> None:
    del data[4]


def _delete_last_two_of_middle(data: list[bytes]) -> None:
    del data[4:6]


def _swap(data: list[bytes]) -> None:
    data[4], data[5] = data[5], data[4]


def _move_later(data: list[bytes]) -> None:
    data.insert(8, data.pop(4))


def _duplicate(data: list[bytes]) -> None:
    data.insert(5, data[4])


def _cut_mid_line(data: list[bytes]) -> None:
    data[-1] = data[-1][:25]


TAMPERING: list[tuple[str, Callable[[list[bytes]], None], str, int]] = [
    # (case, tamper, reason, seq named in the report)
    ("field edited", _edit_keeping_hash, "edited", 5),
    ("edited and hash recomputed", _edit_and_rehash, "edited", 5),
    ("line no longer JSON", _break_json, "edited", 0),
    ("record deleted", _delete, "deleted", 5),
    ("two records deleted", _delete_last_two_of_middle, "deleted", 5),
    ("adjacent records swapped", _swap, "reordered", 5),
    ("record moved later", _move_later, "reordered", 5),
    ("record duplicated", _duplicate, "reordered", 5),
    ("final line cut", _cut_mid_line, "truncated", 0),
]


@pytest.mark.parametrize(("case", "tamper", "reason", "seq"), TAMPERING, ids=[t[0] for t in TAMPERING])
def test_each_kind_of_tampering_is_detected(
    tmp_path: Path, case: str, tamper: Callable[[list[bytes]], None], reason: str, seq: int
) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(12))
    data = lines(log)
    tamper(data)
    rewrite(log, data)
    result = verify([log])
    assert not result.ok, case
    assert result.problem is not None
    assert result.problem.reason == reason, result.describe()
    if seq:
        assert result.problem.seq == seq, result.describe()
    assert str(log) in result.describe()


def test_a_rotated_file_that_lost_its_end_is_truncated(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(60), batch=5, max_bytes=6000, keep=20)
    files = expand([log])
    assert len(files) >= 3
    middle = files[1]
    rewrite(middle, lines(middle)[:-2])
    result = verify(files)
    assert result.problem is not None and result.problem.reason == "truncated", result.describe()
    assert result.problem.location.file == str(files[2])


def test_a_deleted_rotated_file_is_detected(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(60), batch=5, max_bytes=6000, keep=20)
    files = expand([log])
    files[1].unlink()
    result = verify(expand([log]))
    assert result.problem is not None and result.problem.reason == "truncated", result.describe()


def test_a_log_rewritten_from_scratch_fails_only_with_from_start(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(10))
    rewrite(log, lines(log)[3:])
    assert verify([log]).ok
    result = verify([log], from_genesis=True)
    assert result.problem is not None and result.problem.reason == "truncated"


@settings(max_examples=60, deadline=None)
@given(line_index=st.integers(0, 7), offset=st.integers(0, 10_000), bit=st.integers(0, 7))
def test_any_flipped_bit_is_detected(
    tmp_path_factory: pytest.TempPathFactory, line_index: int, offset: int, bit: int
) -> None:
    log = tmp_path_factory.mktemp("flip") / "audit.log"
    write_log(log, numbered(8))
    data = lines(log)
    target = bytearray(data[line_index])
    position = offset % (len(target) - 1)
    target[position] ^= 1 << bit
    data[line_index] = bytes(target)
    rewrite(log, data)
    assert not verify([log]).ok


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.one_of(
            st.text(), st.integers(-(2**53), 2**53), st.booleans(), st.none(), st.lists(st.text(), max_size=3)
        ),
        max_size=6,
    )
)
def test_canonical_json_is_what_any_json_library_produces_with_sorted_keys(fields: dict[str, object]) -> None:
    """A verifier in another language can rebuild the hashed text (docs/audit.md)."""
    expected = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert canonical(fields) == expected


def test_hash_covers_the_record_and_its_prev() -> None:
    first = seal({"v": 1, "type": "decision"}, 1, GENESIS)
    again = seal({"v": 1, "type": "decision"}, 1, "f" * 64)
    assert first["hash"] != again["hash"]
    assert record_hash(first) == first["hash"]
