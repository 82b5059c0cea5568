"""The documented examples reach review() through the installed webhook configurations
(manifests/base), dispatched as kube-apiserver would (tests/support/dispatch.py)."""

from __future__ import annotations

from tests.native_policies.support import bundled, deployment, deps, pod
from tests.support.dispatch import Request, installed


def test_installed_configuration_routes_the_examples() -> None:
    with installed(deps(bundled())) as dispatcher:
        denied = dispatcher.admit(
            Request("CREATE", deployment(6), resource="deployments", namespace_labels={"environment": "test"})
        )
        assert not denied.allowed
        assert "demo-policy.example.com" in denied.message
        limited = dispatcher.admit(
            Request(
                "CREATE",
                deployment(4, "params"),
                resource="deployments",
                namespace_labels={"environment": "params"},
            )
        )
        assert not limited.allowed
        meshed = dispatcher.admit(Request("CREATE", pod(), namespace_labels={"mesh": "on"}))
        assert meshed.allowed and meshed.object is not None
        assert [c["name"] for c in meshed.object["spec"]["initContainers"]] == ["mesh-proxy"]
        assert meshed.object["metadata"]["labels"] == {"mesh": "enabled"}
