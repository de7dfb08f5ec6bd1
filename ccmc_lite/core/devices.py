"""Device choice: CUDA when present, the CPU otherwise.

The environment variable ``CCMC_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``, ...) overrides the
automatic choice, e.g. to force the CPU on a GPU machine for a bit-for-bit comparison.
"""

from __future__ import annotations

import os

import torch

__all__ = ["DEVICE_ENV", "default_device", "resolve_device"]

#: The environment variable that overrides the automatic device choice.
DEVICE_ENV = "CCMC_DEVICE"


def default_device() -> torch.device:
    """``$CCMC_DEVICE`` if set, else ``cuda`` when available, else ``cpu``."""
    requested = os.environ.get(DEVICE_ENV, "").strip()
    if requested:
        return resolve_device(requested)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_device(device: torch.device | str | None) -> torch.device:
    """Turn ``None`` (meaning :func:`default_device`), a string or a device into a device.

    Raises ``ValueError`` for an unknown device string or for CUDA on a machine without it.
    """
    if device is None:
        return default_device()
    if isinstance(device, torch.device):
        resolved = device
    elif isinstance(device, str):
        try:
            resolved = torch.device(device)
        except RuntimeError as err:
            raise ValueError(
                f"device must be 'cpu', 'cuda' or 'cuda:N'; got {device!r} ({err})"
            ) from None
    else:
        raise TypeError(f"device must be a str or torch.device; got {type(device).__name__}")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was requested but CUDA is not available here")
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be a CPU or CUDA device; got {device!r}")
    return resolved
