"""Exercise checkers for the book, one module per part (built on :mod:`ccmc_lite.checking`)."""
