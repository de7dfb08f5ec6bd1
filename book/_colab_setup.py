# Set-up for Colab and other fresh environments: installs ccmc_lite when it is missing.
# The book build pins REF to the commit that made these pages, so the package matches
# the text; torch is not reinstalled where it is present (Colab has it).
import importlib.util
import subprocess
import sys

REF = "main"
if importlib.util.find_spec("ccmc_lite") is None:
    url = f"ccmc_lite @ git+https://github.com/ccmc-lite/ccmc_lite@{REF}"
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", url])
