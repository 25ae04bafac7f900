"""Whole numbers written as text in files, headers, options and environment variables.

``str.isdigit()`` is true of '²', which ``int()`` refuses; ``int()`` reads '١' (an Arabic-Indic
one) as 1 and refuses more than 4,300 digits with a ``ValueError``. A number this platform reads
from text is ASCII digits, and few of them: ``whole_number`` is the one reader of such numbers."""
from __future__ import annotations

from typing import Optional


def ascii_digits(text: str) -> bool:
    """Whether ``text`` is one or more of the characters 0-9 and nothing else."""
    return text.isascii() and text.isdigit()


def whole_number(text: str, max_digits: int = 18) -> Optional[int]:
    """``text`` as an int when it is 1 to ``max_digits`` ASCII digits (no sign, no space, no '_');
    else None."""
    if len(text) <= max_digits and ascii_digits(text):
        return int(text)
    return None
