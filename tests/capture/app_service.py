"""A small inference-like HTTP service for the --app-metrics tests (run as a script).

``GET /infer?ms=N`` burns about N ms of CPU and records the request latency in the
histogram ``demo_request_latency_seconds`` (label ``path`` holds a quote, a backslash
and a newline, so the page has label escapes; each observation carries an exemplar);
``GET /metrics`` serves the registry with prometheus_client's content negotiation
(OpenMetrics with exemplars when asked for it, else text 0.0.4). Counters restart from
zero when the process restarts, as a real server's do.

``--slow S`` makes /metrics answer after S seconds; ``--pad N`` adds N gauge series to
the page (a huge endpoint); ``--record FILE`` appends ``<epoch_s> <latency_s>`` for every
observation to FILE, the ground truth of the histogram. Prints ``ready PORT`` once it
listens.

Example: ``python tests/capture/app_service.py --port 0``
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

REGISTRY = CollectorRegistry()
LATENCY = Histogram(
    "demo_request_latency_seconds",
    "Request latency of /infer",
    ["path"],
    buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0),
    registry=REGISTRY,
)
REQUESTS = Counter("demo_requests", "Requests served", ["code"], registry=REGISTRY)
INFLIGHT = Gauge("demo_inflight_requests", "Requests in flight", registry=REGISTRY)
PATH_LABEL = 'infer "v1"\\batch\n'


def _burn(ms: float) -> None:
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        x += 1


class Handler(BaseHTTPRequestHandler):
    slow = 0.0
    pad = 0
    record = None

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path == "/metrics":
            self._metrics()
        elif url.path == "/infer":
            ms = float(parse_qs(url.query).get("ms", ["5"])[0])
            start = time.perf_counter()
            with INFLIGHT.track_inprogress():
                _burn(ms)
            took = time.perf_counter() - start
            LATENCY.labels(path=PATH_LABEL).observe(
                took, exemplar={"trace_id": f"{int(start * 1e6):x}"}
            )
            if self.record is not None:
                self.record.write(f"{time.time():.6f} {took:.9f}\n")
            REQUESTS.labels(code="200").inc()
            self._send(200, b"ok\n", "text/plain")
        else:
            self._send(404, b"no\n", "text/plain")

    def _metrics(self) -> None:
        if self.slow:
            time.sleep(self.slow)
        encoder, ctype = choose_encoder(self.headers.get("Accept", ""))
        body = encoder(REGISTRY)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--slow", type=float, default=0.0)
    ap.add_argument("--pad", type=int, default=0)
    ap.add_argument("--record", default=None)
    a = ap.parse_args()
    Handler.slow, Handler.pad = a.slow, a.pad
    if a.record:
        Handler.record = open(a.record, "a", buffering=1)
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    server.daemon_threads = True
    print(f"ready {server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()
