"""Coverage-guided fuzzing of every clawkb format parser with atheris (libFuzzer).

    PYTHONPATH=tests .venv/bin/python fuzz/fuzz_parsers.py -runs=100000
    PYTHONPATH=tests .venv/bin/python fuzz/fuzz_parsers.py -max_total_time=600

The first input byte picks the parser, the rest is its input. Any exception
other than a ParseError is a crash and libFuzzer saves the input.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from clawkb.errors import ParseError
    from parser_samples import check_document, samples

SAMPLES = sorted(samples().items())


def one_input(data: bytes) -> None:
    if not data:
        return
    _, (parser, filename, _) = SAMPLES[data[0] % len(SAMPLES)]
    try:
        doc = parser.parse(data[1:], filename)  # type: ignore[attr-defined]
    except ParseError:
        return
    check_document(doc)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
