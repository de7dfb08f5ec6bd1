"""The book's evidence and build tooling, kept apart from the runtime package.

``ccmc_lite`` is what the chapters and coursework import. This folder holds what produces,
checks and measures the book's evidence, and is imported by ``dev.py``, the tests, the
benchmarks and the book's evidence pages (the Running page and the Reproduction appendix),
never by a chapter (``tests/test_architecture.py`` enforces it):

* :mod:`tools.sweeps` — a sweep cut into shards, run in-process, in a process pool or on a
  Dask cluster;
* :mod:`tools.stored` and :mod:`tools.snapshots` — the writers of the paper-setting results
  and chapter snapshots that ``ccmc_lite`` ships and loads, with their provenance;
* :mod:`tools.paper_runs`, :mod:`tools.paper_chapters`, :mod:`tools.gpu_runs` — the commands
  behind ``python3 dev.py paper-runs``, ``paper-chapters`` and ``gpu-runs``;
* :mod:`tools.replay` — the result cache that lets a kernel replay a repeated training call;
* :mod:`tools.costs` — the work of a training step and its roofline lower bound;
* :mod:`tools.allocator` — glibc's allocator settings that ``dev.py`` gives every process;
* :mod:`tools.mkl_dispatch` — the measurement of MKL's code path on AMD processors.

It is not installed with the package: use it from a clone of the repository.
"""
