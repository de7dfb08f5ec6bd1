# Set-up for Colab and other fresh environments: installs ccmc_lite when it is missing.
# (Added to every downloadable notebook by the book build; harmless where it is installed.)
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("ccmc_lite") is None:
    subprocess.check_call(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "ccmc_lite @ git+https://github.com/ccmc-lite/ccmc_lite@main",
        ]
    )
