"""The numbers a training or serving log line commonly prints, as polars expressions.

Private helper of `analyzer.parsers.app_log`. Each quantity has a few written forms,
tried in order (the first that matches wins); every form is one regex with the value in
its first group (and the total of ``N/M`` in the second). Recognised:

- step: ``step 120``, ``step=120``, ``Step: 120/1000``, ``global_step=120`` (DeepSpeed),
  ``iter 120`` (nanoGPT), ``iteration 120/ 1000`` (Megatron-LM), ``[ 120/5005]``
  (PyTorch examples), ``120/1000 [00:10<…`` (tqdm bars: HF Trainer, Lightning);
- loss: ``loss=2.31``, ``loss: 2.31``, ``'loss': 2.31`` (HF Trainer), ``lm loss:
  2.310000E+00`` (Megatron-LM), ``loss 2.31`` (nanoGPT, PyTorch); not ``val_loss``,
  ``eval_loss``, ``loss scale``;
- step time printed: ``elapsed time per iteration (ms): 812.3`` (Megatron-LM),
  ``time 812.30ms`` / ``step_time=0.81s`` / ``time/step: 0.8 s`` (ms or s), ``Time
  0.812 (`` (PyTorch examples, seconds), ``1.25s/it`` (tqdm);
- iterations per second: ``11.62it/s`` (tqdm), or 1 / ``s/it``;
- samples per second: ``CurrSamplesPerSec=28.7`` (DeepSpeed), ``samples_per_second: 12.3``
  / ``'train_samples_per_second': 12.3`` (HF), ``12.3 samples/s`` / ``samples/sec``;
- tokens per second: ``tokens_per_second: 5400``, ``5400 tokens/s``, ``tps: 1,234``
  (torchtitan; thousands separators removed).
"""

from __future__ import annotations

import polars as pl

_NUM = r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
_POS = r"([0-9]+(?:\.[0-9]+)?)"
_END = r"(?:[^0-9a-z.]|$)"  # after a step number: not a decimal, not a unit

STEP = (
    rf"(?i)(?:^|[^a-z0-9_])(?:global[_ ]?step|step|iteration|iter)\s*[:=#]?\s*\[?\s*([0-9]+)(?:\s*/\s*([0-9]+))?{_END}",
    r"\[\s*([0-9]+)\s*/\s*([0-9]+)\s*\]",
    r"(?:^|[|\s])([0-9]+)/([0-9]+)\s*\[[0-9]",
)
LOSS = (rf"(?i)(?:^|[^a-z0-9_])(?:lm[ _])?loss['\"]?\s*[:=]?\s*{_NUM}",)
TIME_MS = (r"(?i)elapsed time per iteration \(ms\):\s*" + _POS,)
TIME_UNIT = (
    rf"(?i)(?:step[_ ]?time|time[_ ]per[_ ]step|time/step|iter[_ ]?time|batch[_ ]?time|time)['\"]?\s*[:=]?\s*{_POS}\s*(ms|s)\b",
)
TIME_S = (r"(?i)\btime\s+" + _POS + r"\s+\(", _POS + r"\s*s/it\b")
IT_S = (_POS + r"\s*it/s\b",)
SAMPLES = (
    r"(?i)CurrSamplesPerSec\s*=\s*" + _POS,
    r"(?i)samples?[_ ]?per[_ ]?sec(?:ond)?['\"]?\s*[:=]\s*" + _POS,
    r"(?i)" + _POS + r"\s*samples?/s(?:ec)?\b",
)
TOKENS = (
    r"(?i)tokens?[_ ]?per[_ ]?sec(?:ond)?['\"]?\s*[:=]\s*([0-9][0-9.,]*)",
    r"(?i)([0-9][0-9.,]*)\s*tok(?:en)?s?/s(?:ec)?\b",
    r"(?i)(?:^|[^a-z0-9_])tps\s*[:=]\s*([0-9][0-9.,]*)",
)


def first(text: pl.Expr, forms: tuple[str, ...], group: int = 1) -> pl.Expr:
    """Group ``group`` of the first of ``forms`` that matches ``text`` (String): NULL
    when that form has no such group in the line, even if a later form has."""
    out = pl.lit(None, pl.String)
    for f in reversed(forms):
        out = pl.when(text.str.contains(f)).then(text.str.extract(f, group)).otherwise(out)
    return out


def _float(e: pl.Expr) -> pl.Expr:
    return e.str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False)


def numbers(text: pl.Expr) -> list[pl.Expr]:
    """The extracted columns: step, steps_total, loss, printed_step_time_ms, it_per_s,
    samples_per_s, tokens_per_s."""
    unit = first(text, TIME_UNIT, 2).str.to_lowercase()
    t_unit = _float(first(text, TIME_UNIT)) * pl.when(unit == "s").then(1000.0).otherwise(1.0)
    t_s = _float(first(text, TIME_S))
    it_s = _float(first(text, IT_S))
    printed = pl.coalesce(_float(first(text, TIME_MS)), t_unit, t_s * 1000.0, 1000.0 / it_s)
    s_it = _float(text.str.extract(TIME_S[1], 1))
    return [
        first(text, STEP).cast(pl.Int64, strict=False).alias("step"),
        first(text, STEP, 2).cast(pl.Int64, strict=False).alias("steps_total"),
        _float(first(text, LOSS)).alias("loss"),
        printed.alias("printed_step_time_ms"),
        pl.coalesce(it_s, 1.0 / s_it).alias("it_per_s"),
        _float(first(text, SAMPLES)).alias("samples_per_s"),
        _float(first(text, TOKENS)).alias("tokens_per_s"),
    ]
