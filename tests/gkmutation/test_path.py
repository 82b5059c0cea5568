"""Location parsing, as Gatekeeper's pkg/mutation/path/parser/parser.go and token/scanner.go."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.gkmutation.path import MAX_PATH_CHARS, Field, ListKey, PathError, parse, render

PARSED = [
    ("spec", (Field("spec"),)),
    ("spec.containers", (Field("spec"), Field("containers"))),
    (
        "spec.containers[name: *].securityContext.privileged",
        (
            Field("spec"),
            Field("containers"),
            ListKey("name", glob=True),
            Field("securityContext"),
            Field("privileged"),
        ),
    ),
    ("spec.containers[name:main]", (Field("spec"), Field("containers"), ListKey("name", "main"))),
    ("spec.ports[containerPort: 80]", (Field("spec"), Field("ports"), ListKey("containerPort", 80))),
    ('spec.ports[containerPort: "80"]', (Field("spec"), Field("ports"), ListKey("containerPort", "80"))),
    (
        'metadata.labels."app.kubernetes.io/name"',
        (Field("metadata"), Field("labels"), Field("app.kubernetes.io/name")),
    ),
    ("metadata.labels.'a\\'b'", (Field("metadata"), Field("labels"), Field("a'b"))),
    (" spec . containers ", (Field("spec"), Field("containers"))),
    ("a-b_c.D9", (Field("a-b_c"), Field("D9"))),
    ("", ()),
]


@pytest.mark.parametrize(("text", "nodes"), PARSED, ids=[t or "empty" for t, _ in PARSED])
def test_parses_like_gatekeeper(text: str, nodes: tuple[object, ...]) -> None:
    assert parse(text) == nodes


REFUSED = [
    ("spec.", "trailing separator"),
    ("spec..containers", "expected a field name"),
    ("spec[name: a", "expected ']'"),
    ("spec[name a]", "expected ':'"),
    ("spec[: a]", "expected a key field"),
    ("spec[name: ]", "expected a key value"),
    ("spec[name: a][name: b]", "expected '.' or the end"),
    ("spec/containers", "invalid character '/'"),
    ('spec."open', "unterminated string"),
    ("0spec", "expected a field name"),
    ("spec[n: 99999999999999999999]", "overflows 64 bits"),
    ("a" * (MAX_PATH_CHARS + 1), "longer than"),
]


@pytest.mark.parametrize(("text", "reason"), REFUSED, ids=[t[:30] for t, _ in REFUSED])
def test_refuses_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(PathError, match=reason.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        parse(text)


# Names of identifier characters and of those node.go quote() quotes (it leaves others bare).
_NAMES = st.text(alphabet="aZ09-_'\"\t\n \\*[]:.", min_size=1, max_size=8)
_NODES = st.lists(
    st.tuples(_NAMES, st.none() | st.tuples(_NAMES, st.none() | _NAMES | st.integers(0, 2**40))),
    min_size=1,
    max_size=5,
)


@given(_NODES)
def test_render_parses_back(spec: list[tuple[str, tuple[str, str | int | None] | None]]) -> None:
    """node.go String() quotes names the scanner would split: printing and parsing round-trip."""
    nodes: list[Field | ListKey] = []
    for name, selector in spec:
        nodes.append(Field(name))
        if selector is not None:
            key, value = selector
            nodes.append(ListKey(key, glob=True) if value is None else ListKey(key, value))
    path = tuple(nodes)
    assert parse(render(path)) == path
