"""Test helpers that are part of the library so that tests and benchmarks share them.

:mod:`workbench.testing.contract` generates random problems over the whole data model and
checks every registered solver against the contract of DESIGN.md.
"""

__all__: list = []
