"""The profile switch: ``book`` (default) or ``paper``.

Long experiments have two settings. The ``book`` profile fits the continuous-integration
budget on two CPU cores and still shows each phenomenon; the ``paper`` profile uses the
settings reported by the papers. One environment variable chooses::

    CCMC_PROFILE=paper python3 dev.py book

Chapters pick their settings with :func:`~ccmc_lite.core.by_profile`.
"""

from __future__ import annotations

import os
from typing import TypeVar

from .validation import check_choice

__all__ = ["PROFILES", "PROFILE_ENV", "by_profile", "current_profile"]

#: The environment variable that picks the profile.
PROFILE_ENV = "CCMC_PROFILE"
#: The profiles: ``book`` (default, two CPU cores) and ``paper`` (the papers' settings).
PROFILES = ("book", "paper")

T = TypeVar("T")


def current_profile() -> str:
    """The active profile: ``$CCMC_PROFILE`` or ``"book"`` when unset or empty.

    Raises ``ValueError`` naming the variable for any other value, so a typo such as
    ``CCMC_PROFILE=papers`` fails loudly instead of silently running the book profile.
    """
    raw = os.environ.get(PROFILE_ENV, "").strip()
    if not raw:
        return "book"
    try:
        return check_choice(f"${PROFILE_ENV}", raw.lower(), PROFILES)
    except ValueError:
        raise ValueError(
            f"environment variable {PROFILE_ENV} must be one of {PROFILES}; got {raw!r}"
        ) from None


def by_profile(book: T, paper: T, *, profile: str | None = None) -> T:
    """Return ``book`` or ``paper`` according to the active (or given) profile."""
    name = current_profile() if profile is None else check_choice("profile", profile, PROFILES)
    return book if name == "book" else paper
