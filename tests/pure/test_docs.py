"""The README is a front door into docs/, and the docs say what the code does.

`make docs` (part of `make test`) builds the site with `mkdocs build --strict`, which fails on
a broken link inside docs/ or a page left out of the navigation; these tests cover what the
build cannot see: the README's links, its length, every option of the commands, the
generated pages' sources, and the names of the columns the code defines.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
from datetime import date
from types import ModuleType

import pytest

from sharestate.decode.columns import GROUP_RECORD_FIELDS, SHARE_STATE_DECODED_FIELDS
from sharestate.io.checkpoint import CHECKPOINT_SCHEMA, CHECKPOINT_TABLE, PLACEMENTS_TABLE
from sharestate.io.readers import OUTPUT_TABLES
from sharestate.job import cli
from sharestate.job.summary_table import COLUMN_NAMES as RUN_SUMMARY_COLUMNS
from sharestate.replay.fold import COMPUTED_FIELDS, LATEST_TIMESTAMP, PASSTHROUGH_FIELDS, SINCE
from tests.support.paths import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200
#: Markdown links: [text](target)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _hooks() -> ModuleType:
    """scripts/docs_hooks.py, the mkdocs hooks that generate the options and results pages."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _help(*argv: str) -> str:
    """What `sharestate ARGV --help` prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        cli.main([*argv, "--help"])
    assert exited.value.code == 0
    return out.getvalue()


def _options(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_text)) - {"--help"}


def test_readme_is_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_every_readme_link_into_the_repository_exists() -> None:
    targets = LINK.findall(README.read_text(encoding="utf-8"))
    local = [t.split("#", 1)[0] for t in targets if not re.match(r"^[a-z]+:", t)]
    assert any(t.startswith("docs/") for t in local), "the README links into docs/"
    missing = [t for t in local if t and not (ROOT / t).is_file()]
    assert missing == []


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {t.split("#", 1)[0] for t in LINK.findall(README.read_text(encoding="utf-8"))}
    pages = {f"docs/{page.name}" for page in DOCS.glob("*.md")}
    assert pages - linked == set()


def test_every_option_of_the_commands_is_documented() -> None:
    page = (DOCS / "options.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^### `(--[a-z][a-z-]*)`$", page, re.MULTILINE))
    replay = _options(_help("replay"))
    assert "--share-state" in replay and "--spark-conf" in replay
    assert replay - sections == set()
    sample = _options(_help("sample"))
    assert "--records" in sample
    assert [option for option in sample if f"`{option} " not in page] == []


def test_the_generated_options_table_lists_every_option_with_the_codes_default() -> None:
    hooks = _hooks()
    table = hooks.options_table((DOCS / "options.md").read_text(encoding="utf-8"))
    rows = [line for line in table.splitlines() if line.startswith("| [`--")]
    names = [action.option_strings[0] for action in hooks.replay_options()]
    assert [row.split("`")[1] for row in rows] == names
    delivery_limit = next(row for row in rows if "--delivery-count-limit" in row)
    assert "| `5` |" in delivery_limit


def test_a_section_with_a_wrong_default_fails_the_build() -> None:
    hooks = _hooks()
    page = (DOCS / "options.md").read_text(encoding="utf-8")
    wrong = page.replace("Default: `24h`.", "Default: `12h`.")
    assert wrong != page
    with pytest.raises(hooks.PluginError, match="--stall-span defaults to '24h'"):
        hooks.options_table(wrong)
    with pytest.raises(hooks.PluginError, match="no section for --mode"):
        hooks.options_table(page.replace("### `--mode`", "### mode"))


def test_benchmark_results_are_complete_and_all_on_the_performance_page() -> None:
    hooks = _hooks()
    files = sorted((ROOT / "bench" / "results").glob("*.json"))
    assert files, "bench/results/ holds the benchmark runs"
    for path in files:
        result = json.loads(path.read_text(encoding="utf-8"))
        assert set(hooks.REQUIRED_RESULT_KEYS) <= set(result), path.name
        assert result["benchmark"] in hooks.COLUMNS, path.name
        day = date.fromisoformat(str(result["date"])[:10])
        assert path.name.startswith(day.isoformat()), path.name
        assert {"cores", "python", "java", "spark"} <= set(result["machine"]), path.name
    page = hooks.results_tables(hooks.load_results(ROOT / "bench" / "results"))
    assert [path.name for path in files if path.name not in page] == []


def test_output_tables_page_names_every_table_and_column_the_code_defines() -> None:
    page = (DOCS / "output-tables.md").read_text(encoding="utf-8")
    tables = {CHECKPOINT_TABLE, PLACEMENTS_TABLE, *OUTPUT_TABLES}
    columns = {
        *(field.name for field in SHARE_STATE_DECODED_FIELDS),
        *(field.name for field in GROUP_RECORD_FIELDS),
        *(field.name for field in (*PASSTHROUGH_FIELDS, *COMPUTED_FIELDS)),
        SINCE,
        LATEST_TIMESTAMP,
        *CHECKPOINT_SCHEMA.names,
        *RUN_SUMMARY_COLUMNS,
    }
    headings = set(re.findall(r"^### `(\w+)`", page, re.MULTILINE))
    assert tables - headings == set()
    assert [name for name in sorted(columns) if not re.search(rf"\b{name}\b", page)] == []
