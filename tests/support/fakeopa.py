"""A small OPA server for tests: OPA's REST wire format, with every evaluation done by regopy.

Follows the documented Policy API (`PUT/GET/DELETE /v1/policies/{id}`, errors as
`{"code", "message", "errors": [{"code", "message", "location": {"file", "row", "col"}}]}`)
and Data API (`PUT /v1/data/{path}` -> 204, `POST /v1/data/{path}` with `{"input": …}` ->
`{"result": …}`, no `result` when undefined, 500 when evaluation fails). It evaluates
nothing itself: each query is compiled and run by regopy, like the in-process engine.

Like OPA, a policy is refused when the set it would join does not compile. Compiling the whole
set on every `PUT` made a start that pushes N modules cost N whole-set compiles: over a minute
on a busy 2-CPU machine, longer than any client waits. So only the modules the new one can
affect are compiled (see `_affected`), and a set once compiled is not compiled again.
Queries share built bundles the same way (see `FakeOpa._bundle`).
"""

from __future__ import annotations

import collections
import functools
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import orjson
from regopy import RegoError

from tests.support.patience import PATIENCE
from tests.support.quiethttp import QuietHandler, QuietHTTPServer
from webhook.policy.engines.layout import regopy_errors
from webhook.policy.engines.opa import OpaSettings
from webhook.policy.engines.regopy import RuntimeFailure, new_interpreter, query_entrypoint

_MISSING = object()


class FakeOpa:
    def __init__(self) -> None:
        self.policies: dict[str, str] = {}
        self.data: dict[str, Any] = {}
        self.queries = 0
        self._lock = threading.Lock()
        self._server = QuietHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def settings(self, **overrides: Any) -> OpaSettings:
        """How our client reaches this fake. No test is about OPA being slow: a busy machine makes
        the fake slow, so the client waits as long as a hung test would."""
        return OpaSettings(**{"url": self.url, "timeout": PATIENCE, **overrides})

    def start(self) -> FakeOpa:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- the Policy and Data APIs ---------------------------------------------------

    def put_policy(self, policy_id: str, text: str) -> tuple[int, Any]:
        with self._lock:
            candidate = {**self.policies, policy_id: text}
            errors = _compile_errors(candidate, None if policy_id in self.policies else policy_id)
            if errors:
                body = {"code": "invalid_parameter", "message": "error(s) occurred while compiling module(s)"}
                return 400, {**body, "errors": errors}
            self.policies = candidate
            return 200, {}

    def delete_policy(self, policy_id: str) -> tuple[int, Any]:
        with self._lock:
            if self.policies.pop(policy_id, None) is None:
                return 404, {
                    "code": "resource_not_found",
                    "message": f"storage_not_found_error: policy id {policy_id!r}",
                }
            return 200, {}

    def put_data(self, path: list[str], value: Any) -> tuple[int, Any]:
        with self._lock:
            if not path:
                self.data = value
            else:
                node = self.data
                for key in path[:-1]:
                    node = node.setdefault(key, {})
                node[path[-1]] = value
            return 204, None

    def query(self, path: list[str], input_value: Any) -> tuple[int, Any]:
        base = _lookup(self.data, path)
        if base is not _MISSING:
            return 200, {"result": base}
        with self._lock, _EVALUATING:
            self.queries += 1
            entrypoint = "/".join(path)
            try:
                bundle = self._bundle(entrypoint)
                interpreter = new_interpreter()
                interpreter.set_input_term(orjson.dumps(input_value).decode())
                value = query_entrypoint(interpreter, bundle, entrypoint)
            except (RuntimeFailure, RegoError) as e:
                body = {"code": "internal_error", "message": str(e)}
                return 500, {**body, "errors": [{"code": "eval_error", "message": str(e)}]}
        return 200, {} if value is None else {"result": value}

    def _bundle(self, entrypoint: str) -> Any:
        """Built once per policies, data and entrypoint, for every fake: a suite run asks about a
        few states many times, and building is most of the cost of a query."""
        key = (tuple(self.policies.items()), orjson.dumps(self.data), entrypoint)
        bundle = _BUNDLES.get(key)
        if bundle is None:
            interpreter = new_interpreter()
            for policy_id, text in self.policies.items():
                interpreter.add_module(policy_id, text)
            interpreter.add_data(self.data)
            bundle = _BUNDLES[key] = interpreter.build(None, [entrypoint])
            while len(_BUNDLES) > _BUNDLES_KEPT:
                _BUNDLES.popitem(last=False)
        else:
            _BUNDLES.move_to_end(key)
        return bundle


_BundleKey = tuple[tuple[tuple[str, str], ...], bytes, str]
_BUNDLES: collections.OrderedDict[_BundleKey, Any] = collections.OrderedDict()
_BUNDLES_KEPT = 64
_EVALUATING = threading.Lock()  # the bundles are shared: one query at a time, in every fake


def _compile_errors(policies: dict[str, str], added: str | None) -> list[dict[str, Any]]:
    """The errors of the set `policies`, which compiled without the module `added` (None: it
    replaced one, so the whole set is compiled)."""
    affected = policies.keys() if added is None else _affected(policies, added)
    errors = _compile(tuple((k, v) for k, v in policies.items() if k in affected))
    return [_error(policies, module, offset, message) for module, offset, message in errors]


@functools.lru_cache(maxsize=1024)
def _compile(modules: tuple[tuple[str, str], ...]) -> tuple[tuple[str | None, int | None, str], ...]:
    interpreter = new_interpreter()
    try:
        for policy_id, text in modules:
            interpreter.add_module(policy_id, text)
        interpreter.build("x := true", [])
    except RegoError as e:
        return tuple(regopy_errors(str(e)))
    return ()


_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)", re.MULTILINE)
_DATA_REF = re.compile(r"(?<![\w.])data\b(?:\.\w+)*")
_ANY = ""  # `data` itself, a path computed at run time (`data[x]`), or a module without a package


def _affected(policies: Mapping[str, str], added: str) -> set[str]:
    """The modules whose compilation adding `added` can change, and what they need to compile.

    First every module referring, through any chain, to the added one's package (rules of one
    package refer to each other by name, so a module refers to its own package), then every
    module those refer to. A reference and a package are related when one path starts with the
    other; `_ANY` is related to everything. The rest of the set compiled before, and neither
    sees nor is seen by the added module.
    """
    packages = {policy_id: _package(text) for policy_id, text in policies.items()}
    refs = {policy_id: _refs(text) | {packages[policy_id]} for policy_id, text in policies.items()}

    def refers(a: str, b: str) -> bool:
        return any(_related(ref, packages[b]) for ref in refs[a])

    def closure(start: set[str], edge: Callable[[str, str], bool]) -> set[str]:
        found, frontier = set(start), list(start)
        while frontier:
            current = frontier.pop()
            for other in policies:
                if other not in found and edge(current, other):
                    found.add(other)
                    frontier.append(other)
        return found

    dependents = closure({added}, lambda current, other: refers(other, current))
    return closure(dependents, refers)


def _package(text: str) -> str:
    match = _PACKAGE.search(text)
    return match.group(1) if match else _ANY


def _refs(text: str) -> set[str]:
    return {match.group(0).removeprefix("data").removeprefix(".") for match in _DATA_REF.finditer(text)}


def _related(ref: str, package: str) -> bool:
    if _ANY in (ref, package):
        return True
    return any(a == b or a.startswith(b + ".") for a, b in ((ref, package), (package, ref)))


def _error(policies: dict[str, str], module: str | None, offset: int | None, message: str) -> dict[str, Any]:
    error: dict[str, Any] = {"code": "rego_compile_error", "message": message}
    if module in policies and offset is not None:
        text = policies[module]
        row = text.count("\n", 0, offset) + 1
        error["location"] = {"file": module, "row": row, "col": offset - text.rfind("\n", 0, offset)}
    return error


def _lookup(data: Any, path: list[str]) -> Any:
    node = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _handler(opa: FakeOpa) -> type[QuietHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/health"):
                self._reply(200, {})
            elif self._route("/v1/policies"):
                result = [{"id": k, "raw": v} for k, v in opa.policies.items()]
                self._reply(200, {"result": result})
            else:
                self._reply(*opa.query(self._data_path(), None))

        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self._route("/v1/policies/"):
                self._reply(*opa.put_policy(self._policy_id(), body.decode()))
            else:
                self._reply(*opa.put_data(self._data_path(), orjson.loads(body)))

        def do_POST(self) -> None:
            body = orjson.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            self._reply(*opa.query(self._data_path(), body.get("input")))

        def do_DELETE(self) -> None:
            self._reply(*opa.delete_policy(self._policy_id()))

        def _route(self, prefix: str) -> bool:
            return self.path.split("?")[0].rstrip("/").startswith(prefix.rstrip("/"))

        def _policy_id(self) -> str:
            return urllib.parse.unquote(self.path.split("?")[0].removeprefix("/v1/policies/"))

        def _data_path(self) -> list[str]:
            path = self.path.split("?")[0].removeprefix("/v1/data").strip("/")
            return [urllib.parse.unquote(part) for part in path.split("/") if part]

        def _reply(self, status: int, body: Any) -> None:
            payload = b"" if body is None else orjson.dumps(body)
            self.send_body(status, payload, "application/json" if payload else None)

    return Handler


@contextmanager
def running() -> Iterator[FakeOpa]:
    opa = FakeOpa().start()
    try:
        yield opa
    finally:
        opa.stop()
