"""The tables of the symptom stage, declared once (docs/tables.md is generated from them).

Written by `analyzer.symptoms.stage` (``app_series`` by `analyzer.symptoms.app_series`
through the pipeline). All times are UTC; every window is ``[start_ts, end_ts)`` on the
signals' 1-second grid. A value column's unit is in its row's ``unit`` where rows of
different symptoms or signals share the column.
"""

from __future__ import annotations

import polars as pl

from analyzer.parsers.base import TS, Table, table

F, S, I32, B = pl.Float64, pl.String, pl.Int32, pl.Boolean

APP_SERIES = table(
    "One row per value of a record of an `analyze --app-series` file (long format); docs/symptoms.md.",
    ("ts", TS, "UTC", "the record's time"),
    ("file", S, "", "the file as given to --app-series"),
    ("series", S, "", "value column (or the record's name column, k6-style long files)"),
    ("value", F, "", "the value as written (unit from the series name: docs/symptoms.md)"),
    ("record_no", pl.Int64, "", "record number in the file (1 = first data record)"),
)

SYMPTOMS = table(
    "One row per symptom series: what it measures, where it came from, its baseline and thresholds; docs/symptoms.md.",
    ("symptom_id", I32, "", "id (symptom_series, symptom_windows, symptom_explanations)"),
    ("name", S, "", "what it is, in words: 'p99 of vllm:e2e_request_latency_seconds{…}'"),
    ("kind", S, "", "latency | step_time | throughput | value (decides the mechanisms)"),
    ("stat", S, "", "p99 | p50 | mean | rate | value"),
    ("unit", S, "", "unit of its values: ms for times, 1/s for rates, else the file's"),
    ("worse", S, "", "up (latency, step time) or down (throughput): the bad direction"),
    ("is_primary", B, "", "windows and explanations are computed for it (p50 is context)"),
    ("source_table", S, "", "app_metric_quantile | app_metric_rate | app_log_line | app_series"),
    ("source", S, "", "endpoint scraped, log file followed or --app-series file"),
    ("family", S, "", "metric family, or series / column name"),
    ("labels", S, "", "labels of the series (app_metric_sample form); NULL when none"),
    ("step_s", F, "s", "median spacing of its samples (a sample fills that many seconds)"),
    ("seconds", pl.Int64, "s", "grid seconds with a value"),
    ("baseline", F, "", "median outside its windows (second pass), in `unit`"),
    ("sigma", F, "", "1.4826 × median absolute deviation outside its windows, in `unit`"),
    ("enter", F, "", "a window opens at a second this bad or worse, in `unit`"),
    ("leave", F, "", "… and lasts while worse than this, in `unit`"),
    ("windows", I32, "count", "symptom windows found"),
    ("status", S, "", "analysed | not analysed"),
    ("reason", S, "", "why not analysed (too few values, not primary)"),
)

SYMPTOM_SERIES = table(
    "One row per symptom and grid second with a value (NULL seconds are absent); docs/symptoms.md.",
    ("ts", TS, "UTC", "the second [ts, ts+1 s), as in signals"),
    ("symptom_id", I32, "", "symptoms.symptom_id"),
    ("value", F, "", "in the symptom's unit; the mean of the samples covering this second"),
)

SYMPTOM_WINDOWS = table(
    "One row per symptom window: a stretch where the symptom departs from its own baseline, split where its intensity changes; docs/symptoms.md.",
    ("window_id", I32, "", "id, 1 = earliest (over all symptoms)"),
    ("symptom_id", I32, "", "symptoms.symptom_id"),
    ("start_ts", TS, "UTC", "first second"),
    ("end_ts", TS, "UTC", "end (exclusive)"),
    ("dur_s", F, "s", "end_ts − start_ts"),
    ("baseline", F, "", "the symptom's baseline (symptoms.baseline), in `unit`"),
    ("level", F, "", "median of the symptom over the window, in `unit`"),
    ("peak", F, "", "worst value in the window (max, or min when worse = down), in `unit`"),
    ("ratio", F, "", "level / baseline"),
    (
        "band",
        I32,
        "",
        "intensity band: floor(log2(badness)), badness = level/baseline (down: baseline/level)",
    ),
    ("seconds", pl.Int64, "s", "seconds of the window with a value"),
    ("unit", S, "", "the symptom's unit"),
)

SYMPTOM_EXPLANATIONS = table(
    "One row per symptom window and candidate (every signals column with data, every finding key): how well it explains the window, ranked; docs/symptoms.md.",
    ("window_id", I32, "", "symptom_windows.window_id"),
    ("symptom_id", I32, "", "symptoms.symptom_id"),
    (
        "rank",
        I32,
        "",
        "1 = best explanation of this window (causes, then concurrent, then weak; by score)",
    ),
    ("candidate", S, "", "signals column, or finding key"),
    ("candidate_type", S, "", "signal | finding"),
    ("finding_id", I32, "", "findings.finding_id overlapping the window most (findings only)"),
    ("entity", S, "", "who, where known: the most-throttled cgroup in the window"),
    (
        "role",
        S,
        "",
        "cause (shown, with its mechanism) | concurrent (overlaps, no cause) | weak (not shown)",
    ),
    ("score", F, "0-1", "cooccurrence × specificity × strength"),
    (
        "cooccurrence",
        F,
        "0-1",
        "share of the window's seconds where the candidate was active lag_s before",
    ),
    ("strength", F, "0-1", "excess / (1 + excess)"),
    (
        "excess",
        F,
        "",
        "change of the candidate in the window / its threshold distance (1 = at the threshold)",
    ),
    ("specificity", F, "0-1", "stretches_with_symptom / stretches"),
    ("stretches", I32, "count", "the candidate's active stretches over the capture"),
    (
        "stretches_with_symptom",
        I32,
        "count",
        "of those, overlapping a window of this symptom from their start to 5 s after their end",
    ),
    (
        "lag_s",
        I32,
        "s",
        "best lead of the candidate over the symptom, 0–5 s (highest cooccurrence; ties: smallest)",
    ),
    (
        "starts_first",
        B,
        "",
        "active from 5 s before the window's start to one symptom sample + 1 s after it",
    ),
    (
        "mechanism_group",
        S,
        "",
        "cpu_quota | cpu_contention | io | memory | gpu_throttle | irq | network | gpu_error; NULL = none known for the pair",
    ),
    ("mechanism", S, "", "the known mechanism, in words (NULL when none)"),
    ("baseline", F, "", "the candidate's median outside the symptom's windows, in `unit`"),
    ("threshold", F, "", "active at or beyond this, in `unit`"),
    ("level", F, "", "the candidate's median over the window, lag_s earlier, in `unit`"),
    ("unit", S, "", "the candidate's unit (signals column unit; findings: none)"),
    ("sentence", S, "", "the explanation in words with its numbers (causes and concurrent rows)"),
    ("why_not", S, "", "why the candidate is not a cause (NULL for causes)"),
)

#: name -> declaration, merged into the store's own tables (`analyzer.store.STORE_TABLES`)
TABLES: dict[str, Table] = {
    "app_series": APP_SERIES,
    "symptoms": SYMPTOMS,
    "symptom_series": SYMPTOM_SERIES,
    "symptom_windows": SYMPTOM_WINDOWS,
    "symptom_explanations": SYMPTOM_EXPLANATIONS,
}
