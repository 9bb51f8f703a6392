"""The one exception type a kiln user sees.

Every failure a user can act on becomes a `KilnError`: one message, the stage it happened in, and
where useful a hint and a file to look at. The CLI prints it as is; anything else is a kiln bug.
"""

from __future__ import annotations

from pathlib import Path


class KilnError(Exception):
    def __init__(
        self,
        message: str,
        *,
        stage: str | None = None,
        hint: str | None = None,
        file: Path | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.hint = hint
        self.file = file

    def __str__(self) -> str:
        lines = [f"[{self.stage}] {self.message}" if self.stage else self.message]
        if self.file is not None:
            lines.append(f"  see: {self.file}")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)
