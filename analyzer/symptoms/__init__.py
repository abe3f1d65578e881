"""Symptom first: the application's own latency, step time and throughput, the windows
where they depart from their baseline, and which host signal or finding explains each
window (issue #18; the method is docs/symptoms.md).

One module per job, run in this order by `analyzer.symptoms.stage.analyse` (called by
`analyzer.analysis.analyse` after the detectors):

- `app_series`: ``analyze --app-series FILE`` — a CSV / JSONL series the user already
  has, read with polars into table ``app_series`` (its file's row in ``collectors``).
- `series`: the symptom series on the signals' 1-second grid, from ``app_metric_quantile``,
  ``app_metric_rate``, ``app_log_line`` and ``app_series`` (tables ``symptoms``,
  ``symptom_series``).
- `windows`: where each symptom departs from its own baseline (``symptom_windows``).
- `mechanisms`: the known cause → symptom mechanisms, signal directions and floors.
- `cooccur`: when each signal and finding was active, its best lag and cooccurrence with
  each window, its stretches over the capture.
- `explain`: every signal and finding judged and ranked for every window
  (``symptom_explanations``); `words` writes its sentences.

Schemas (column, type, unit, meaning) are declared once in `schema`. This package
imports nothing from here, so the store can import `schema` alone.
"""
