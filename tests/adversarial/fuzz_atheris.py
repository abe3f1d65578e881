"""Coverage-guided fuzzing of one parser (or the bundle reader) with atheris/libFuzzer.

Not collected by pytest. Run it from a separate venv that has atheris (docs/fuzzing.md):

    python tests/adversarial/fuzz_atheris.py vmstat -runs=20000 -max_len=65536
    python tests/adversarial/fuzz_atheris.py bundle -runs=5000

The seed corpus is every fixture the parser's own sniffer claims (tests/fixtures), written
to a scratch directory that libFuzzer then grows. The property is the one of
test_fuzz_parsers.py: parse() returns a result whose coverage adds up and whose tables
conform to the declared schema, or raises ParseError; the reader opens or raises
BundleError. Anything else is a finding: libFuzzer stops and writes ``crash-*``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

with atheris.instrument_imports(include=["analyzer"]):
    from hostile import tar_bytes, valid

    from analyzer.bundle import open_bundle
    from analyzer.errors import BundleError, ParseError
    from analyzer.parsers import PARSERS
    from analyzer.parsers.base import ParseContext

SCRATCH = Path(tempfile.mkdtemp(prefix="hindsight-atheris-"))
INPUT = SCRATCH / "input"


def fuzz_parser(tool: str):  # type: ignore[no-untyped-def]
    from test_fuzz_parsers import check_result

    module = PARSERS[tool]

    def one(data: bytes) -> None:
        INPUT.write_bytes(data)
        try:
            result = module.parse(INPUT, ParseContext(file_name="input"))
        except ParseError:
            return
        check_result(tool, result)

    return one


def fuzz_bundle(data: bytes) -> None:
    INPUT.write_bytes(data)
    try:
        with open_bundle(INPUT) as bundle:
            for f in bundle.files:
                assert f.path.resolve().is_relative_to(bundle.workdir.resolve())  # type: ignore[union-attr]
    except BundleError:
        return


def seeds(tool: str) -> Path:
    corpus = SCRATCH / "corpus"
    corpus.mkdir()
    if tool == "bundle":
        import gzip

        (corpus / "tgz").write_bytes(gzip.compress(tar_bytes(valid())))
        (corpus / "tar").write_bytes(tar_bytes(valid()))
        return corpus
    from test_fuzz_parsers import corpus as fixtures

    for i, raw in enumerate(fixtures()[tool]):
        (corpus / f"seed{i}").write_bytes(raw)
    return corpus


def main() -> None:
    tool, args = sys.argv[1], sys.argv[2:]
    target = fuzz_bundle if tool == "bundle" else fuzz_parser(tool)
    atheris.Setup([sys.argv[0], *args, str(seeds(tool))], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
