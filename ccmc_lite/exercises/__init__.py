"""Exercise checkers, one module per part of the book (built on :mod:`ccmc_lite.checking`)."""
