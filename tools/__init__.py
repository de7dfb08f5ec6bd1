"""The book's evidence and build tooling, kept apart from the runtime package.

``ccmc_lite`` is what the chapters and coursework import. This folder holds what produces,
checks and measures the book's evidence, and is imported by ``dev.py``, the tests, the
benchmarks, the book's evidence pages (the Running page and the Reproduction appendix) and
the chapters' build-only cells — never by a cell that reaches readers' notebooks
(``tests/test_architecture.py`` enforces it):

* :mod:`tools.gluing` — the glue that pastes the chapters' computed numbers and figures into
  their prose during the build;
* :mod:`tools.sweeps` — a sweep cut into shards, run in-process, in a process pool or on a
  Dask cluster;
* :mod:`tools.stored` — the writer of the paper-setting runs that ``ccmc_lite`` ships and
  loads, with their provenance; :mod:`tools.snapshots` — the chapters' paper-profile
  snapshots (written, checked and read for the Reproduction pages);
* :mod:`tools.paper_runs`, :mod:`tools.paper_chapters`, :mod:`tools.gpu_runs` — the commands
  behind ``python3 dev.py paper-runs``, ``paper-chapters`` and ``gpu-runs``;
* :mod:`tools.markov_tasks`, :mod:`tools.ngram_tasks` — the Part II and Part III experiments
  as sweep tasks (what one shard of a stored run computes);
* :mod:`tools.gpu_results` — the stored sweeps as re-run on a GPU, and the step times there;
* :mod:`tools.replay` — the result cache that lets a kernel replay a repeated training call;
* :mod:`tools.costs` — the work of a training step and its roofline lower bound;
* :mod:`tools.allocator` — glibc's allocator settings that ``dev.py`` gives every process;
* :mod:`tools.mkl_dispatch` — the measurement of MKL's code path on AMD processors.

It is not installed with the package: use it from a clone of the repository.
"""
