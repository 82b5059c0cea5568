"""Loading policy directories: every problem is reported with file, line and field path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from webhook.errors import PolicyError
from webhook.policy.loader import load_directory

HEADER = "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUSharingPolicy\nmetadata:\n  name: p\nspec:\n"


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def _problems(directory: Path) -> list[tuple[int, str, str]]:
    with pytest.raises(PolicyError) as info:
        load_directory(directory)
    return [(p.line, p.path, p.reason) for p in info.value.problems]


BAD_SPECS = [
    # (spec body, line, path, reason fragment)
    ("  sharing: {mode: magic}\n", 6, "spec.sharing.mode", "'magic' is not one of exclusive"),
    (
        "  sharing:\n    mode: mig\n    gpuModel: H100-80GB\n    colour: red\n",
        9,
        "spec.sharing.colour",
        "unknown field",
    ),
    ("  sharing: {mode: timeslice}\n  priority: high\n", 7, "spec.priority", "must be of type integer"),
    ("  match: {}\n", 5, "spec.sharing", "required field is missing"),  # a missing field: its parent's line
    ("  sharing: {mode: mig}\n", 6, "spec.sharing.gpuModel", "needs gpuModel"),
    ("  sharing: {mode: mig, gpuModel: B300}\n", 6, "spec.sharing.gpuModel", "'B300' is not one of"),
    (
        "  sharing: {mode: mig, gpuModel: A100-40GB, defaultMemory: 64Gi}\n",
        6,
        "spec.sharing.defaultMemory",
        "more than a whole A100-40GB",
    ),
    (
        "  sharing: {mode: hami, defaultMemory: lots}\n",
        6,
        "spec.sharing.defaultMemory",
        "not a valid quantity",
    ),
    ("  sharing: {mode: hami}\n", 6, "spec.sharing", "needs defaultMemory or cores"),
    ("  sharing: {mode: timeslice, cores: 20}\n", 6, "spec.sharing.cores", "applies only to modes"),
    ("  sharing: {mode: kai, cores: 120}\n", 6, "spec.sharing.cores", "maximum"),
    (
        "  sharing: {mode: mps, resourceName: shared-gpu}\n",
        6,
        "spec.sharing.resourceName",
        "ignores other names",
    ),
    (
        "  sharing: {mode: exclusive}\n  match:\n    namespaces: [ok, 'Bad[ns']\n",
        8,
        "spec.match.namespaces[1]",
        "not a namespace name or glob",
    ),
    (
        "  sharing: {mode: exclusive}\n  match:\n    podSelector:\n      matchExpressions:\n"
        "        - {key: app, operator: Like, values: [x]}\n",
        10,
        "spec.match.podSelector.matchExpressions[0].operator",
        "'Like' is not one of",
    ),
    (
        "  sharing: {mode: exclusive}\n  inject:\n    tolerations:\n"
        "      - {key: a, operator: Exists, value: b}\n",
        9,
        "spec.inject.tolerations[0].value",
        "takes no value",
    ),
    (
        "  sharing: {mode: exclusive}\n  inject:\n    nodeAffinity:\n      required:\n"
        "        - {key: gpu, operator: Gt, values: [a, b]}\n",
        10,
        "spec.inject.nodeAffinity.required[0].values",
        "exactly one integer",
    ),
    (
        "  sharing: {mode: exclusive}\n  checkpoint: {image: c, mountPath: relative}\n",
        7,
        "spec.checkpoint.mountPath",
        "absolute",
    ),
    (
        "  sharing: {mode: exclusive}\n  checkpoint: {mountPath: /c}\n",
        7,
        "spec.checkpoint.image",
        "required field is missing",
    ),
    ("  sharing: {mode: exclusive}\n  sharing: {mode: mig}\n", 7, "spec.sharing", "appears twice"),
    (  # the stamp's own annotation: a forced one would fight it
        "  sharing: {mode: exclusive}\n  inject:\n    force: true\n"
        "    annotations: {gpuwebhook.io/applied: mine}\n",
        9,
        "spec.inject.annotations.gpuwebhook.io/applied",
        "are the webhook's own",
    ),
    (
        "  sharing: {mode: exclusive}\n  inject:\n    annotations: {gpuwebhook.io/gpu-memory: 8Gi}\n",
        8,
        "spec.inject.annotations.gpuwebhook.io/gpu-memory",
        "are the webhook's own",
    ),
]


@pytest.mark.parametrize(("body", "line", "path", "reason"), BAD_SPECS)
def test_bad_policies_are_located(tmp_path: Path, body: str, line: int, path: str, reason: str) -> None:
    _write(tmp_path, "policy.yaml", HEADER + body)
    problems = _problems(tmp_path)
    assert any(p == (line, path, p[2]) and reason in p[2] for p in problems), problems


def test_problem_text_names_file_line_field_and_reason(tmp_path: Path) -> None:
    file = _write(tmp_path, "team/gpu.yaml", HEADER + "  sharing: {mode: magic}\n")
    with pytest.raises(PolicyError) as info:
        load_directory(tmp_path)
    assert str(info.value.problems[0]).startswith(f"{file}:6: spec.sharing.mode: 'magic' is not one of")


def test_every_problem_in_every_file_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path, "a.yaml", HEADER + "  sharing: {mode: magic}\n---\n" + HEADER + "  sharing: {mode: mig}\n"
    )
    _write(tmp_path, "b.yml", "kind: GPUMystery\napiVersion: gpuwebhook.io/v1alpha1\n")
    problems = _problems(tmp_path)
    # the bad mode, the second policy's duplicate name (reported with the first), its missing
    # gpuModel, and the unknown kind of our own group
    assert len(problems) == 4, problems
    assert any("also defined at" in reason for _, _, reason in problems)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("a: [1, 2\nb: 3\n", 1, "a '[...]' list that is not closed"),
        ("key: value\n  bad indent: x\n", 2, "a second ':' on this line"),
        ("- just\n- a list\n", 1, "must be a mapping"),
    ],
)
def test_broken_files_are_located(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    _write(tmp_path, "broken.yaml", text)
    problems = _problems(tmp_path)
    assert problems[0][0] == line and fragment in problems[0][2]


def test_unknown_kinds_list_the_known_ones(tmp_path: Path) -> None:
    _write(tmp_path, "x.yaml", "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUMagic\nmetadata: {name: m}\n")
    assert "GPUSharingPolicy (gpuwebhook.io/v1alpha1)" in _problems(tmp_path)[0][2]


def test_duplicate_names_across_files(tmp_path: Path) -> None:
    _write(tmp_path, "a.yaml", HEADER + "  sharing: {mode: exclusive}\n")
    _write(tmp_path, "b.yaml", HEADER + "  sharing: {mode: timeslice}\n")
    assert any(
        line == 4 and "also defined at" in reason and reason.endswith("a.yaml:4")
        for line, _, reason in _problems(tmp_path)
    )


def test_tests_hidden_files_and_other_suffixes_are_not_policies(tmp_path: Path) -> None:
    _write(tmp_path, "p.yaml", HEADER + "  sharing: {mode: exclusive}\n")
    _write(
        tmp_path, "p.test.yaml", "apiVersion: gpuwebhook.io/v1alpha1\nkind: PolicyTest\nmetadata: {name: t}\n"
    )
    _write(tmp_path, "..2026_11_29/p.yaml", "garbage: [")
    _write(tmp_path, "README.md", "# not yaml: [")
    policies = load_directory(tmp_path)
    assert [p.name for p in policies.sharing] == ["p"]


def test_precedence_is_priority_then_name(tmp_path: Path) -> None:
    for name, priority in (("b", 5), ("a", 5), ("z", 9), ("c", 0)):
        _write(
            tmp_path,
            f"{name}.yaml",
            HEADER.replace("name: p", f"name: {name}")
            + f"  priority: {priority}\n  sharing: {{mode: exclusive}}\n",
        )
    assert [p.name for p in load_directory(tmp_path).sharing] == ["z", "a", "b", "c"]


def test_version_changes_with_content(tmp_path: Path) -> None:
    _write(tmp_path, "p.yaml", HEADER + "  sharing: {mode: exclusive}\n")
    first = load_directory(tmp_path).version
    _write(tmp_path, "p.yaml", HEADER + "  sharing: {mode: timeslice}\n")
    assert load_directory(tmp_path).version != first


def test_the_bundled_policies_load() -> None:
    policies = load_directory(Path(__file__).resolve().parents[2] / "policies")
    assert {p.sharing.mode for p in policies.sharing} == {
        "exclusive",
        "timeslice",
        "mps",
        "mig",
        "hami",
        "kai",
    }


@pytest.mark.parametrize(
    "body",
    [
        '  sharing: {mode: exclusive}\n  match: {namespaces: ["ml\\n"]}\n',
        '  sharing: {mode: exclusive}\n  inject: {labels: {team: "ml\\n"}}\n',
        '  sharing: {mode: exclusive}\n  inject: {priorityClassName: "gpu\\n"}\n',
    ],
)
def test_a_trailing_newline_is_not_a_valid_name(tmp_path: Path, body: str) -> None:
    _write(tmp_path, "p.yaml", HEADER + body)
    assert _problems(tmp_path)
