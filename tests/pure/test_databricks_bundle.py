"""The example Databricks Asset Bundle (deploy/databricks/databricks.yml) and the Databricks
page (docs/databricks.md) against the package they deploy and use.

Nothing here talks to Databricks: the bundle's job is checked against what the platform
will do with it. A Python wheel task looks `entry_point` up among the installed
distribution's entry points and calls it with `parameters` as its arguments, so the
parameters go through the real command-line parser into a real, checked config; the wheel
the task's environment installs is the one the bundle's artifact builds.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import inspect
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

import sharestate.job.config
from sharestate.io.readers import OUTPUT_TABLES
from sharestate.job.cli import _parser
from sharestate.job.options import config_from_args
from sharestate.job.pipeline import Results
from tests.support.paths import ROOT
from tests.support.wheel import build_wheel

BUNDLE_DIR = ROOT / "deploy" / "databricks"
BUNDLE = BUNDLE_DIR / "databricks.yml"
PAGE = ROOT / "docs" / "databricks.md"
JOB = "sharestate_incremental"
#: Commands that build a wheel of the project in the current folder into its dist/.
WHEEL_BUILDS = (["python", "-m", "build", "--wheel"], ["uv", "build", "--wheel"])
#: Distributions that bring a Spark of their own (tests/pure/test_packaging.py).
SPARK_DISTRIBUTIONS = {"pyspark", "pyspark-client", "databricks-connect", "delta-spark"}


@pytest.fixture(scope="module")
def bundle() -> dict[str, Any]:
    loaded = yaml.safe_load(BUNDLE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def project() -> dict[str, Any]:
    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"])


@pytest.fixture(scope="module")
def job(bundle: dict[str, Any]) -> dict[str, Any]:
    jobs = bundle["resources"]["jobs"]
    assert list(jobs) == [JOB]
    return dict(jobs[JOB])


@pytest.fixture(scope="module")
def task(job: dict[str, Any]) -> dict[str, Any]:
    (replay,) = job["tasks"]
    assert replay["task_key"] == "replay"
    return dict(replay)


@pytest.fixture(scope="module")
def artifact(bundle: dict[str, Any]) -> dict[str, Any]:
    (only,) = bundle["artifacts"].values()
    return dict(only)


def _code_blocks(language: str) -> list[str]:
    page = PAGE.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", page, re.MULTILINE | re.DOTALL)


def _options(parameters: list[str]) -> dict[str, str]:
    """`--name value` pairs of a parameter list (after the command)."""
    pairs = parameters[1:]
    assert len(pairs) % 2 == 0 and all(p.startswith("--") for p in pairs[::2]), parameters
    return dict(zip(pairs[::2], pairs[1::2], strict=True))


def test_the_bundle_is_named_and_deploys_to_dev_by_default(bundle: dict[str, Any]) -> None:
    assert bundle["bundle"]["name"] == "sharestate"
    assert bundle["targets"] == {"dev": {"mode": "development", "default": True}}


def test_the_task_names_the_package_and_one_of_its_entry_points(
    task: dict[str, Any], project: dict[str, Any]
) -> None:
    wheel_task = task["python_wheel_task"]
    assert wheel_task["package_name"] == project["name"]
    scripts = project["scripts"]
    assert wheel_task["entry_point"] in scripts
    module, _, attribute = scripts[wheel_task["entry_point"]].partition(":")
    assert callable(getattr(importlib.import_module(module), attribute))


def test_the_parameters_are_a_valid_replay_command(
    task: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    parameters = task["python_wheel_task"]["parameters"]
    assert all(isinstance(p, str) for p in parameters)
    args = _parser().parse_args(parameters)
    assert args.command == "replay"
    # /Volumes is a folder of the workspace, not of this machine: whether the output can be
    # created there is for the workspace to say. Every other check of the config runs.
    monkeypatch.setattr(sharestate.job.config, "local_output_problem", lambda output: None)
    config = config_from_args(args)
    given = _options(parameters)
    assert (config.share_state, config.consumer_offsets, config.output, config.mode) == (
        given["--share-state"],
        given["--consumer-offsets"],
        given["--output"],
        given["--mode"],
    )
    assert config.mode == "incremental"
    assert all(p.startswith("/Volumes/") for p in config.read_paths().values() if p is not None)


def test_the_job_runs_hourly_one_run_at_a_time_paused_until_unpaused(
    job: dict[str, Any],
) -> None:
    schedule = job["schedule"]
    # Quartz: second minute hour day-of-month month day-of-week
    assert schedule["quartz_cron_expression"].split() == ["0", "0", "*", "*", "*", "?"]
    assert schedule["pause_status"] == "PAUSED"
    assert job["max_concurrent_runs"] == 1


def test_the_artifact_builds_the_wheel_the_tasks_environment_installs(
    job: dict[str, Any],
    task: dict[str, Any],
    artifact: dict[str, Any],
    tmp_path: Path,
) -> None:
    # The artifact: a wheel, built in the repository's root by a command that writes it
    # into that folder's dist/.
    assert artifact["type"] == "whl"
    project_dir = (BUNDLE_DIR / artifact["path"]).resolve()
    assert project_dir == ROOT and (project_dir / "pyproject.toml").is_file()
    assert shlex.split(artifact["build"]) in WHEEL_BUILDS
    # The task's environment: that wheel, and nothing that brings a Spark of its own.
    (environment,) = [
        e for e in job["environments"] if e["environment_key"] == task["environment_key"]
    ]
    dependencies = environment["spec"]["dependencies"]
    assert not [d for d in dependencies if re.split(r"[\[<>=!~;\s]", d)[0] in SPARK_DISTRIBUTIONS]
    (wheel_glob,) = [d for d in dependencies if d.endswith(".whl")]
    assert (BUNDLE_DIR / wheel_glob).resolve().parent == project_dir / "dist"
    # Built with the same backend the build command calls (setuptools, from pyproject.toml),
    # offline: the wheel is what the environment's glob picks up.
    assert (
        tomllib.loads((project_dir / "pyproject.toml").read_text(encoding="utf-8"))["build-system"][
            "build-backend"
        ]
        == "setuptools.build_meta"
    )
    wheel = build_wheel(project_dir, tmp_path)
    assert fnmatch.fnmatch(wheel.name, Path(wheel_glob).name)


def test_the_page_shows_the_bundles_task_as_it_is(task: dict[str, Any]) -> None:
    (shown,) = [yaml.safe_load(block) for block in _code_blocks("yaml")]
    assert shown == [task]
    page = PAGE.read_text(encoding="utf-8")
    assert f"databricks bundle run {JOB}" in page


def test_the_pages_python_names_only_what_the_package_has(task: dict[str, Any]) -> None:
    """Every name the page's snippets import exists; every call to one binds to its
    signature; the config the notebook builds is valid and reads what the job reads."""
    code = "\n".join(
        line
        for block in _code_blocks("python")
        for line in block.splitlines()
        if not line.lstrip().startswith("%")  # notebook magics (%pip)
    )
    tree = ast.parse(code)
    imported: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.module is not None
            module = importlib.import_module(node.module)
            for alias in node.names:
                imported[alias.asname or alias.name] = getattr(module, alias.name)
    assert {"JobConfig", "compute", "main", "summarize", "read_output"} <= set(imported)
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in imported
    ]
    assert {call.func.id for call in calls if isinstance(call.func, ast.Name)} >= {
        "JobConfig",
        "compute",
        "main",
        "summarize",
        "read_output",
    }
    for call in calls:
        assert isinstance(call.func, ast.Name)
        signature = inspect.signature(imported[call.func.id])
        signature.bind(*call.args, **{k.arg: k.value for k in call.keywords if k.arg})
    # The notebook's config, built as the page builds it: the paths of the bundle's job.
    (config_call,) = [c for c in calls if isinstance(c.func, ast.Name) and c.func.id == "JobConfig"]
    config = imported["JobConfig"](
        **{k.arg: ast.literal_eval(k.value) for k in config_call.keywords if k.arg}
    )
    given = _options(task["python_wheel_task"]["parameters"])
    assert (config.share_state, config.consumer_offsets, config.output) == (
        given["--share-state"],
        given["--consumer-offsets"],
        given["--output"],
    )
    # What the snippets read of the results and of the output exists.
    fields = set(Results.__dataclass_fields__)
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "results"
    }
    assert used and used <= fields
    subscripted = {
        ast.literal_eval(node.slice)
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "tables"
    }
    assert subscripted and subscripted <= set(OUTPUT_TABLES)
