"""The ceiling: a trivial starlette handler that answers every review with a fixed JSON patch.

Run in the same benchmark as gpu-webhook, over the same TLS and HTTP stack, so every
figure can be reported as a ratio to it.
"""

from __future__ import annotations

import argparse
import base64
from pathlib import Path

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

PATCH = base64.b64encode(orjson.dumps([{"op": "add", "path": "/metadata/labels/x", "value": "y"}])).decode()


async def review(request: Request) -> Response:
    uid = orjson.loads(await request.body())["request"]["uid"]
    response = {"uid": uid, "allowed": True, "patchType": "JSONPatch", "patch": PATCH}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    return Response(orjson.dumps(body), media_type="application/json")


app = Starlette(
    routes=[Route("/mutate", review, methods=["POST"]), Route("/validate", review, methods=["POST"])]
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert-dir", type=Path, required=True)
    args = parser.parse_args()
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        ssl_certfile=str(args.cert_dir / "tls.crt"),
        ssl_keyfile=str(args.cert_dir / "tls.key"),
        http="httptools",
        loop="uvloop",
        access_log=False,
        log_level="info",
    )


if __name__ == "__main__":
    main()
