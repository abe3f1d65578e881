"""Digests of the parse stage's tables, recorded before the parser rewrite (issue #17).

`tests.parsers_digest.digest` computes them; ``before.json`` holds the recorded ones.
"""
