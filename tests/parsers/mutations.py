"""Mutations of real fixture bytes for the parsers' property tests (truncation, an inserted
garbage line, random byte flips), deterministic per seed."""

import random


def mutate(data: bytes, seed: int, op: int) -> bytes:
    rnd = random.Random(seed)
    if op == 0 and data:
        return data[: rnd.randrange(len(data))]
    if op == 1:
        lines = data.split(b"\n")
        lines.insert(
            rnd.randrange(len(lines) + 1),
            bytes(rnd.randrange(256) for _ in range(rnd.randrange(40))),
        )
        return b"\n".join(lines)
    out = bytearray(data)
    for _ in range(rnd.randrange(1, 8)):
        if out:
            out[rnd.randrange(len(out))] = rnd.randrange(256)
    return bytes(out)
