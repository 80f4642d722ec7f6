"""The one error type for input the trigger refuses: reported to the caller, never retried."""

from __future__ import annotations


class InvalidInput(ValueError):
    """Input that can never become a valid training job; each entry names the field, the bad value and the fix."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = list(errors)
