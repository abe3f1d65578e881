"""``nvidia-smi -q`` (text) and ``nvidia-smi -q -x`` (XML) snapshots -> ``gpu_info``.

Supported: XML with DOCTYPE ``nvsmi_device_v11.dtd`` .. ``v13.dtd`` and without DOCTYPE
(drivers 418.x); text from driver 375 (``GPU 0000:01:00.0``, no ``CUDA Version``) to
current, ``-d`` subsets, and fragments cut from the middle of a text report (their row
has ``gpu`` NULL). Old and new element names are both read: ``power_readings`` /
``gpu_power_readings``, ``clocks_throttle_reasons`` / ``clocks_event_reasons``, ECC
``single_bit``/``double_bit`` totals / ``sram_*``/``dram_*`` counters.

XML: ``xml.etree`` after refusing any ``<!ENTITY`` declaration or internal DTD subset
(entity bombs), fed line by line without the DOCTYPE line, so that a syntax error or a
truncated ``<gpu>`` is attributed to lines (the GPUs complete before it are kept). Text:
``Key : value`` nested by 4-space indentation; each line's path (enclosing sections plus
its key) comes from forward fills, one column per nesting level. ``N/A`` and ``Requested
functionality has been deprecated`` read as NULL; numbers are taken from values with
units (``42 C``, ``18.00 W``, ``6064 MiB``, ``16x``).

Table ``gpu_info``: one row per GPU, columns listed in ``TABLES`` below.

Sample input (``nvidia-smi -q``)::

    ==============NVSMI LOG==============

    Timestamp                                 : Sat Oct 10 17:02:53 2020
    Driver Version                            : 450.66
    CUDA Version                              : 11.0

    Attached GPUs                             : 1
    GPU 00000000:01:00.0
        Product Name                          : GeForce GTX 780
        Persistence Mode                      : Disabled
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _read, base
from analyzer.parsers._nvbpf_time import local_to_utc, resolve_tz
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult

S, F, I64 = pl.String, pl.Float64, pl.Int64

TABLES: dict[str, base.Table] = {
    "gpu_info": base.table(
        "one row per GPU in an nvidia-smi -q snapshot",
        ("ts", TS, "", "snapshot time (the report's Timestamp, UTC)"),
        (
            "gpu",
            pl.Int32,
            "",
            "GPU position in the report (nvidia-smi index order); NULL for a fragment",
        ),
        ("pci_bus_id", S, "", "PCI bus id, e.g. 00000000:01:00.0"),
        ("uuid", S, "", "GPU UUID"),
        ("name", S, "", "product name"),
        ("driver_version", S, "", "driver version"),
        ("cuda_version", S, "", "CUDA version supported by the driver (NULL before ~2018)"),
        ("vbios", S, "", "VBIOS version"),
        ("persistence_mode", S, "", "Enabled / Disabled"),
        ("compute_mode", S, "", "Default / Exclusive_Process / Prohibited"),
        ("mig_mode", S, "", "current MIG mode (Enabled / Disabled / N/A -> NULL)"),
        ("performance_state", S, "", "P-state, e.g. P0"),
        (
            "power_limit_w",
            F,
            "W",
            "power limit set (old `Power Limit`, new `Requested Power Limit`)",
        ),
        (
            "enforced_power_limit_w",
            F,
            "W",
            "power limit enforced (old `Enforced`, new `Current Power Limit`)",
        ),
        ("max_power_limit_w", F, "W", "maximum settable power limit"),
        (
            "power_draw_w",
            F,
            "W",
            "power draw at snapshot (`Power Draw`, else average, else instant)",
        ),
        ("temp_c", F, "C", "GPU temperature"),
        ("temp_slowdown_c", F, "C", "temperature at which the GPU slows down"),
        ("temp_shutdown_c", F, "C", "temperature at which the GPU shuts down"),
        ("mem_total_mib", I64, "MiB", "frame-buffer memory total"),
        ("mem_used_mib", I64, "MiB", "frame-buffer memory used"),
        ("sm_clock_mhz", I64, "MHz", "current SM clock"),
        ("mem_clock_mhz", I64, "MHz", "current memory clock"),
        ("max_sm_clock_mhz", I64, "MHz", "maximum SM clock"),
        ("max_mem_clock_mhz", I64, "MHz", "maximum memory clock"),
        ("ecc_mode", S, "", "current ECC mode (Enabled / Disabled)"),
        (
            "ecc_volatile_uncorrected",
            I64,
            "errors",
            "uncorrectable ECC errors since driver load (sum of sources)",
        ),
        (
            "ecc_aggregate_uncorrected",
            I64,
            "errors",
            "uncorrectable ECC errors, lifetime (sum of sources)",
        ),
        ("retired_pages", I64, "pages", "retired pages (single-bit + double-bit)"),
        ("retired_pages_pending", pl.Boolean, "", "a page retirement is pending (needs reset)"),
        ("remapped_rows_pending", pl.Boolean, "", "a row remapping is pending (needs reset)"),
        ("remapped_rows_failure", pl.Boolean, "", "row remapping failed"),
        (
            "throttle_reasons_active",
            S,
            "",
            "comma-joined active clocks throttle/event reasons ('' when none)",
        ),
        ("pcie_gen", pl.Int32, "", "current PCIe link generation"),
        ("pcie_gen_max", pl.Int32, "", "maximum PCIe link generation"),
        ("pcie_width", pl.Int32, "lanes", "current PCIe link width"),
        ("pcie_width_max", pl.Int32, "lanes", "maximum PCIe link width"),
    )
}


def _power(*keys: str) -> tuple[str, ...]:
    """Paths of the power readings ``keys`` (text names; XML tags are their snake_case) in
    the old and the new section, XML first."""
    sections = ("power_readings", "gpu_power_readings")
    xml = [f"{s}/{k.lower().replace(' ', '_')}" for k in keys for s in sections]
    return (*xml, *(f"{s}/{k}" for k in keys for s in ("Power Readings", "GPU Power Readings")))


_LINK_X, _LINK_T = "pci/pci_gpu_link_info/", "PCI/GPU Link Info/"
# column -> candidate paths; XML tag paths and text key paths share one list (first hit wins)
_FIELDS: dict[str, tuple[str, ...]] = {
    "pci_bus_id": ("pci/pci_bus_id", "PCI/Bus Id", "@bus_id"),
    "uuid": ("uuid", "GPU UUID"),
    "name": ("product_name", "Product Name"),
    "vbios": ("vbios_version", "VBIOS Version"),
    "persistence_mode": ("persistence_mode", "Persistence Mode"),
    "compute_mode": ("compute_mode", "Compute Mode"),
    "mig_mode": ("mig_mode/current_mig", "MIG Mode/Current"),
    "performance_state": ("performance_state", "Performance State"),
    "power_limit_w": _power("Power Limit", "Requested Power Limit", "Current Power Limit"),
    "enforced_power_limit_w": (
        "power_readings/enforced_power_limit",
        "gpu_power_readings/current_power_limit",
        "Power Readings/Enforced Power Limit",
        "GPU Power Readings/Current Power Limit",
        "GPU Power Readings/Enforced Power Limit",
        "Enforced Power Limit",
    ),
    "max_power_limit_w": _power("Max Power Limit"),
    "power_draw_w": _power("Power Draw", "Average Power Draw", "Instant Power Draw"),
    "temp_c": ("temperature/gpu_temp", "Temperature/GPU Current Temp"),
    "temp_slowdown_c": ("temperature/gpu_temp_slow_threshold", "Temperature/GPU Slowdown Temp"),
    "temp_shutdown_c": ("temperature/gpu_temp_max_threshold", "Temperature/GPU Shutdown Temp"),
    "mem_total_mib": ("fb_memory_usage/total", "FB Memory Usage/Total"),
    "mem_used_mib": ("fb_memory_usage/used", "FB Memory Usage/Used"),
    "sm_clock_mhz": ("clocks/sm_clock", "Clocks/SM"),
    "mem_clock_mhz": ("clocks/mem_clock", "Clocks/Memory"),
    "max_sm_clock_mhz": ("max_clocks/sm_clock", "Max Clocks/SM"),
    "max_mem_clock_mhz": ("max_clocks/mem_clock", "Max Clocks/Memory"),
    "ecc_mode": ("ecc_mode/current_ecc", "ECC Mode/Current"),
    "retired_pages_pending": (
        "retired_pages/pending_retirement",
        "Retired Pages/Pending Page Retirement",
        "Retired Pages/Pending",
    ),
    "remapped_rows_pending": ("remapped_rows/remapped_row_pending", "Remapped Rows/Pending"),
    "remapped_rows_failure": (
        "remapped_rows/remapped_row_failure",
        "Remapped Rows/Remapping Failure Occurred",
    ),
    "pcie_gen": (_LINK_X + "pcie_gen/current_link_gen", _LINK_T + "PCIe Generation/Current"),
    "pcie_gen_max": (_LINK_X + "pcie_gen/max_link_gen", _LINK_T + "PCIe Generation/Max"),
    "pcie_width": (_LINK_X + "link_widths/current_link_width", _LINK_T + "Link Width/Current"),
    "pcie_width_max": (_LINK_X + "link_widths/max_link_width", _LINK_T + "Link Width/Max"),
}
_NULLS = {"", "N/A", "Unknown Error", "Not Supported"}
_NULLS.add("Requested functionality has been deprecated")
_REASONS = ("clocks_throttle_reasons/", "clocks_event_reasons/")
_REASONS += ("Clocks Throttle Reasons/", "Clocks Event Reasons/")
_REASON_NAMES = {"Idle": "gpu_idle", "Display Clock Setting": "display_clocks_setting"}
_SNIFF_KEYS = ("Product Name", "FB Memory Usage", "Clocks Event Reasons", "Clocks Throttle Reasons")
_SNIFF_KEYS += ("Performance State", "Max Clocks", "Applications Clocks", "Enforced Power Limit")


def sniff(head: str, name: str) -> float:
    """XML root ``<nvidia_smi_log>`` or the text banner; text fragments by their keys."""
    if "<nvidia_smi_log" in head or re.search(r"=+\s*NVSMI LOG\s*=+", head):
        return 0.99
    keys = (*_SNIFF_KEYS, "GPU UUID")
    hits = sum(bool(re.search(rf"^\s+{re.escape(k)}\s*(:|$)", head, re.M)) for k in keys)
    return 0.8 if hits >= 2 else 0.0


def _sum(values: list[str | None]) -> str | None:
    nums = [int(v) for v in values if v is not None and re.fullmatch(r"\d+", v.strip())]
    return str(sum(nums)) if nums else None


def _derived(d: dict[str, str]) -> dict[str, str | None]:
    """Fields computed from several paths: ECC sums, retired pages, active throttle reasons."""
    out: dict[str, str | None] = {}
    for scope in ("Volatile", "Aggregate"):
        prefixes = (f"ecc_errors/{scope.lower()}/", f"ECC Errors/{scope}/")
        ecc = [(p, v) for p, v in d.items() if p.startswith(prefixes)]
        unc = [v for p, v in ecc if "uncorrectable" in p.lower()]
        old = [v for p, v in ecc if p.endswith(("double_bit/total", "Double Bit/Total"))]
        out[f"ecc_{scope.lower()}_uncorrected"] = _sum(unc or old)
    text_retired = ("Retired Pages/Single Bit ECC", "Retired Pages/Double Bit ECC")
    out["retired_pages"] = _sum(
        [v for p, v in d.items() if p.endswith("_retirement/retired_count") or p in text_retired]
    )
    reasons = [(p, v) for p, v in d.items() if p.startswith(_REASONS) and "counters" not in p]
    names = []
    for p, v in reasons:
        if v.strip() == "Active":
            leaf = re.sub(r"^clocks_(throttle|event)_reason_", "", p.split("/")[-1])
            names.append(_REASON_NAMES.get(leaf, re.sub(r"\W+", "_", leaf).lower()))
    out["throttle_reasons_active"] = ",".join(names) if reasons else None
    return out


def _rows(gpus: list[dict[str, str]], top: dict[str, str]) -> pl.DataFrame:
    """Per-GPU path dicts -> one all-string frame (the untyped step)."""
    rows = []
    for d in gpus:
        row = {"gpu": d.get("@index"), "ts": top.get("timestamp") or None}
        row |= {k: top.get(k) or None for k in ("driver_version", "cuda_version")}
        for col, paths in _FIELDS.items():
            row[col] = next((d[p] for p in paths if d.get(p, "").strip() not in _NULLS), None)
        rows.append(row | _derived(d))
    schema = dict.fromkeys(TABLES["gpu_info"].schema, pl.String)
    return pl.DataFrame(rows, schema=schema, orient="row")


def _typed(raw: pl.DataFrame, ctx: ParseContext, cov: Coverage) -> pl.DataFrame:
    """All-string frame -> declared schema (numbers taken from values with units)."""
    tz, note = resolve_tz(ctx)

    def typed(name: str, dtype: pl.DataType) -> pl.Expr:
        col = pl.col(name)
        if name == "ts":
            naive = col.str.replace_all(r"\s+", " ").str.strptime(
                pl.Datetime("us"), "%a %b %d %H:%M:%S %Y", strict=False
            )
            return local_to_utc(naive, tz)
        if dtype == pl.Boolean:
            yes_no = {"yes": True, "no": False}
            text = col.str.strip_chars().str.to_lowercase()
            return text.replace_strict(yes_no, default=None, return_dtype=pl.Boolean)
        if dtype.is_numeric():
            num = col.str.extract(r"^\s*(-?\d+(?:\.\d+)?)", 1).cast(pl.Float64, strict=False)
            return num if dtype == pl.Float64 else num.round(0).cast(dtype, strict=False)
        return col.str.strip_chars()

    out = raw.select(typed(n, t).alias(n) for n, t in TABLES["gpu_info"].schema.items())
    if note and out.height and out.get_column("ts").is_not_null().any():
        cov.notes.append(note)
    return out


def _flatten(elem: ET.Element, prefix: str, out: dict[str, str]) -> None:
    for child in elem:
        path = f"{prefix}{child.tag}"
        if len(child):
            _flatten(child, path + "/", out)
        else:
            out.setdefault(path, (child.text or "").strip())


def _xml(path: Path, cov: Coverage) -> tuple[list[dict[str, str]], dict[str, str]]:
    """-> (one ``{tag/path: text}`` dict per complete ``<gpu>``, the root's leaf elements)."""
    lines = _read.read_lines(path).collect().get_column("line").to_list()
    cov.total = len(lines)
    if any("<!ENTITY" in ln or re.search(r"<!DOCTYPE[^>]*\[", ln) for ln in lines):
        cov.add_skipped("XML with entity declarations / internal DTD refused", len(lines))
        cov.notes.append("XML entity declarations are refused (entity-expansion guard)")
        return [], {}
    parser = ET.XMLPullParser(events=("start", "end"))
    depth, gpus, top, gpu_start, end = 0, [], {}, None, len(lines)
    fed = [False] * len(lines)  # lines given to the parser (the rest is structure)
    for i, ln in enumerate(lines):  # one line at a time: errors and cuts get a line
        if not ln.strip() or ln.strip().startswith(("<?xml", "<!DOCTYPE")):
            continue
        fed[i] = True
        try:
            parser.feed(ln + "\n")
            for event, elem in parser.read_events():
                depth += 1 if event == "start" else -1
                if event == "start" and depth == 2 and elem.tag == "gpu":
                    gpu_start = i
                elif event == "end" and depth == 1 and elem.tag == "gpu":
                    d: dict[str, str] = {}
                    _flatten(elem, "", d)
                    if elem.get("id"):
                        d["@bus_id"] = elem.get("id", "")
                    d["@index"] = str(len(gpus))
                    gpus.append(d)
                    gpu_start = None
                elif event == "end" and depth == 1 and not len(elem):
                    top[elem.tag] = (elem.text or "").strip()
        except ET.ParseError:
            end = i
            cov.add_skipped("XML syntax error (truncated or corrupt) and after", len(lines) - i)
            cov.notes.append(f"XML parsing stopped at line {i + 1}")
            break
    cut = sum(fed[gpu_start:end]) if gpu_start is not None else 0
    cov.add_skipped("incomplete <gpu> element (truncated)", cut)
    cov.parsed += sum(fed[:end]) - cut
    cov.add_structure("xml declaration / doctype / blank", end - sum(fed[:end]))
    return gpus, top


_GPU_RE = r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$"
_MAX_LEVEL = 8


def _text(path: Path, cov: Coverage) -> tuple[list[dict[str, str]], dict[str, str]]:
    """-> (one ``{path: value}`` dict per GPU section, the top-level ``{key: value}``).

    GPU dicts carry ``@bus_id`` (the ``GPU <bus id>`` line) and ``@index`` (its position);
    both are absent for a fragment whose GPU line was not captured."""
    df = _read.read_lines(path).collect()
    cov.total += df.height
    line = pl.col("line")
    kv = line.str.extract_groups(r"^(\s*)(\S(?:.*?\S)?)\s+: ?(.*)$")
    df = df.with_columns(
        level=(
            (line.str.len_chars() - line.str.strip_chars_start(" \t").str.len_chars()) // 4
        ).cast(pl.Int32),
        key=pl.coalesce(kv.struct.field("2"), line.str.strip_chars()),
        value=kv.struct.field("3").str.strip_chars(),
        kind=pl.when(line.str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(line.str.contains(r"^=+\s*NVSMI LOG\s*=+\s*$"))
        .then(pl.lit("banner"))
        .when(line.str.contains(_GPU_RE))
        .then(pl.lit("gpu"))
        .when(line.str.contains(r"^\S*[$#>] (sudo )?nvidia-smi\b"))
        .then(pl.lit("prompt"))
        .when(kv.struct.field("2").is_not_null())
        .then(pl.lit("kv"))
        .otherwise(pl.lit("section")),
    )
    kind, level = pl.col("kind"), pl.col("level")
    df = df.with_columns(  # s<k>: the section open at nesting level k
        pl.when((kind == "section") & (level == k))
        .then(pl.col("key"))
        .when((kind != "blank") & (level <= k))
        .then(pl.lit(""))
        .forward_fill()
        .alias(f"s{k}")
        for k in range(_MAX_LEVEL)
    ).with_columns(
        gpu_seq=(kind == "gpu").cast(pl.Int32).cum_sum(),
        bus_id=pl.when(kind == "gpu").then(line.str.strip_chars().str.slice(4)).forward_fill(),
    )
    parents = [  # path = enclosing sections (levels 1 .. level-1) + own key, '/'-joined
        pl.when((level > k) & (pl.col(f"s{k}") != "")).then(pl.col(f"s{k}"))
        for k in range(1, _MAX_LEVEL)
    ]
    df = df.with_columns(
        path=pl.concat_list([*parents, pl.col("key")]).list.drop_nulls().list.join("/")
    )
    counts = dict(df.group_by("kind").len().iter_rows())
    junk = df.filter((kind == "section") & (level == 0)).height
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_structure("banner", counts.get("banner", 0))
    cov.add_skipped("shell prompt, not nvidia-smi output", counts.get("prompt", 0))
    cov.add_skipped("unrecognized line", junk)
    cov.parsed += sum(counts.get(k, 0) for k in ("gpu", "kv", "section")) - junk
    kvs = df.filter(kind == "kv")
    top_kvs = kvs.filter((level == 0) & (pl.col("key") != "Attached GPUs"))
    # the XML tag names: Driver Version -> driver_version
    top = dict(
        top_kvs.select(
            pl.col("key").str.to_lowercase().str.replace_all(" ", "_"), "value"
        ).iter_rows()
    )
    gpus = []
    for (seq,), grp in kvs.filter(level > 0).group_by(["gpu_seq"], maintain_order=True):
        d = dict(
            grp.unique("path", keep="first", maintain_order=True)
            .select("path", "value")
            .iter_rows()
        )
        if seq and grp["bus_id"].is_not_null().any():
            d |= {"@bus_id": grp["bus_id"].drop_nulls()[-1], "@index": str(seq - 1)}
        gpus.append(d)
    return gpus, top


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse one ``nvidia-smi -q`` snapshot, text or XML (see the module docstring)."""
    cov = Coverage()
    head = _read.read_head(path, 4096).lstrip()
    is_xml = head.startswith(("<?xml", "<nvidia_smi_log", "<!DOCTYPE nvidia_smi_log"))
    if is_xml:
        gpus, top = _xml(path, cov)
    else:
        if head.startswith("<"):
            raise ParseError(f"{path.name}: XML that is not an nvidia_smi_log document")
        gpus, top = _text(path, cov)
        if any("@index" not in d for d in gpus):
            cov.notes.append("text fragment without its 'GPU <bus id>' line: gpu index is NULL")
    if _read.needs_utf8_repair(path):
        cov.notes.append("file was not valid UTF-8: invalid bytes replaced")
    frame = _typed(_rows(gpus, top), ctx, cov)
    version = top.get("driver_version")
    meta = {"tool_version": version} if version else {}
    return ParseResult(tables={"gpu_info": frame}, coverage=cov, meta=meta)
