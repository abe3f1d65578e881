"""jc (kellyjonbrazil/jc), the line-oriented reference, in its own virtual environment.

jc is never a dependency of the project: the benchmark creates ``<cache>/jcvenv`` with
``pip install jc`` on first use (that needs PyPI; without it the jc columns say why they
are empty). jc reads the whole input and builds Python dicts, so on files of hundreds of
MB it needs tens of GB: it is run on the first ``JC_MAX_BYTES`` of a file (whole lines),
and our parser is timed on the very same slice for the ratio.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: our parser name -> jc option, for the formats jc has a parser for
JC_FORMATS = {
    "mpstat": "--mpstat",
    "iostat": "--iostat",
    "vmstat": "--vmstat",
    "pidstat": "--pidstat",
}
JC_MAX_BYTES = 16 << 20


def ensure(cache: Path) -> tuple[Path | None, str]:
    """Path of the jc executable (installing it on first use), or None and why not."""
    venv = cache / "jcvenv"
    exe = venv / "bin" / "jc"
    if exe.exists():
        return exe, ""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "jc"],
            check=True,
            capture_output=True,
            timeout=600,
        )
    except (subprocess.SubprocessError, OSError) as e:
        return None, f"jc could not be installed ({type(e).__name__})"
    return (exe, "") if exe.exists() else (None, "jc not found after install")


def slice_of(path: Path, dest: Path, limit: int = JC_MAX_BYTES) -> Path:
    """The first ``limit`` bytes of ``path`` cut at a newline (the file itself if smaller)."""
    if path.stat().st_size <= limit:
        return path
    out = dest / f"{path.stem}.head{limit >> 20}M{path.suffix}"
    if not out.exists():
        with open(path, "rb") as f:
            data = f.read(limit)
        out.write_bytes(data[: data.rfind(b"\n") + 1])
    return out
