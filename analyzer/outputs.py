"""How every command writes its files: whole or not at all, never over what it must not.

`Outputs` is one command's set of output files (reports, JSON, Markdown, the ``--db``
database, export directories), as a transaction:

- **claimed**: `Outputs.add` takes an exclusive lock beside each output
  (``.NAME.hindsight-lock``, `fcntl.flock`, the pid inside), so a second run writing the
  same path fails at once ("another hindsight run is writing PATH"); the kernel releases
  the lock when a process dies, so a stale lock file is simply taken over;
- **checked**: an output may not be one of the inputs (the bundle itself, or a file of a
  bundle directory), not even with ``--force``; an existing ``--db`` file is replaced
  only when it is a DuckDB database written by Hindsight (`is_hindsight_database`), or
  with ``--force``;
- **atomic**: each output is written to a temporary name in its own directory
  (``.NAME.PID-RAND.tmp``) and `Outputs.commit` renames them all into place once the
  whole command succeeded; a failed or interrupted run leaves every previous output as it
  was and no temporary file (they are registered with `analyzer.cleanup`). A directory
  output (`Outputs.add_dir`: ``export``, the ``fleet`` dataset) is filled beside the old
  one, then swapped in.

`write_text` and `replacing` are the one-file forms. Rules and messages: docs/limits.md
("Outputs").
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from analyzer.cleanup import register_cleanup as register_cleanup
from analyzer.cleanup import remove, unregister_cleanup
from analyzer.errors import HindsightError

LOCK_SUFFIX = ".hindsight-lock"
DUCKDB_MAGIC = b"DUCK"


class OutputError(HindsightError):
    """An output cannot be written (exit code 2): busy, protected, or not writable."""


def is_stdout(path: Path | str | None) -> bool:
    """``-``: the output goes to stdout, not to a file."""
    return path is not None and str(path) == "-"


def is_hindsight_database(path: Path) -> bool:
    """True when ``path`` is a DuckDB database (``DUCK`` at byte 8) holding a ``bundle``
    table with an ``analyzer_version`` column. Looked at read-only on a sealed
    connection: a stranger's database cannot make us read any other file."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    if len(head) < 12 or head[8:12] != DUCKDB_MAGIC:
        return False
    import duckdb

    from analyzer.sql import connect_sealed

    try:
        con = connect_sealed(path)
    except duckdb.Error:
        return False
    try:
        rows = con.sql(  # a table: a view could read files once something selects from it
            "SELECT count(*) FROM duckdb_tables() t JOIN duckdb_columns() c "
            "USING (database_name, schema_name, table_name) WHERE t.database_name = "
            "current_database() AND t.schema_name = 'main' AND t.table_name = 'bundle' "
            "AND c.column_name = 'analyzer_version'"
        ).fetchall()
        return bool(rows[0][0])
    except duckdb.Error:
        return False
    finally:
        con.close()


class _Claim:
    """An exclusive lock on one output path, held until `release`."""

    def __init__(self, target: Path) -> None:
        self.path = target.with_name(f".{target.name}{LOCK_SUFFIX}")
        self.fd: int | None = None
        for _attempt in range(10):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise OutputError(
                    f"another hindsight run{_holder(self.path)} is writing {target}"
                ) from None
            try:  # the file we locked must still be the one at the path (see release)
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except OSError:
                same = False
            if same:
                self.fd = fd
                break
            os.close(fd)
        if self.fd is None:
            raise OutputError(f"cannot lock {target}: its lock file keeps changing")
        register_cleanup(self.path)
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        if self.fd is None:
            return
        self.path.unlink(missing_ok=True)  # unlinked while locked: a waiter retries
        unregister_cleanup(self.path)
        os.close(self.fd)
        self.fd = None


def _holder(lock: Path) -> str:
    try:
        pid = lock.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""


class Outputs:
    """One command's outputs, claimed, checked, then committed together (module doc).

    ``inputs``: the files the command reads (an output may be none of them); ``force``:
    replace an existing ``--db`` file even when Hindsight did not write it.
    """

    def __init__(self, inputs: Iterable[Path | None] = (), *, force: bool = False) -> None:
        self.inputs = [Path(p) for p in inputs if p is not None and not is_stdout(p)]
        self.force = force
        self._claims: list[_Claim] = []
        self._pending: list[tuple[Path, Path]] = []  # (temporary, target)
        self._wals: list[Path] = []  # databases: their WAL must be gone before the rename

    def add(
        self, target: Path | None, what: str = "output", *, database: bool = False
    ) -> Path | None:
        """Claim ``target`` and return the temporary path to write it at (None for None
        or ``-``). ``database``: the ``--db`` rules (ownership, WAL)."""
        if target is None or is_stdout(target):
            return None
        target = Path(target)
        self._check(target, what, database)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            claim = _Claim(target)
        except OSError as e:
            raise OutputError(f"cannot write the {what} to {target}: {e.strerror}") from None
        self._claims.append(claim)
        if database and target.exists() and not self.force and not is_hindsight_database(target):
            raise OutputError(
                f"{target} exists and is not a database written by Hindsight: not replacing "
                "it (choose another --db path, or add --force)"
            )
        tmp = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        register_cleanup(tmp)
        if database:
            self._wals.append(register_cleanup(Path(f"{tmp}.wal")))
        self._pending.append((tmp, target))
        return tmp

    def add_dir(self, target: Path, what: str, marker: str) -> Path:
        """Claim the directory ``target`` and return a new temporary directory to fill;
        `commit` swaps it in. ``target`` must be absent, empty, or hold ``marker`` (an
        earlier output of the same command), never anything else."""
        target = Path(target).absolute()
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            raise OutputError(f"{target}: exists and is not a directory")
        if target.is_dir() and any(target.iterdir()) and not (target / marker).is_file():
            raise OutputError(
                f"{target}: directory is not empty and was not written by hindsight; choose another"
            )
        self._check_inputs(target, what)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._claims.append(_Claim(target))
            tmp = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
            register_cleanup(tmp).mkdir()
        except OSError as e:
            raise OutputError(f"cannot write the {what} to {target}: {e.strerror}") from None
        self._pending.append((tmp, target))
        return tmp

    def own_files(self) -> set[Path]:
        """The lock and temporary files of these outputs (resolved): never inputs, even
        when an output lies inside a bundle directory."""
        paths = [c.path for c in self._claims] + [tmp for tmp, _ in self._pending]
        return {p.resolve() for p in paths} | {Path(f"{p}.wal").resolve() for p in self._wals}

    def _check(self, target: Path, what: str, database: bool) -> None:
        if target.is_dir() and not target.is_symlink():
            raise OutputError(f"cannot write the {what} to {target}: it is a directory")
        parent = next((q for q in target.absolute().parents if q.exists()), None)
        if parent is not None and not parent.is_dir():
            raise OutputError(f"cannot write the {what} to {target}: {parent} is not a directory")
        self._check_inputs(target, what)

    def _check_inputs(self, target: Path, what: str) -> None:
        resolved = target.resolve()
        for source in self.inputs:
            src = source.resolve()
            inside = src.is_dir() and resolved.is_relative_to(src) and resolved.is_file()
            if resolved == src or inside:
                raise OutputError(
                    f"cannot write the {what} to {target}: it is an input of this run "
                    f"({source}); choose another path"
                )

    def write_text(self, target: Path | None, text: str, what: str = "output") -> None:
        """Claim ``target`` and write ``text`` (UTF-8) to its temporary path."""
        tmp = self.add(target, what)
        if tmp is not None:
            tmp.write_text(text, encoding="utf-8")

    def commit(self) -> None:
        """Rename every temporary file onto its target (the command succeeded)."""
        for wal in self._wals:
            if wal.exists():
                raise OutputError(f"the database was not closed cleanly ({wal} is left)")
        for tmp, target in self._pending:
            if not os.path.lexists(tmp):
                continue  # claimed but not written (e.g. a report not rendered)
            if tmp.is_dir() and target.is_dir():
                _exchange(tmp, target)  # the old directory is now at tmp: removed below
                remove(tmp)
            else:
                os.replace(tmp, target)
            unregister_cleanup(tmp)
            if Path(f"{tmp}.wal") in self._wals:  # the old database's log is not ours
                Path(f"{target}.wal").unlink(missing_ok=True)
        self._pending.clear()

    def close(self) -> None:
        """Remove what was not committed and release the claims."""
        for tmp, _target in self._pending:
            remove(tmp)
        for wal in self._wals:
            wal.unlink(missing_ok=True)
            unregister_cleanup(wal)
        self._pending.clear()
        while self._claims:
            self._claims.pop().release()

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> None:
    """Swap two directories: at once with Linux's ``renameat2(RENAME_EXCHANGE)``, else
    by two renames (a crash between them leaves the old one at ``.NAME.*.old``)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        renameat2 = None
    if renameat2 is not None:
        args = (_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
        if renameat2(*args) == 0:
            return
    old = b.with_name(f".{b.name}.{os.getpid()}-{secrets.token_hex(4)}.old")
    os.rename(b, old)
    try:
        os.rename(a, b)
    except OSError:
        os.rename(old, b)
        raise
    os.rename(old, a)


def print_to(stream: IO[str], text: str) -> bool:
    """Write ``text`` to ``stream`` (stdout or stderr) and flush. A reader that stopped
    early (``| head``) is its choice, not an error: the stream is then pointed at
    /dev/null (nothing more is written to it, not even at exit) and False is returned."""
    try:
        stream.write(text)
        stream.flush()
        return True
    except BrokenPipeError:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
        return False


def emit(temp: Path | None, text: str, stdout: list[str]) -> None:
    """``text`` to an output's temporary path (from `Outputs.add`), or, when that is None
    (``-``), onto ``stdout``: what the command prints once everything is committed."""
    if temp is None:
        stdout.append(text)
    else:
        temp.write_text(text, encoding="utf-8")


def write_text(target: Path, text: str, what: str = "output") -> Path:
    """Write ``text`` to ``target`` atomically (claimed, temporary name, rename)."""
    with Outputs() as out:
        out.write_text(target, text, what)
        out.commit()
    return target


@contextlib.contextmanager
def replacing(target: Path, what: str = "output", inputs: Iterable[Path] = ()) -> Iterator[Path]:
    """The temporary path to write ``target`` at; renamed onto it when the block succeeds."""
    with Outputs(inputs) as out:
        tmp = out.add(target, what)
        assert tmp is not None
        yield tmp
        out.commit()
