#!/usr/bin/env python3
"""Load check for `vela serve`: N concurrent streaming completions over N connections.

    python3 tests/server/sse_load.py --port 8080 --clients 256 --max-tokens 64

Prints how many requests completed (streams must end with [DONE]), the tokens received, the
wall time and the spread of request durations. Not a pass/fail test (speed belongs to benchmarks); it exits
non-zero only when a stream fails or is malformed. Standard library only.
"""
import argparse
import asyncio
import json
import statistics
import sys
import time


async def one_stream(host, port, body, timeout):
    """One request over its own connection; returns (tokens or chunks, seconds)."""
    start = time.monotonic()
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    payload = json.dumps(body).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(payload)).encode() + b"\r\nConnection: close\r\n\r\n"
                 + payload)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), timeout)  # until the server closes
    writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n")[0]:
        raise RuntimeError(head.split(b"\r\n")[0].decode())
    if b"chunked" not in head.lower():
        return json.loads(rest)["usage"]["completion_tokens"], time.monotonic() - start
    # De-chunk.
    body_bytes, i = b"", 0
    while True:
        j = rest.index(b"\r\n", i)
        size = int(rest[i:j], 16)
        if size == 0:
            break
        body_bytes += rest[j + 2:j + 2 + size]
        i = j + 2 + size + 2
    events = [e for e in body_bytes.decode("utf-8", "replace").split("\n\n") if e]
    if events[-1] != "data: [DONE]":
        raise RuntimeError("no [DONE]")
    tokens = sum(1 for e in events[:-1] if json.loads(e[6:])["choices"][0]["text"])
    return tokens, time.monotonic() - start


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--no-stream", action="store_true", help="whole responses instead of SSE")
    a = ap.parse_args()
    body = {"prompt": "Once upon a time", "max_tokens": a.max_tokens, "ignore_eos": True,
            "temperature": 0.8, "stream": not a.no_stream}
    start = time.monotonic()
    results = await asyncio.gather(
        *[one_stream(a.host, a.port, body, a.timeout) for _ in range(a.clients)],
        return_exceptions=True)
    wall = time.monotonic() - start
    ok = [r for r in results if not isinstance(r, Exception)]
    failed = [r for r in results if isinstance(r, Exception)]
    tokens = sum(t for t, _ in ok)
    durations = [d for _, d in ok]
    print(f"{len(ok)}/{a.clients} requests completed in {wall:.2f} s; "
          f"{tokens} tokens ({tokens / wall:.0f}/s); "
          f"stream duration median {statistics.median(durations):.2f} s, "
          f"max {max(durations):.2f} s" if ok else "no stream completed")
    for e in failed[:5]:
        print("failed:", repr(e))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
