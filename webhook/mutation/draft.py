"""The object being mutated: a copy-on-write view of the request's object. Pure.

Cloning a whole pod and diffing it back took a third of a GPU review's mutation. Here the
mutated object shares every part of the request's object that no mutator writes; a mutator
asks the draft for a part before it writes it, and the draft copies that part (one shallow
copy, once) and the path down to it. The diff (webhook/mutation/diff.py) stops wherever the
two objects share a part, so it walks only what the mutators wrote, and its patch is the one
a full clone and diff would give, operation for operation.

The rule for mutators: read anything; write only the pod, its metadata and its spec as the
draft hands them out, and anything deeper through `own`, `mapping`, `sequence` or
`container`. A new value a mutator builds is its own; a part it did not get from the draft is
the request's, and writing it would edit the request and go missing from the patch (the
property tests in tests/mutation hold every mode to the old clone-and-diff engine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhook.accounting.target import CONTAINER_LISTS, TEMPLATE_PATHS, PodTarget
from webhook.fields import mapping

# Every list a mutator may write a container of: void reaches ephemeral containers too.
LISTS = ("initContainers", "containers", "ephemeralContainers")


class Draft:
    """Which parts of the mutated object are its own. `in_place`: the caller has cloned the object
    already (the /validate sharing check), so every part is writable as it is."""

    __slots__ = ("_in_place", "_owned")

    def __init__(self, *, in_place: bool = False) -> None:
        self._in_place = in_place
        # Copies by identity; a copy stays in the tree, so its id is never reused meanwhile.
        self._owned: dict[int, Any] = {}

    def adopt(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The mutated object: `obj`'s root, and the path to its pod, metadata and spec, copied."""
        root = self._copy(obj)
        node = root
        for key in TEMPLATE_PATHS.get(str(root.get("kind", "Pod")), ()):
            node = self.own(node, key)
        for key in ("metadata", "spec"):
            if isinstance(node.get(key), dict):
                self.own(node, key)
        return root  # type: ignore[no-any-return]

    def own(self, parent: Any, key: Any) -> Any:
        """`parent[key]`, a dict or list, made writable; `parent` must be writable itself."""
        child = parent[key]
        if self._in_place or id(child) in self._owned:
            return child
        child = parent[key] = self._copy(child)
        return child

    def mapping(self, parent: dict[str, Any], key: str) -> dict[str, Any]:
        """fields.mapping, writable: the child dict, created when absent or not a dict."""
        child = parent.get(key)
        if not isinstance(child, dict):
            child = parent[key] = {}
            self._owned[id(child)] = child
            return child
        return self.own(parent, key)  # type: ignore[no-any-return]

    def sequence(self, parent: dict[str, Any], key: str) -> list[Any]:
        """fields.sequence, writable: the child list, created when absent or not a list."""
        child = parent.get(key)
        if not isinstance(child, list):
            child = parent[key] = []
            self._owned[id(child)] = child
            return child
        return self.own(parent, key)  # type: ignore[no-any-return]

    def container(
        self, spec: dict[str, Any], container: dict[str, Any], *, resources: bool = False
    ) -> dict[str, Any]:
        """The writable version of one of the pod's containers (found by identity); with
        `resources`, its resources and their sections too, the parts the rewrites edit."""
        if self._in_place or id(container) in self._owned:
            return self._own_resources(container) if resources else container
        for list_name in LISTS:
            items = spec.get(list_name)
            if not isinstance(items, list):
                continue
            for index, item in enumerate(items):
                if item is container:
                    owned: dict[str, Any] = self.own(self.own(spec, list_name), index)
                    return self._own_resources(owned) if resources else owned
        raise LookupError("not one of the pod's containers")  # a mutator's error, never the user's

    def container_at(self, spec: dict[str, Any], list_name: str, index: int) -> dict[str, Any]:
        """container(), for a caller that knows where the container is."""
        return self.own(self.own(spec, list_name), index)  # type: ignore[no-any-return]

    def _own_resources(self, container: dict[str, Any]) -> dict[str, Any]:
        resources = container.get("resources")
        if isinstance(resources, dict):
            resources = self.own(container, "resources")
            for section in ("limits", "requests"):
                if isinstance(resources.get(section), dict):
                    self.own(resources, section)
        return container

    def _copy(self, node: Any) -> Any:
        copied = node.copy()
        self._owned[id(copied)] = copied
        return copied


class _Looked:
    """A PodTarget child dict looked up on first read and kept (functools.cached_property, but
    without its lock, which costs more than the lookup it saves)."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __get__(self, target: PodTarget, _owner: type) -> dict[str, Any]:
        found = target.__dict__[self.key] = mapping(target.pod, self.key)
        return found


@dataclass(frozen=True)
class DraftTarget(PodTarget):
    """The pod in a draft. Its metadata and spec dicts stay in place once handed out (no mutator
    replaces them), so each is looked up once instead of on every one of the mutators' reads."""

    metadata = _Looked("metadata")
    spec = _Looked("spec")


def containers(target: PodTarget) -> list[tuple[str, int, dict[str, Any]]]:
    """(list name, index, container) for init containers, then app containers, as they are now:
    one list built in one call, where the mutators look at the pod's containers."""
    found: list[tuple[str, int, dict[str, Any]]] = []
    spec = target.pod.get("spec")
    for list_name in CONTAINER_LISTS if isinstance(spec, dict) else ():
        items = spec.get(list_name)  # type: ignore[union-attr]
        for index, container in enumerate(items) if isinstance(items, list) else ():
            if isinstance(container, dict):
                found.append((list_name, index, container))
    return found
