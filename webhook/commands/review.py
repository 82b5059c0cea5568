"""`gpu-webhook review FILE…`: what the cluster would do with these manifests, offline."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

from webhook.commands.common import add_policy_options, policy_sources, read_inventory
from webhook.errors import ConfigError
from webhook.objects import read_objects
from webhook.offline import Identity, Outcome, offline_deps, request_for, run
from webhook.types import KubeObject

GREEN, RED, CYAN, BOLD, RESET = "\033[32m", "\033[31m", "\033[36m", "\033[1m", "\033[0m"
Painter = Callable[[str, str], str]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("review", help="dry-run manifests or AdmissionReviews through the policies")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
    add_policy_options(parser)
    parser.add_argument(
        "--namespace",
        help="review as if created in this namespace (default: each object's own, else default)",
    )
    parser.add_argument(
        "--dra-gpu-classes",
        type=lambda text: tuple(part.strip() for part in text.split(",") if part.strip()),
        default=(),
        help="comma-separated DRA device classes counted as GPUs, as serve --dra-gpu-classes",
    )
    parser.add_argument("--user", default="offline-review", help="username the request comes from")
    parser.add_argument("--group", action="append", dest="groups", help="a group of the user (repeatable)")
    parser.add_argument("-o", "--output", choices=["diff", "json", "yaml"], default="diff")
    parser.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    parser.set_defaults(command=command)


def command(args: argparse.Namespace) -> int:
    # The files first: a wrong path is reported before the policies take their time to compile.
    documents = [document for path in args.files for document in _objects(path)]
    deps = offline_deps(
        policy_sources(args), read_inventory(args.inventory), args.kubernetes_version, args.dra_gpu_classes
    )
    identity = Identity(args.user, tuple(args.groups or ("system:authenticated",)))
    outcomes = [
        run(request_for(document, namespace=args.namespace, identity=identity), deps)
        for document in documents
    ]
    print(render(outcomes, args.output, _use_color(args.color)))
    return 0 if all(o.allowed for o in outcomes) else 1


def _objects(path: Path) -> list[KubeObject]:
    """A file with nothing to review is a mistake (a wrong path, a failed redirect), not a pass."""
    found = read_objects(path)
    if not found:
        raise ConfigError(
            f"{path}: no objects to review (the file is empty, holds only comments, or a List without items)"
        )
    return found


def render(outcomes: list[Outcome], output: str, color: bool) -> str:
    if output == "json":
        return orjson.dumps([o.as_json() for o in outcomes], option=orjson.OPT_INDENT_2).decode()
    if output == "yaml":
        return yaml.safe_dump_all([o.as_json() for o in outcomes], sort_keys=False)
    return "\n".join(_diff_view(o, color) for o in outcomes)


def _diff_view(outcome: Outcome, color: bool) -> str:
    paint = _painter(color)
    verdict = paint("allowed", GREEN) if outcome.allowed else paint("DENIED", RED)
    where = f"{outcome.namespace}/{outcome.name}" if outcome.namespace else outcome.name
    lines = [paint(f"{outcome.kind} {where}: ", BOLD) + verdict + _mode(outcome)]
    if outcome.status:
        lines += [f"  {line}" for line in str(outcome.status["message"]).splitlines()]
    lines += [paint(f"  warning: {w}", CYAN) for w in outcome.warnings]
    lines += [_color_line(line, paint) for line in _unified_diff(outcome)]
    return "\n".join(lines)


def _mode(outcome: Outcome) -> str:
    mutation = outcome.mutation
    if mutation.sharing_mode is None:
        return ""
    return (
        f" (sharing {mutation.sharing_mode}, policy {mutation.audit_annotations.get('sharing-policy', '?')})"
    )


def _unified_diff(outcome: Outcome) -> list[str]:
    if not outcome.patch:
        return []
    before, after = _yaml_lines(outcome.submitted), _yaml_lines(outcome.object)
    return list(difflib.unified_diff(before, after, "submitted", "admitted", lineterm=""))


def _yaml_lines(obj: Any) -> list[str]:
    return yaml.safe_dump(obj, sort_keys=False).splitlines()


def _color_line(line: str, paint: Painter) -> str:
    if line.startswith("+") and not line.startswith("+++"):
        return paint(line, GREEN)
    if line.startswith("-") and not line.startswith("---"):
        return paint(line, RED)
    return line


def _painter(color: bool) -> Painter:
    def paint(text: str, code: str) -> str:
        return f"{code}{text}{RESET}" if color else text

    return paint


def _use_color(choice: str) -> bool:
    return choice == "always" or (choice == "auto" and sys.stdout.isatty())
