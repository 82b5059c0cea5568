"""The child process of the template check (webhook.policy.engines.vet): compile and run each
template alone, as the engine does, printing `kind <Kind>` first, so that the last line names the
template if regopy kills the process.

    python -m webhook.policy.engines.vet_child < modules.json
"""

from __future__ import annotations

import contextlib
import json
import sys

from webhook.policy.engines.layout import COMPAT, CONSTRAINTS_KEY, entrypoint
from webhook.policy.engines.regopy import RuntimeFailure, new_interpreter, query_entrypoint

_PROBE_REVIEW = {"kind": {"group": "", "version": "v1", "kind": "Pod"}, "object": {}, "operation": "CREATE"}


def main() -> int:
    request = json.load(sys.stdin)
    for kind in request["kinds"]:
        print("kind", kind, flush=True)
        builder = new_interpreter()
        builder.add_module(COMPAT.name, COMPAT.text)
        for name, text in request["modules"]:
            if name.startswith(f"{kind}/"):
                builder.add_module(name, text)
        bundle = builder.build(None, [entrypoint(kind)])
        runner = new_interpreter()
        runner.set_input_term(json.dumps({"review": _PROBE_REVIEW, CONSTRAINTS_KEY: {kind: {"p0": {}}}}))
        # An error is the template's to report at request time; only a crash matters here.
        with contextlib.suppress(RuntimeFailure):
            query_entrypoint(runner, bundle, entrypoint(kind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
