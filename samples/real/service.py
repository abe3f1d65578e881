"""A small inference-like HTTP service, and an open-loop load generator for it.

    python samples/real/service.py [--port P] [serve options]     # the service
    python samples/real/service.py load --url URL --rate R --ms N --duration S

**The service.** ``GET /infer?ms=N`` burns about N ms (``--burn wall``: N ms of wall
time, the default; ``--burn cpu``: N ms of the handler thread's own CPU time, so a
request that waits for the CPU -- a cgroup quota, a neighbour on its CPU, the GIL held
by other requests -- takes longer, as real work does) and records the request latency
in the histogram ``demo_request_latency_seconds`` (label ``path`` holds a quote, a
backslash and a newline, so the page has label escapes; each observation carries an
exemplar); ``GET /metrics`` serves the registry with prometheus_client's content
negotiation (OpenMetrics with exemplars when asked for it, else text 0.0.4). Counters
restart from zero when the process restarts, as a real server's do.

``--slow S`` makes /metrics answer after S seconds; ``--pad N`` adds N gauge series to
the page (a huge endpoint); ``--record FILE`` appends ``<epoch_s> <latency_s>`` for every
observation to FILE, the ground truth of the histogram; ``--fsync-log FILE``: each
request appends a line to FILE and fsyncs it before it answers (inside the measured
latency, like a service that logs every request durably), so a disk busy with someone
else's writes slows it through a real mechanism; ``--buckets a,b,...`` the histogram's
upper bounds in seconds; ``--comm NAME`` sets the process name (``/proc/PID/comm``), so
a bundle's process snapshots tell it from other Python processes. Prints ``ready PORT``
once it listens.

**The load generator** (``load``): open loop at a fixed rate: request ``k`` is due at
``start + k / rate``; ``--threads`` workers take the due requests in order and send each
at its due time (late when every worker is busy: then the queue of due requests grows,
so a slow service shows as latency, not as a lower offered rate only), each waits for
its answer (``--timeout``). Prints one JSON line at the end: requests sent, answered,
failed, how many were sent more than 100 ms late, client-side p50/p99. ``--log FILE``
appends ``<due_epoch> <sent_epoch> <done_epoch> <status>`` per request.

Example: ``python samples/real/service.py --port 0 --burn cpu --record lat.txt`` and
``python samples/real/service.py load --url http://127.0.0.1:PORT --rate 20 --ms 10 --duration 60``
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import queue
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

DEFAULT_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
PATH_LABEL = 'infer "v1"\\batch\n'


def set_comm(name: str) -> None:
    """prctl(PR_SET_NAME): the name ps, pidstat and /proc/PID/status show."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)


def _burn_wall(ms: float) -> None:
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        x += 1


def _burn_cpu(ms: float) -> None:
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        x += 1


class Handler(BaseHTTPRequestHandler):
    slow = 0.0
    pad = 0
    record = None
    fsync_fd: int | None = None
    fsync_lock = threading.Lock()
    burn = staticmethod(_burn_wall)
    registry = None
    latency = requests = inflight = None

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path == "/metrics":
            self._metrics()
        elif url.path == "/infer":
            ms = float(parse_qs(url.query).get("ms", ["5"])[0])
            start = time.perf_counter()
            with self.inflight.track_inprogress():
                self.burn(ms)
                if self.fsync_fd is not None:
                    line = f"{time.time():.6f} {self.client_address[1]} infer ms={ms:g}\n"
                    with self.fsync_lock:  # one log file, appended and fsynced in order
                        os.write(self.fsync_fd, line.encode())
                        os.fsync(self.fsync_fd)
            took = time.perf_counter() - start
            self.latency.labels(path=PATH_LABEL).observe(
                took, exemplar={"trace_id": f"{int(start * 1e6):x}"}
            )
            if self.record is not None:
                self.record.write(f"{time.time():.6f} {took:.9f}\n")
            self.requests.labels(code="200").inc()
            self._send(200, b"ok\n", "text/plain")
        else:
            self._send(404, b"no\n", "text/plain")

    def _metrics(self) -> None:
        from prometheus_client.exposition import choose_encoder

        if self.slow:
            time.sleep(self.slow)
        encoder, ctype = choose_encoder(self.headers.get("Accept", ""))
        body = encoder(self.registry)
        if self.pad:
            eof = b"# EOF\n" if body.endswith(b"# EOF\n") else b""
            body = (
                body[: len(body) - len(eof)]
                + b"".join(b'demo_pad{i="%d"} %d\n' % (i, i) for i in range(self.pad))
                + eof
            )
        self._send(200, body, ctype)

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the scraper gave up (size cap, timeout): fine

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve_main(argv: list[str]) -> None:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--slow", type=float, default=0.0)
    ap.add_argument("--pad", type=int, default=0)
    ap.add_argument("--record", default=None)
    ap.add_argument("--fsync-log", default=None)
    ap.add_argument("--burn", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--buckets", default=",".join(f"{b:g}" for b in DEFAULT_BUCKETS))
    ap.add_argument("--comm", default=None)
    a = ap.parse_args(argv)
    if a.comm:
        set_comm(a.comm)
    registry = CollectorRegistry()
    Handler.registry = registry
    Handler.latency = Histogram(
        "demo_request_latency_seconds",
        "Request latency of /infer",
        ["path"],
        buckets=tuple(float(x) for x in a.buckets.split(",")),
        registry=registry,
    )
    Handler.requests = Counter("demo_requests", "Requests served", ["code"], registry=registry)
    Handler.inflight = Gauge("demo_inflight_requests", "Requests in flight", registry=registry)
    Handler.slow, Handler.pad = a.slow, a.pad
    Handler.burn = staticmethod(_burn_cpu if a.burn == "cpu" else _burn_wall)
    if a.record:
        Handler.record = open(a.record, "a", buffering=1)
    if a.fsync_log:
        Handler.fsync_fd = os.open(a.fsync_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    server.daemon_threads = True
    print(f"ready {server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    sys.exit(0)


def _quantile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def load_main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="service.py load", description="open-loop load generator")
    ap.add_argument("--url", required=True, help="http://127.0.0.1:PORT (the service's base)")
    ap.add_argument("--rate", type=float, default=20.0, help="requests per second")
    ap.add_argument("--ms", type=float, default=10.0, help="the ms= of every request")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds (0: until killed)")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--log", default=None)
    ap.add_argument("--comm", default=None)
    a = ap.parse_args(argv)
    if a.comm:
        set_comm(a.comm)
    base = a.url.rstrip("/")
    if base.endswith("/metrics"):
        base = base[: -len("/metrics")]
    target = f"{base}/infer?ms={a.ms:g}"
    due: queue.Queue[float | None] = queue.Queue()
    out = open(a.log, "a", buffering=1) if a.log else None
    lock = threading.Lock()
    stats = {"sent": 0, "ok": 0, "failed": 0, "late": 0}
    lat: list[float] = []
    stop = threading.Event()

    def worker() -> None:
        while True:
            t_due = due.get()
            if t_due is None:
                return
            if stop.is_set():
                continue  # stopped: the due requests left are dropped
            delay = t_due - time.time()
            if delay > 0:
                time.sleep(delay)
            sent = time.time()
            status = "ok"
            try:
                with urllib.request.urlopen(target, timeout=a.timeout) as r:
                    r.read()
            except (OSError, urllib.error.URLError) as e:
                status = type(e).__name__
            done = time.time()
            with lock:
                stats["sent"] += 1
                stats["late"] += sent - t_due > 0.1
                if status == "ok":
                    stats["ok"] += 1
                    lat.append(done - sent)
                else:
                    stats["failed"] += 1
                if out is not None:
                    out.write(f"{t_due:.6f} {sent:.6f} {done:.6f} {status}\n")

    def on_term(*_: object) -> None:
        stop.set()

    import signal

    signal.signal(signal.SIGTERM, on_term)
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(a.threads)]
    for t in threads:
        t.start()
    t0 = time.time()
    k = 0
    with contextlib.suppress(KeyboardInterrupt):
        while not stop.is_set():
            t = t0 + k / a.rate
            if a.duration and t >= t0 + a.duration:
                break
            if t > time.time():
                stop.wait(t - time.time())
                if stop.is_set():
                    break
            due.put(t)
            k += 1
    for _ in threads:
        due.put(None)
    for t in threads:
        t.join(timeout=a.timeout if not stop.is_set() else 1)
    with lock:
        summary = {
            **stats,
            "due": k,
            "rate": a.rate,
            "ms": a.ms,
            "threads": a.threads,
            "seconds": round(time.time() - t0, 3),
            "client_p50_s": _quantile(lat, 0.5),
            "client_p99_s": _quantile(lat, 0.99),
        }
    print(json.dumps(summary), flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "load":
        load_main(sys.argv[2:])
    else:
        serve_main(sys.argv[2:] if len(sys.argv) > 1 and sys.argv[1] == "serve" else sys.argv[1:])


if __name__ == "__main__":
    main()
