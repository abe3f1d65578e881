"""The application's own metrics: Prometheus / OpenMetrics pages scraped by the capture
(``--app-metrics URL``, ``series/app_metrics_<n>.out``), or one page saved by hand
(``curl http://host:8000/metrics > metrics.txt``).

Input (docs/bundle-format.md "Application series"): each scrape between a ``#
hindsight-scrape begin <epoch_s> <url>`` and a ``# hindsight-scrape end <epoch_s> rc=…
bytes=… truncated=… dur_ms=…[ error=…]`` line. Each page is parsed with
`prometheus_client` (OpenMetrics when it ends with ``# EOF`` and that strict parser takes
it, else the text format 0.0.4), so any exposition works: vLLM, SGLang, Hugging Face TGI,
NVIDIA Triton, and any generic counter, gauge, histogram, summary.

Tables (types and units in ``TABLES``):

- ``app_scrape``: one row per scrape attempt, with a status (``ok``, ``truncated``,
  ``failed``: the endpoint did not answer, ``unparsable``, ``cut``: no end marker).
- ``app_metric_sample``: every sample of every page (long format). ``labels`` is one
  sorted string ``a="1",b="x\\"y"`` (exposition escapes), without ``le`` (column ``le``,
  ``+Inf`` = inf) and ``quantile`` (column ``quantile``).
- ``app_metric_rate``: per-second rates of cumulative series (counters, ``_count`` and
  ``_sum`` of histograms and summaries, untyped ``*_total``) between consecutive scrapes;
  after a reset (the value went down) ``delta`` is the value itself.
- ``app_metric_quantile``: per scrape interval and labels, ``count``, ``mean`` (Δsum /
  Δcount) and ``p50``/``p90``/``p99`` of each histogram from the bucket deltas exactly as
  Prometheus' ``histogram_quantile`` does (buckets sorted by ``le``, counts made
  monotonic, linear interpolation in the first bucket whose cumulative count reaches the
  rank, from the previous ``le`` or 0; a rank in ``+Inf`` gives the highest finite bound;
  no ``+Inf`` bucket or no observation: NULL). Summaries give the quantiles they expose
  (over the client's window) and Δsum / Δcount. Triton's cumulative microsecond counters
  (``nv_inference_request_duration_us``, ``…_queue_…``, ``…_compute_*_…`` per
  ``nv_inference_request_success``; cache hit/miss durations per count) give ``type``
  ``counter_pair``, ``mean`` = Δduration / Δcount. ``unit`` comes from the family name
  (``_seconds``, ``_ms``, ``_us``, ``_ns``…; TGI's ``tgi_*_duration`` are seconds); the
  ``*_ms`` columns are the latencies in milliseconds.

A bad scrape costs only itself: its sample lines are counted skipped and the parser's
message is in ``app_scrape.reason``. The text parser's renaming of a ``# TYPE x counter``
family's samples to ``x_total`` is undone (unless the name ends in ``_total``); it has no
exemplars (the OpenMetrics parser keeps them). Timestamps after a sample value are
ignored (every sample takes its scrape's time). Cost: about 20 µs per sample.

Sample input (one scrape)::

    # hindsight-scrape begin 1796175710.633863016 http://127.0.0.1:8000/metrics
    # HELP vllm:e2e_request_latency_seconds Histogram of end to end request latency in seconds.
    # TYPE vllm:e2e_request_latency_seconds histogram
    vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="facebook/opt-125m"} 1.0
    vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="facebook/opt-125m"} 1.0
    vllm:e2e_request_latency_seconds_count{model_name="facebook/opt-125m"} 1.0
    vllm:e2e_request_latency_seconds_sum{model_name="facebook/opt-125m"} 0.5034303665161133
    # hindsight-scrape end 1796175710.704318778 rc=0 bytes=3291 truncated=0 dur_ms=70.5
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families

from analyzer.errors import ParseError
from analyzer.parsers import _app_derive, _blocks
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult, table

S, F = pl.String(), pl.Float64()
_LAT = "latency percentile in milliseconds (NULL when the unit is not a time)"
TABLES = {
    "app_scrape": table(
        "one row per scrape of an --app-metrics endpoint",
        ("ts", TS, "", "scrape start (UTC); NULL for a page saved without the capture"),
        ("endpoint", S, "", "URL scraped (user:password masked)"),
        ("dur_ms", F, "ms", "time the scrape took"),
        ("rc", pl.Int32(), "", "exit status of curl/wget (0 = page received)"),
        ("bytes", pl.Int64(), "B", "bytes of the page kept"),
        ("truncated", pl.Boolean(), "", "the page was cut at the size cap (HINDSIGHT_APP_MAX_KB)"),
        ("format", S, "", "'openmetrics' or 'prometheus' (text 0.0.4)"),
        ("samples", pl.Int64(), "", "samples kept from the page"),
        ("status", S, "", "ok, truncated, failed, unparsable or cut (no end marker)"),
        ("reason", S, "", "why the status is not ok (curl/wget or parser message)"),
    ),
    "app_metric_sample": table(
        "one row per sample per scrape",
        ("ts", TS, "", "scrape start (UTC)"),
        ("endpoint", S, "", "URL scraped"),
        ("family", S, "", "metric family (# TYPE name), e.g. vllm:e2e_request_latency_seconds"),
        ("metric", S, "", "sample name as exposed (…_bucket, …_count, …_sum, …_total)"),
        ("type", S, "", "counter, gauge, histogram, summary, info, stateset, unknown/untyped…"),
        ("labels", S, "", 'sorted k="v" list (exposition escapes), without le / quantile'),
        ("le", F, "", "histogram bucket upper bound (inf for +Inf); NULL otherwise"),
        ("quantile", F, "", "summary quantile; NULL otherwise"),
        ("value", F, "", "sample value, in the metric's own unit"),
        ("exemplar_labels", S, "", "exemplar labels (OpenMetrics pages)"),
        ("exemplar_value", F, "", "exemplar value"),
    ),
    "app_metric_rate": table(
        "one row per cumulative series per interval between two scrapes",
        ("ts", TS, "", "the later scrape's start (UTC)"),
        ("endpoint", S, "", "URL scraped"),
        ("family", S, "", "metric family"),
        ("metric", S, "", "sample name (…_total, …_count, …_sum)"),
        ("type", S, "", "type of the family"),
        ("labels", S, "", "as in app_metric_sample"),
        ("dt_s", F, "s", "time between the two scrapes"),
        ("delta", F, "", "increase in the interval (the value itself after a reset)"),
        ("rate_per_s", F, "1/s", "delta / dt_s, in the metric's unit per second"),
        ("reset", pl.Boolean(), "", "the value went down: the counter restarted from zero"),
    ),
    "app_metric_quantile": table(
        "one row per histogram, summary or Triton duration counter, labels and interval",
        ("ts", TS, "", "the later scrape's start (UTC)"),
        ("endpoint", S, "", "URL scraped"),
        ("family", S, "", "histogram / summary / duration counter family"),
        ("labels", S, "", "as in app_metric_sample"),
        ("type", S, "", "histogram, summary or counter_pair (Triton)"),
        ("dt_s", F, "s", "interval length"),
        ("count", F, "", "observations (requests) in the interval"),
        ("rate_per_s", F, "1/s", "count / dt_s"),
        ("mean", F, "", "Δsum / Δcount, in the family's unit"),
        ("p50", F, "", "median in the family's unit (histogram: interval; summary: as exposed)"),
        ("p90", F, "", "90th percentile, same"),
        ("p99", F, "", "99th percentile, same"),
        ("unit", S, "", "s, ms, us or ns from the family name; NULL when not a time"),
        ("mean_ms", F, "ms", "mean " + _LAT.removeprefix("latency percentile ")),
        ("p50_ms", F, "ms", "p50 " + _LAT),
        ("p90_ms", F, "ms", "p90 " + _LAT),
        ("p99_ms", F, "ms", "p99 " + _LAT),
        ("reset", pl.Boolean(), "", "a counter of the interval was reset"),
    ),
}

BATCH_SAMPLES = 200_000  # samples per batch handed to the store
MAX_PAGE_BYTES = 64 << 20  # a page larger than this is counted, not parsed
BEGIN = "# hindsight-scrape begin "
_BEGIN = r"^# hindsight-scrape begin ([0-9]{1,12}(?:\.[0-9]{1,9})?) (\S*)\s*$"
_END = (
    r"^# hindsight-scrape end ([0-9]{1,12}(?:\.[0-9]{1,9})?) rc=(-?[0-9]+) bytes=([0-9]+)"
    r" truncated=([01]) dur_ms=([0-9.]+)(?: error=(.*))?$"
)
_SAMPLE_LINE = re.compile(
    r"^[A-Za-z_:][A-Za-z0-9_:]*(?:\{.*\})?\s+(?:[-+0-9.eE]+|NaN|[+-]?Inf)", re.M
)
_META_LINE = re.compile(r"^# (?:HELP|TYPE) [A-Za-z_:][A-Za-z0-9_:]* ", re.M)
_BUCKETED = {"histogram", "gaugehistogram"}
_SCRAPE_COLUMNS = list(TABLES["app_scrape"].schema)
_SAMPLE_SCHEMA = dict(list(TABLES["app_metric_sample"].schema.items())[2:])  # no ts, endpoint


def sniff(head: str, name: str) -> float:
    """Certain for the capture's scrape blocks; high for a bare exposition page."""
    if BEGIN in head:
        return 0.99
    meta, samples = len(_META_LINE.findall(head)), len(_SAMPLE_LINE.findall(head))
    return 0.85 if meta >= 2 and samples >= 1 else 0.0


@dataclass
class _Scrape:
    """A scrape (``kind`` ``scrape``; ``cut``: no end marker), a page saved without the
    capture (``bare``), lines outside any scrape (``stray``) or before the first marker
    (``pre``: stray once a marker follows, else a bare page). ``n_lines``: every line,
    markers included; ``text``: the page (None once over ``MAX_PAGE_BYTES``) with its
    line counts; the marker fields (times in µs since the epoch) are None without markers."""

    kind: str
    n_lines: int = 0
    size: int = 0
    text: str | None = ""
    comments: int = 0
    blank: int = 0
    sample_lines: int = 0
    eof: bool = False
    plain_counters: frozenset[str] = frozenset()  # '# TYPE x counter', x not ending in _total
    endpoint: str | None = None
    start_us: int | None = None
    rc: int | None = None
    bytes: int | None = None
    truncated: bool = False
    dur_ms: float | None = None
    error: str | None = None


def _epoch_us(text: str) -> int:
    """'1764424800.123456789' -> µs since the epoch, exactly (no float rounding)."""
    whole, _, frac = text.partition(".")
    return int(whole) * 1_000_000 + int((frac + "000000")[:6])


def _cut(buf: bytes, limit: int) -> int:
    """End a block before its last begin marker (whole scrapes), else after its last line."""
    at = buf.rfind(b"\n" + BEGIN.encode(), 0, limit)
    return at + 1 if at >= 0 else limit


class _Scrapes:
    """Cuts each block into `_Scrape`s; a scrape, or the text before the first marker,
    that a block leaves open is carried into the next block: its lines, or only its
    counts once it is over ``MAX_PAGE_BYTES``."""

    def __init__(self) -> None:
        self.carry: pl.DataFrame | None = None
        self.open: _Scrape | None = None
        self.seen_marker = False

    def of(self, block: _blocks.Block) -> list[_Scrape]:
        df = block.lines if self.carry is None else pl.concat([self.carry, block.lines])
        first = self.open or (None if self.seen_marker else _Scrape("pre"))
        self.carry, self.open = None, None
        # the lines before the first begin marker: text before any marker ("pre"), an open
        # scrape's ("cut"), or stray lines
        head = first.kind if first else None
        pre, cut = pl.lit(head == "pre"), pl.lit(head == "cut")
        line, s, g = pl.col("line"), pl.col("line").str.strip_chars(), pl.col("g")
        b, e = line.str.extract_groups(_BEGIN), line.str.extract_groups(_END)
        df = df.with_columns(g=b.struct.field("1").is_not_null().cum_sum())
        ended = e.struct.field("1").is_not_null() & ((g > 0) | cut)
        df = df.with_columns(ends=ended.cum_sum().over("g"))
        closing = ended & (pl.col("ends") == 1)
        inside = (pl.col("ends") == 0) | closing  # a scrape's lines: up to its first end marker
        own = pl.when(g > 0).then(inside).otherwise(pre | (cut & inside))
        page = own & ~closing & b.struct.field("1").is_null()
        typed = s.str.extract(r"^#\s+TYPE\s+(\S+)\s+counter\s*$", 1)
        agg = df.group_by("g", maintain_order=True).agg(
            n=own.sum(),
            stray=(~own).sum(),
            begin=b.struct.field("1").drop_nulls().first(),
            url=b.struct.field("2").drop_nulls().first(),
            end=e.filter(closing).first(),
            size=(line.str.len_chars() + 1).filter(page).sum(),
            blank=(page & (s == "")).sum(),
            comments=(page & s.str.starts_with("#")).sum(),
            sample_lines=(page & (s != "") & ~s.str.starts_with("#")).sum(),
            eof=(page & (s == "# EOF")).any(),
            plain=typed.filter(page & ~typed.str.ends_with("_total")),
            text=line.filter(page).str.join("\n"),
        )
        last_g = int(agg["g"][-1])
        out: list[_Scrape] = []
        if first is not None and first.n_lines and agg["g"][0] != 0:  # a begin right away ends it
            out.append(self._finish(first, last_g))
        for r in agg.iter_rows(named=True):
            if r["stray"]:
                out.append(_Scrape("stray", n_lines=r["stray"]))
            cur = first
            if r["g"] > 0:
                self.seen_marker = True
                cur = _Scrape("cut", endpoint=r["url"] or None, start_us=_epoch_us(r["begin"]))
            if cur is None:
                continue
            cur.n_lines += r["n"]
            cur.size += r["size"]
            if cur.size > MAX_PAGE_BYTES:
                cur.text = None
            elif cur.text is not None:  # a scrape not carried over: all of it is in this block
                for k in ("text", "eof", "comments", "blank", "sample_lines"):
                    setattr(cur, k, r[k])
                cur.plain_counters = frozenset(r["plain"])
            if r["end"] is not None:
                end = r["end"]
                cur.kind, cur.rc, cur.bytes = "scrape", int(end["2"]), int(end["3"])
                cur.truncated, cur.dur_ms, cur.error = end["4"] == "1", float(end["5"]), end["6"]
                out.append(cur)
            elif r["g"] == last_g and not block.last:  # open at the block's end: carried
                if cur.text is None:
                    self.open = cur
                else:
                    self.carry = df.filter(g == last_g).select("line_no", "line")
            else:
                out.append(self._finish(cur, last_g))
        return out

    def _finish(self, cur: _Scrape, last_g: int) -> _Scrape:
        if cur.kind == "pre":  # the text before the first marker is a page only without markers
            cur.kind = "stray" if last_g > 0 else "bare"
        return cur


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def label_string(labels: dict[str, str], drop: str | None = None) -> str:
    """``{b: 'x"y', a: '1'}`` -> ``a="1",b="x\\"y"``: sorted by name, values escaped as
    in the exposition format (``\\\\``, ``\\"``, ``\\n``); ``drop`` leaves one name out."""
    return ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()) if k != drop)


def _bound(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _families(parser, text: str) -> tuple[list | None, str | None]:
    try:
        return list(parser(text)), None
    except Exception as e:  # the parsers raise ValueError, KeyError, IndexError...
        return None, f"{type(e).__name__}: {str(e)[:200]}" if str(e) else type(e).__name__


def _page(sc: _Scrape) -> tuple[str, list[tuple] | None, str | None]:
    """(format, sample rows or None, the parser's error) of one page (module docstring)."""
    text = (sc.text or "") + "\n"
    fmt, families, error = "prometheus", None, None
    if sc.eof:
        fmt, (families, error) = "openmetrics", _families(openmetrics_families, text)
    if families is None:
        families, err2 = _families(text_families, text)
        error = error or err2
        fmt = "prometheus" if families is not None else fmt
    if families is None:
        return fmt, None, error
    plain = sc.plain_counters if fmt == "prometheus" else frozenset()
    rows = []
    for fam in families:
        kind = fam.type
        for s in fam.samples:
            name, drop, le, q = s.name, None, None, None
            if kind == "counter" and fam.name in plain and name == fam.name + "_total":
                name = fam.name  # the text parser's OpenMetrics renaming, undone
            if kind in _BUCKETED and name.endswith("_bucket"):
                le, drop = _bound(s.labels.get("le")), "le"
            elif kind == "summary" and "quantile" in s.labels:
                q, drop = _bound(s.labels.get("quantile")), "quantile"
            ex = getattr(s, "exemplar", None)
            rows.append(
                (fam.name, name, kind, label_string(s.labels, drop), le, q, float(s.value))
                + ((label_string(ex.labels), float(ex.value)) if ex else (None, None))
            )
    return fmt, rows, error


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse an app-metrics file scrape by scrape (see the module docstring)."""
    cov, notes, scrapes = Coverage(), [], _Scrapes()
    out, deltas = _blocks.Rows(ctx, TABLES), _app_derive.Deltas()
    info: list[dict] = []  # app_scrape rows not yet handed over
    batch: list[pl.DataFrame] = []

    def flush() -> None:
        if info:
            ts = pl.col("ts").cast(pl.Int64).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
            out.put({"app_scrape": pl.DataFrame(info, infer_schema_length=None).with_columns(ts)})
            info.clear()
        if batch:
            frame = pl.concat(batch)
            d = deltas(frame)
            q = _app_derive.quantiles(d, frame)
            out.put({"app_metric_sample": frame, "app_metric_rate": _app_derive.rates(d)})
            out.put({"app_metric_quantile": q} if q.height else {})
            batch.clear()

    for block in _blocks.Blocks(path, cut=_cut):
        for sc in scrapes.of(block):
            cov.total += sc.n_lines
            frame = _scrape(sc, cov, notes, info)
            if frame is not None and frame.height:
                batch.append(frame)
            if sum(f.height for f in batch) >= BATCH_SAMPLES:
                flush()
    flush()
    if not scrapes.seen_marker and cov.parsed == 0 and cov.n_skipped:
        raise ParseError(f"{path.name}: neither scrape blocks nor an exposition page")
    out.put({name: pl.DataFrame() for name in TABLES})  # every table exists, even empty
    cov.notes[:] = list(dict.fromkeys(notes))
    return ParseResult(tables=out.tables(), coverage=cov)


def _scrape(sc: _Scrape, cov: Coverage, notes: list[str], info: list[dict]) -> pl.DataFrame | None:
    """Account for one scrape's lines and note its app_scrape row; its samples as a frame."""

    def row(status: str, reason: str | None, fmt: str | None = None, n: int = 0) -> None:
        values = (sc.start_us, sc.endpoint, sc.dur_ms, sc.rc, sc.bytes, sc.truncated, fmt, n)
        info.append(dict(zip(_SCRAPE_COLUMNS, (*values, status, reason), strict=True)))

    if sc.kind == "stray":
        cov.add_skipped("line outside a scrape block", sc.n_lines)
        return None
    markers = {"bare": 0, "cut": 1}.get(sc.kind, 2)
    cov.add_structure("scrape marker", markers)
    body = sc.n_lines - markers
    if sc.kind == "cut":
        cov.add_skipped("scrape cut short (no end marker)", body)
        return row("cut", "no end marker: the capture stopped while writing it")
    if sc.text is None:
        cov.add_skipped(f"page larger than {MAX_PAGE_BYTES >> 20} MiB", body)
        return row("unparsable", "page too large to parse")
    if sc.rc not in (None, 0):
        cov.add_skipped("output of a failed scrape", body)
        return row("failed", sc.error or f"exit code {sc.rc}")
    fmt, rows, error = _page(sc)
    cov.add_structure("comment (# HELP, # TYPE, # EOF...)", sc.comments)
    cov.add_structure("blank", sc.blank)
    if rows is None:
        cov.add_skipped("page not accepted by prometheus_client's parsers", sc.sample_lines)
        notes.append(f"a scrape was not parseable: {error}")
        return row("unparsable", error, fmt)
    parsed = min(len(rows), sc.sample_lines)
    cov.parsed += parsed
    cov.add_skipped("sample line the parser returned no sample for", sc.sample_lines - parsed)
    if sc.kind == "bare":
        notes.append("a page saved without the capture: no time, ts NULL, no rates")
    if sc.truncated:
        notes.append(
            "pages cut at the size cap (HINDSIGHT_APP_MAX_KB): their last families are missing"
        )
    row("truncated" if sc.truncated else "ok", None, fmt, len(rows))
    frame = pl.DataFrame(rows, schema=_SAMPLE_SCHEMA, orient="row")
    return frame.with_columns(
        ts=pl.lit(sc.start_us, pl.Int64).cast(pl.Datetime("us")).dt.replace_time_zone("UTC"),
        endpoint=pl.lit(sc.endpoint, pl.String),
    )
