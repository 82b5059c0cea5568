"""Drive a server with wrk (preferred) or, where wrk is missing, a slower asyncio fallback."""

from __future__ import annotations

import asyncio
import re
import shutil
import ssl
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


@dataclass(frozen=True)
class Load:
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    requests: int
    errors: int
    tool: str


def has_wrk() -> bool:
    return shutil.which("wrk") is not None


def run(url: str, body: bytes, seconds: float, connections: int) -> Load:
    return (
        _wrk(url, body, seconds, connections)
        if has_wrk()
        else asyncio.run(_fallback(url, body, seconds, connections))
    )


def _wrk(url: str, body: bytes, seconds: float, connections: int) -> Load:
    with tempfile.TemporaryDirectory() as tmp:
        body_file = Path(tmp) / "body.json"
        body_file.write_bytes(body)
        script = Path(tmp) / "post.lua"
        script.write_text(
            'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
            f'local f = io.open("{body_file}", "rb")\nwrk.body = f:read("*a")\nf:close()\n'
        )
        command = [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            "--latency",
            "-s",
            str(script),
            url,
        ]
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return _parse_wrk(output)


def _parse_wrk(output: str) -> Load:
    def latency(label: str) -> float:
        match = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s|m)\b", output, re.MULTILINE)
        return float(match[1]) * _UNITS[match[2]] if match else float("nan")

    maximum = re.search(r"Latency\s+[\d.]+\w+\s+[\d.]+\w+\s+([\d.]+)(us|ms|s|m)", output)
    requests = re.search(r"(\d+) requests in", output)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    return Load(
        requests_per_second=float(rate[1]) if rate else 0.0,
        p50_ms=latency("50%"),
        p99_ms=latency("99%"),
        max_ms=float(maximum[1]) * _UNITS[maximum[2]] if maximum else float("nan"),
        requests=int(requests[1]) if requests else 0,
        errors=(int(errors[1]) if errors else 0)
        + (sum(map(int, socket_errors.groups())) if socket_errors else 0),
        tool="wrk",
    )


async def _fallback(url: str, body: bytes, seconds: float, connections: int) -> Load:
    """Keep-alive HTTP/1.1 clients on asyncio; Python's own overhead makes it less accurate than wrk."""
    match = re.match(r"https://([^:/]+):(\d+)(/.*)", url)
    assert match is not None
    host, port, path = match[1], int(match[2]), match[3]
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    request = (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    deadline = time.perf_counter() + seconds
    results = await asyncio.gather(
        *(_client(host, port, context, request, deadline) for _ in range(connections))
    )
    latencies = sorted(ms for client, _ in results for ms in client)
    errors = sum(e for _, e in results)
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    return Load(
        len(latencies) / seconds,
        quantiles[49],
        quantiles[98],
        max(latencies, default=0.0),
        len(latencies),
        errors,
        "asyncio fallback (less accurate than wrk)",
    )


async def _client(
    host: str, port: int, context: ssl.SSLContext, request: bytes, deadline: float
) -> tuple[list[float], int]:
    reader, writer = await asyncio.open_connection(host, port, ssl=context)
    latencies, errors = [], 0
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        writer.write(request)
        status = int((await reader.readline()).split()[1])
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await reader.readexactly(length)
        latencies.append((time.perf_counter() - started) * 1000)
        errors += status >= 300
    writer.close()
    return latencies, errors
