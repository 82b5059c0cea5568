"""One compiled engine serving many threads at once: every answer is the one a lone thread gets."""

from __future__ import annotations

import threading
from typing import Any

from tests.validation import builders as b
from webhook.policy.engines import ConstraintSet
from webhook.policy.engines.regopy import RegoEngine

THREADS = 8
ROUNDS = 60


def test_threads_share_one_engine_without_mixing_inputs() -> None:
    template = b.load_template(b.template("K8sAllowedRepos", b.ALLOWED_REPOS, libs=(b.IMAGES_LIB,)))
    constraints = ConstraintSet(
        [
            b.load_constraint(
                b.constraint("K8sAllowedRepos", "good", parameters={"repos": ["good/"]}), template
            ),
            b.load_constraint(
                b.constraint("K8sAllowedRepos", "other", parameters={"repos": ["other/"]}), template
            ),
        ]
    )
    engine = RegoEngine.compile([template])
    # Each thread has its own pod; a mixed-up input would show another thread's image.
    pods = [b.pod(f"p{n}", f"good/app-{n}", f"evil/app-{n}") for n in range(THREADS)]
    expected = [_summary(engine.evaluate(b.request(pod), constraints)) for pod in pods]
    failures: list[str] = []
    start = threading.Barrier(THREADS)

    def work(n: int) -> None:
        start.wait()
        for _ in range(ROUNDS):
            got = _summary(engine.evaluate(b.request(pods[n]), constraints))
            if got != expected[n]:
                failures.append(f"thread {n}: {got} != {expected[n]}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert expected[3]["good"] == [
        'container <c1> uses image <evil/app-3> from a repository not in ["good/"]'
    ]


def _summary(results: Any) -> dict[str, list[str]]:
    return {r.constraint.name: sorted(v.msg for v in r.violations) for r in results}
