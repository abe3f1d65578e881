"""Tests of analyzer/parsers/app_log.py against tests/fixtures/app_log.

The fixture is a real capture of a log written by a training-like loop (PROVENANCE.md);
its golden values are read from the file (the arrival step time of step 3 is the
difference of the first two stamps). The framework lines below show the forms each
framework prints (written for this test in those frameworks' formats), one per line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from golden import check, fixture_of

from analyzer.errors import ParseError
from analyzer.parsers import app_log
from analyzer.parsers.base import ParseContext, ParseResult
from analyzer.sniff import MIN_CONFIDENCE

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "app_log"
GOLDEN = sorted(FIX.glob("*.expected.json"))


def _parse(path: Path) -> ParseResult:
    res = app_log.parse(path, ParseContext(file_name=path.name))
    res.coverage.check()
    return res


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.name)
def test_fixture_matches_its_expected_rows_coverage_and_values(golden: Path) -> None:
    path = fixture_of(golden)
    assert app_log.sniff(path.read_text()[:65536], path.name) >= MIN_CONFIDENCE
    check(_parse(path), golden)


# (line, step, steps_total, loss, printed_step_time_ms, it_per_s, samples_per_s, tokens_per_s)
FORMS = [
    (  # Megatron-LM training_log
        " iteration      120/    1000 | consumed samples:        15360 | elapsed time per iteration (ms): 812.3"
        " | learning rate: 1.500E-04 | global batch size:   128 | lm loss: 2.310000E+00 | loss scale: 65536.0 |",
        120,
        1000,
        2.31,
        812.3,
        None,
        None,
        None,
    ),
    (
        "{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 4.9e-05, 'epoch': 0.01}",  # HF Trainer
        None,
        None,
        2.31,
        None,
        None,
        None,
        None,
    ),
    (
        " 3%|▎         | 30/1000 [00:12<06:30,  2.48it/s]",  # tqdm (HF Trainer, Lightning)
        30,
        1000,
        None,
        1000 / 2.48,
        2.48,
        None,
        None,
    ),
    (
        "Epoch 0:  12%|█▏ | 120/1000 [00:10<01:15, 1.25s/it, loss=2.31, v_num=0]",  # Lightning
        120,
        1000,
        2.31,
        1250.0,
        0.8,
        None,
        None,
    ),
    (
        "[Rank 0] step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",  # DeepSpeed
        10,
        None,
        None,
        None,
        None,
        None,
        None,
    ),
    (
        "[Rank 0] epoch=0/micro_step=20/global_step=10, RunningAvgSamplesPerSec=28.56, CurrSamplesPerSec=28.73",
        10,
        None,
        None,
        None,
        None,
        28.73,
        None,
    ),  # DeepSpeed throughput timer
    (
        "iter 120: loss 2.3100, time 812.30ms, mfu 40.00%",  # nanoGPT
        120,
        None,
        2.31,
        812.3,
        None,
        None,
        None,
    ),
    (
        "Epoch: [0][ 120/5005]\tTime  0.812 ( 0.845)\tData  0.002 ( 0.003)\tLoss 6.9071e+00 (6.9105e+00)",
        120,
        5005,
        6.9071,
        812.0,
        None,
        None,
        None,
    ),  # PyTorch examples/imagenet
    (
        "step:  10  loss:  9.1234  memory: 30.1GiB(38.2%)  tps: 1,234  mfu: 40%",  # torchtitan
        10,
        None,
        9.1234,
        None,
        None,
        None,
        1234.0,
    ),
    (
        "{'train_runtime': 100.0, 'train_samples_per_second': 12.3, 'train_steps_per_second': 0.8}",
        None,
        None,
        None,
        None,
        None,
        12.3,
        None,
    ),  # HF Trainer summary
    (
        "val_loss=3.1 step 130 step_time=0.5s 5400 tokens/s",
        130,
        None,
        None,
        500.0,
        None,
        None,
        5400.0,
    ),
]


def _lines(tmp: Path, texts: list[str], t0: float = 1796176293.0, dt: float = 0.5) -> Path:
    p = tmp / "app_log_1.out"
    body = [f"{t0 + i * dt:.6f} /var/log/train\\040job.log {t}" for i, t in enumerate(texts)]
    p.write_text("# hindsight-app-log begin pattern=.\n" + "\n".join(body) + "\n")
    return p


@pytest.mark.parametrize("form", FORMS, ids=[f[0][:30] for f in FORMS])
def test_common_framework_lines_give_their_numbers(tmp_path: Path, form: tuple) -> None:
    row = _parse(_lines(tmp_path, [form[0]])).tables["app_log_line"].row(0, named=True)
    cols = (
        "step",
        "steps_total",
        "loss",
        "printed_step_time_ms",
        "it_per_s",
        "samples_per_s",
        "tokens_per_s",
    )
    got = tuple(row[c] for c in cols)
    for c, g, w in zip(cols, got, form[1:], strict=True):
        assert g == pytest.approx(w) if w is not None else g is None, (c, g, w)
    assert row["file"] == "/var/log/train job.log" and row["line"] == form[0]


def test_step_time_from_arrival_divides_by_the_steps_between_lines(tmp_path: Path) -> None:
    p = _lines(
        tmp_path, ["step 10 loss=1", "step 12 loss=1", "step 12 loss=1", "no number"], dt=0.5
    )
    rows = _parse(p).tables["app_log_line"].get_column("arrival_step_time_ms").to_list()
    assert rows == [None, pytest.approx(250.0), None, None]  # 500 ms for 2 steps; a repeat; no step


def test_without_step_numbers_each_line_is_one_step(tmp_path: Path) -> None:
    p = _lines(tmp_path, ["batch done", "batch done", "batch done"], dt=0.8)
    rows = _parse(p).tables["app_log_line"].get_column("step_time_ms").to_list()
    assert rows == [None, pytest.approx(800.0), pytest.approx(800.0)]


def test_capture_remarks_are_structure_and_dropped_lines_noted(tmp_path: Path) -> None:
    p = _lines(tmp_path, ["step 1"])
    p.write_text(
        p.read_text() + "# hindsight-app-log dropped 7 matching lines (more than 50 in second 1)\n"
    )
    res = _parse(p)
    assert res.coverage.structure == {"capture remark (# hindsight-app-log ...)": 2}
    assert any("7 matching lines were dropped" in n for n in res.coverage.notes)


def test_a_file_without_stamped_lines_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "x.log"
    p.write_text("plain log line\nanother\n")
    assert app_log.sniff(p.read_text(), p.name) == 0.0
    with pytest.raises(ParseError):
        _parse(p)
