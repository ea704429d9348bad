"""Blocks of commands and SQL the README and docs/ give, extracted as the tests run them:
the documented text is what is tested."""

from __future__ import annotations

import re
from pathlib import Path


def fenced_block(page: Path, marker: str, language: str) -> str:
    """The text of the first ```LANGUAGE block after `marker` (an HTML comment) in `page`."""
    text = page.read_text(encoding="utf-8")
    fence = f"```{language}\n"
    start = text.index(fence, text.index(marker)) + len(fence)
    return text[start : text.index("```", start)]


def shell_commands(block: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments cut."""
    commands, current = [], ""
    for line in block.splitlines():
        line = re.sub(r"\s+#\s.*$", "", line).rstrip()
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current.strip():
            commands.append(current.strip())
        current = ""
    return commands


def sql_statements(block: str) -> list[str]:
    """The statements of a SQL block, split at `;`."""
    return [statement.strip() for statement in block.split(";") if statement.strip()]
