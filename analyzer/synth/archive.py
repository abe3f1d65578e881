"""Pack a bundle directory into ``<name>.tgz`` as the capture does (``tar -czf``): one
top-level directory, directory entries, regular files owned by root, mode 0644/0755.

Compression streams file by file: small bundles (samples, tests) with zlib at level 6,
big ones (benchmarks) through ISA-L's gzip at level 1, several times faster than zlib
and already a dependency for reading bundles. The tarball is written as ``<out>.part``
and renamed when complete, so a reader never sees half a bundle.
"""

from __future__ import annotations

import gzip
import os
import tarfile
from pathlib import Path

try:
    from isal import igzip as _fast
except ImportError:  # pragma: no cover - exercised only without isal
    _fast = gzip  # type: ignore[assignment]

SMALL_BYTES = 64 << 20  # below this, zlib -6 (small samples); above, ISA-L level 1 (speed)


def _info(path: Path, arcname: str, mtime: int) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(arcname)
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    ti.mtime = mtime
    if path.is_dir():
        ti.type, ti.mode = tarfile.DIRTYPE, 0o755
    else:
        ti.size, ti.mode = path.stat().st_size, 0o644
    return ti


def pack(src: Path, out: Path, mtime: int) -> Path:
    """Write ``src`` (a bundle directory) to ``out`` (.tgz); returns ``out``."""
    from analyzer.cleanup import register_cleanup, unregister_cleanup

    part = register_cleanup(out.with_name(out.name + ".part"))  # also gone after a signal
    total = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    mod, level = (gzip, 6) if total < SMALL_BYTES else (_fast, 1)
    try:
        with open(part, "wb") as raw:
            gz = mod.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=level, mtime=mtime)
            with gz, tarfile.open(fileobj=gz, mode="w|", format=tarfile.GNU_FORMAT) as tar:
                top = src.name
                tar.addfile(_info(src, top + "/", mtime))
                for dirpath, dirnames, filenames in os.walk(src):
                    dirnames.sort()
                    base = Path(dirpath)
                    rel = base.relative_to(src).as_posix()
                    for d in dirnames:
                        tar.addfile(_info(base / d, f"{top}/{rel}/{d}/".replace("/./", "/"), mtime))
                    for f in sorted(filenames):
                        p = base / f
                        with open(p, "rb") as fh:
                            tar.addfile(_info(p, f"{top}/{rel}/{f}".replace("/./", "/"), mtime), fh)
        os.replace(part, out)
    finally:
        if part.exists():
            part.unlink()
        unregister_cleanup(part)
    return out
