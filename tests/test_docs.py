"""The documentation: README.md and the mkdocs site in docs/ build, link and run as written.

- `mkdocs build --strict` of mkdocs.yml into a temporary folder: any warning fails it (a broken
  link or anchor, a page missing from the nav).
- Every command the docs show is run. Commands are written in ```console blocks, one per line
  starting with `$ `; the lines after a command, up to the next one, are its output as shown. The
  commands of one page run in order, in a fresh folder holding copies of `examples/` and
  `tests/passes/`, with this environment's bin folder (`kiln`, `python`, `lit`) first on PATH. Each
  must exit with status 0, and each output line shown must appear in what it printed (stdout and
  stderr), in order: numbers and runs of spaces are compared loosely, a line `...` stands for any
  lines, and `...` within a line for any part of it. Pages run side by side, KILN_DOCS_JOBS
  (default 2) at a time.
- A `$ ` line anywhere else (another kind of block) fails: a command that cannot run here is shown
  without `$ ` in a plain block, and the page says why. That is how the docs show commands that need
  a GPU (running a cuda or vulkan artifact), take minutes (`kiln ops`, `kiln tune run`, the benchmark
  suite) or rewrite tracked files (`SUPPORT.md`, `FAMILIES.md`): none of them is in a console block.
- `make TARGET` lines are not run as they are: `make install` built the environment this test runs
  in (CI runs it first: `make test` depends on it), and running it again would reinstall `.venv`.
  So each is run as a dry run (`make -n`, with `.venv/.installed` taken as up to date) in the
  repository, and for `make demo` every kiln or python command it would run must be one the same page
  runs itself (the README's tour runs exactly those).
- The README's layout section names only folders and files that exist.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # this environment's console scripts: kiln, mkdocs, lit, filecheck
README = ROOT / "README.md"
PAGES = sorted([README, *(ROOT / "docs").rglob("*.md")])
COPIED = ("examples", "tests/passes")  # what a page's commands may read, copied into their folder


def tracked(*folders: str) -> frozenset[str]:
    """The files git tracks under `folders`, and their folders, relative to ROOT."""
    listed = subprocess.run(["git", "ls-files", "-z", *folders], cwd=ROOT, capture_output=True, text=True, check=True)
    files = [Path(name) for name in listed.stdout.split("\0") if name]
    return frozenset(path.as_posix() for file in files for path in (file, *file.parents[:-1]))


def not_tracked(directory: str, names: list[str]) -> set[str]:
    """copytree's ignore: what git does not track is not copied. Besides lit's outputs and caches, an
    ignored folder can be big: `benchmarks/generation.py compile` writes 18 GB of Llama checkpoints
    into examples/llama/checkpoints, and a copy per page filled the disk."""
    base = Path(directory).resolve().relative_to(ROOT)
    return {name for name in names if (base / name).as_posix() not in TRACKED}


TRACKED = tracked(*COPIED)
JOBS = int(os.environ.get("KILN_DOCS_JOBS", "2"))
COMMAND_TIMEOUT_S = 600
MAKE_DRY_RUN_CHECKED = {"demo"}  # make targets whose commands the page itself must run (see the docstring)

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


@dataclass
class Command:
    line: int  # 1-based line of the `$ ` line in its page
    text: str
    output: list[str] = field(default_factory=list)  # the lines shown after it


@dataclass
class Blocks:
    commands: list[Command]  # from console blocks, in order
    stray: list[int]  # lines starting `$ ` in other blocks


def parse(page: Path) -> Blocks:
    commands: list[Command] = []
    stray: list[int] = []
    fence: str | None = None
    kind = ""
    current: Command | None = None
    for number, raw in enumerate(page.read_text().splitlines(), start=1):
        match = FENCE.match(raw)
        if fence is None:
            if match:
                fence, kind, current = match.group(1), match.group(2), None
            continue
        if match and raw.strip().startswith(fence) and not match.group(2):
            fence = None
            continue
        line = raw.strip()
        if line.startswith("$ "):
            if kind == "console":
                current = Command(number, line[2:].strip())
                commands.append(current)
            else:
                stray.append(number)
        elif kind == "console" and current is not None and line:
            current.output.append(line)
    return Blocks(commands, stray)


def loose(line: str) -> str:
    """A line as compared: each number one placeholder, runs of spaces one space."""
    return " ".join(NUMBER.sub("N", line).split())


def pattern(line: str) -> re.Pattern[str]:
    """A shown line as a pattern: found inside a printed line; `...` within it stands for anything."""
    return re.compile(".*".join(re.escape(part.strip()) for part in loose(line).split("...")))


def missing_output(shown: list[str], printed: str) -> str | None:
    """The first shown line that does not appear in `printed` (in order), or None."""
    lines = [loose(line) for line in printed.splitlines()]
    position = 0
    for line in shown:
        if line == "...":
            continue
        want = pattern(line)
        found = next((i for i in range(position, len(lines)) if want.search(lines[i])), None)
        if found is None:
            return line
        position = found + 1
    return None


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )


def run_make(target: str, page_commands: list[str]) -> str | None:
    """`make TARGET` as a dry run in the repository; for checked targets, its commands must be the page's."""
    result = shell(f"make -n -o .venv/.installed {shlex.quote(target)}", ROOT)
    if result.returncode != 0:
        return f"`make -n {target}` failed:\n{result.stdout}"
    if target not in MAKE_DRY_RUN_CHECKED:
        return None
    venv = ".venv/bin/"
    would_run = [line[len(venv) :].strip() for line in result.stdout.splitlines() if line.startswith(venv)]
    not_shown = [command for command in would_run if command not in page_commands]
    if not would_run or not_shown:
        return f"`make {target}` runs commands the page does not show and run: {not_shown or result.stdout}"
    return None


def run_page(page: Path, folder: Path) -> list[str]:
    """Run the page's commands in order in `folder`; the failures, each a paragraph (empty: all ran)."""
    for name in COPIED:
        shutil.copytree(ROOT / name, folder / name, ignore=not_tracked)
    commands = parse(page).commands
    texts = [command.text for command in commands]
    where = page.relative_to(ROOT)
    for command in commands:
        if command.text.startswith("make "):
            failure = run_make(command.text.split(maxsplit=1)[1], texts)
            if failure:
                return [f"{where}:{command.line}: {failure}"]
            continue
        try:
            result = shell(command.text, folder)
        except subprocess.TimeoutExpired:
            return [f"{where}:{command.line}: `{command.text}` ran past {COMMAND_TIMEOUT_S} s"]
        if result.returncode != 0:
            return [
                f"{where}:{command.line}: `{command.text}` exited {result.returncode}:\n{result.stdout[-4000:]}"
            ]
        absent = missing_output(command.output, result.stdout)
        if absent is not None:
            return [
                f"{where}:{command.line}: `{command.text}` did not print {absent!r}; it printed:\n{result.stdout[-4000:]}"
            ]
    return []


PAGES_WITH_COMMANDS = [page for page in PAGES if parse(page).commands]


def cost(page: Path) -> int:
    """About how long a page's commands take, in compiles: each compile or bench is most of it."""
    return sum(2 if re.match(r"kiln (compile|bench)", c.text) else 1 for c in parse(page).commands)


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.fixture(scope="session")
def page_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[Path, Future[list[str]]]]:
    """The selected pages' commands, started together on JOBS workers (a compile is mostly one core)."""
    selected = [
        item.callspec.params["page"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_commands_run" and hasattr(item, "callspec")
    ]
    pool = ThreadPoolExecutor(max_workers=JOBS)
    futures = {
        page: pool.submit(run_page, page, tmp_path_factory.mktemp(page.stem.replace(".", "_")))
        for page in sorted(dict.fromkeys(selected), key=cost, reverse=True)  # the longest first
    }
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_COMMANDS, ids=page_id)
def test_commands_run(page: Path, page_runs: dict[Path, Future[list[str]]]) -> None:
    failures = page_runs[page].result()
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_commands_are_in_console_blocks(page: Path) -> None:
    """A `$ ` line outside a console block would look runnable without being run."""
    stray = parse(page).stray
    assert not stray, f"{page_id(page)}: `$ ` lines outside ```console blocks at lines {stray}"


def test_docs_show_commands() -> None:
    """The parser finds the commands (a changed fence style would silently run nothing)."""
    assert any(command.text.startswith("kiln compile") for command in parse(README).commands)
    assert len(PAGES_WITH_COMMANDS) >= 5


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    mkdocs = BIN / "mkdocs"
    assert mkdocs.exists(), "mkdocs is not installed here: pip install -e '.[test]'"
    result = subprocess.run(
        [str(mkdocs), "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout
    assert "WARNING" not in result.stdout, result.stdout
    assert (tmp_path / "site" / "index.html").exists()


def layout_section(text: str) -> str:
    match = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, "README.md has no `## Layout` section"
    return match.group(1)


PATH_LIKE = re.compile(r"^[\w.-]+(/[\w.-]+)*/?$")
FILE_SUFFIXES = (".md", ".py", ".yml", ".yaml", ".toml", ".json", ".c", ".cfg", ".txt")


def named_paths(section: str) -> list[str]:
    """The code spans of a section that name a folder or file: with a `/`, or a file name; not module
    names like `kiln.targets`."""
    paths = []
    for span in re.findall(r"`([^`\n]+)`", section):
        if not PATH_LIKE.match(span):
            continue
        if "/" in span or span.endswith(FILE_SUFFIXES) or span == "Makefile":
            paths.append(span)
    return paths


def test_readme_layout_is_true_to_disk() -> None:
    paths = named_paths(layout_section(README.read_text()))
    assert len(paths) >= 10, paths
    rooms = {"targets/llvm_cpu/", "targets/cuda/", "targets/vulkan_spirv/", "targets/rocm/"}
    assert rooms <= set(paths), f"the layout section names the target rooms: {sorted(rooms - set(paths))}"
    missing = [
        path
        for path in paths
        if not (ROOT / path).exists() or (path.endswith("/") and not (ROOT / path).is_dir())
    ]
    assert not missing, f"README.md's layout names paths that do not exist: {missing}"


def test_readme_links_resolve() -> None:
    """Relative links of the README (into docs/ and benchmarks/) point at files that exist."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    relative = [link for link in links if not re.match(r"^[a-z]+:", link)]
    assert relative
    missing = [link for link in relative if not (ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
