#!/usr/bin/env python3
"""Calls per second of the Python client against a dispatcher: --calls
calls of the echo tool, --concurrency at a time, with the sync client
(threads sharing one Client) and the asyncio client (one event loop), each
after a warm-up. Prints one FIGURE line per client, with the latency
percentiles of a call (submit, run on a worker, answer) and the client's
own CPU time per call (this process's: the client's overhead, whatever
the dispatcher's speed).

    python3 bench.py --url http://127.0.0.1:8080 [--api-key KEY] [--calls 2000] [--concurrency 16]
"""

import argparse
import asyncio
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from toolwire import AsyncClient, Client  # noqa: E402


def figure(name, n, conc, took, cpu, lat):
    lat.sort()
    pct = lambda q: lat[min(int(q * len(lat)), len(lat) - 1)] * 1000  # noqa: E731
    print(f"FIGURE python-{name}: {n / took:.0f} calls/s, {n} calls at concurrency {conc} in {took:.2f}s; "
          f"latency p50 {pct(0.5):.1f}ms p99 {pct(0.99):.1f}ms; client CPU {cpu / n * 1e6:.0f}us a call", flush=True)


def bench_sync(url, key, n, conc):
    with Client(url, api_key=key) as tw:
        def one(i):
            t0 = time.perf_counter()
            tw.call("echo", {"text": f"bench {i}"}).raise_for_error()
            return time.perf_counter() - t0
        with ThreadPoolExecutor(conc) as pool:
            list(pool.map(one, range(conc * 4)))  # warm-up: connections, caches
            t0, c0 = time.perf_counter(), time.process_time()
            lat = list(pool.map(one, range(n)))
            figure("sync", n, conc, time.perf_counter() - t0, time.process_time() - c0, lat)


async def bench_async(url, key, n, conc):
    async with AsyncClient(url, api_key=key) as tw:
        sem = asyncio.Semaphore(conc)

        async def one(i):
            async with sem:
                t0 = time.perf_counter()
                (await tw.call("echo", {"text": f"bench {i}"})).raise_for_error()
                return time.perf_counter() - t0
        await asyncio.gather(*(one(i) for i in range(conc * 4)))
        t0, c0 = time.perf_counter(), time.process_time()
        lat = list(await asyncio.gather(*(one(i) for i in range(n))))
        figure("asyncio", n, conc, time.perf_counter() - t0, time.process_time() - c0, lat)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("TOOLWIRE_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--api-key", default=os.environ.get("TOOLWIRE_API_KEY"))
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=16)
    a = ap.parse_args()
    if a.calls < 1 or not 1 <= a.concurrency <= 1024:
        ap.error("--calls must be at least 1 and --concurrency from 1 to 1024")
    bench_sync(a.url, a.api_key, a.calls, a.concurrency)
    asyncio.run(bench_async(a.url, a.api_key, a.calls, a.concurrency))


if __name__ == "__main__":
    main()
