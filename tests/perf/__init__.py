"""psrec's benchmark against py-spy and Austin (not part of the default test run).

Run it with `python -m tests.perf` from the repository root; see tests/perf/README.md.
"""
