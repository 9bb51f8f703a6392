"""Faults during compile and save: whatever stops a compile, the artifact at the output path is the
old one, whole, or the new one, whole; no temporary file or process is left; the exit code is
non-zero with one clear line.

`kiln compile` runs as a child process with an older artifact already at its output path, and is
killed (SIGKILL) or interrupted (SIGINT to its process group, as Ctrl-C does) when a stage's
progress line appears. The save itself is faulted precisely by save_child.py (between its renames,
while it writes, at a file-size limit). The bounded part takes a few stages; `make fuzz` takes all.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from support import artifact

import kiln
from kiln.compiler import CompileOptions, stage_names
from kiln.compiler.artifact import check_output
from kiln.errors import KilnError

HERE = Path(__file__).parent
KILN = str(Path(sys.executable).parent / "kiln")
STAGES = stage_names(CompileOptions(params="external"))
MODEL = f"""import sys
sys.path.insert(0, {str(HERE)!r})
import torch
from support import mlp

model = mlp(0)
example_inputs = (torch.randn(8, 64),)
"""
ARTIFACT = ("m.vmfb", "m.json", "m.irpa")


@pytest.fixture
def workspace(tmp_path):
    """A model file, an output folder holding an older artifact (other weights), and a private TMPDIR."""
    (tmp_path / "model.py").write_text(MODEL)
    out = tmp_path / "out"
    out.mkdir()
    for name, contents in artifact("other-external").files.items():
        (out / name).write_bytes(contents)
    (tmp_path / "tmp").mkdir()
    return tmp_path


def old_files() -> dict[str, bytes]:
    return dict(artifact("other-external").files)  # type: ignore[arg-type]


def files_in(folder: Path) -> dict[str, bytes]:
    """The folder's files but hidden ones (a killed save's temporaries): what a load could see."""
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file() and not path.name.startswith(".")}


def compile_command(workspace: Path, *extra: str) -> list[str]:
    return [KILN, "compile", str(workspace / "model.py"), "--params", "external", "-o", str(workspace / "out" / "m.vmfb"),
            "--dump-dir", str(workspace / "dumps"), *extra]  # fmt: skip


def environment(workspace: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(workspace / "tmp")}


def leftover_processes(marker: str) -> list[str]:
    """Command lines of running processes that mention `marker` (the child's private TMPDIR)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in command:
                found.append(command)
    return found


def kiln_temporaries(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if name.startswith("kiln-")]  # torch keeps its own caches there


def default_sigint() -> None:
    """For a child: Ctrl-C's default action, which a test run started in the background (where the
    shell ignores SIGINT, and children inherit that) would otherwise lack."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupted_compile(workspace: Path, stage: str, number: signal.Signals) -> tuple[int, list[str]]:
    """Run `kiln compile`, send `number` when `stage` starts; returns its exit code and stderr lines."""
    process = subprocess.Popen(
        compile_command(workspace), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        env=environment(workspace), start_new_session=True, preexec_fn=default_sigint,
    )  # fmt: skip
    assert process.stderr is not None
    lines = []
    index = STAGES.index(stage)
    for line in process.stderr:
        lines.append(line.rstrip("\n"))
        if line.startswith(f"[{index + 1}/{len(STAGES)}] {stage} ..."):
            if stage == "vmfb":
                time.sleep(0.3)  # iree-compile has started; it runs for a second or more
            os.killpg(process.pid, number) if number == signal.SIGINT else process.send_signal(number)
            break
    lines += [line.rstrip("\n") for line in process.stderr]
    return process.wait(timeout=120), lines


def assert_nothing_left(workspace: Path) -> None:
    """The old artifact whole, nothing else in its folder, no temporary file or process anywhere."""
    assert files_in(workspace / "out") == old_files()
    assert sorted(os.listdir(workspace / "out")) == sorted(ARTIFACT)
    time.sleep(0.5)  # a child that was signalled may take a moment to go; an orphan runs on for seconds
    assert leftover_processes(str(workspace / "tmp")) == []


@pytest.mark.parametrize(
    "stage",
    [pytest.param(stage, marks=[] if stage in ("aten", "vmfb") else pytest.mark.fuzz) for stage in STAGES],
)
def test_sigkill_at_each_stage(workspace, stage):
    code, _ = interrupted_compile(workspace, stage, signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert_nothing_left(workspace)
    # A killed compile cannot clean up after itself: its private TMPDIR may hold iree-compile's
    # folder. The next compile removes what dead compiles left there.
    subprocess.run(compile_command(workspace, "-q"), env=environment(workspace), check=True)
    assert kiln_temporaries(workspace / "tmp") == []
    assert sorted(os.listdir(workspace / "out")) == sorted(ARTIFACT)


@pytest.mark.parametrize(
    "stage",
    [pytest.param(stage, marks=[] if stage in ("prims", "vmfb") else pytest.mark.fuzz) for stage in STAGES],
)
def test_ctrl_c_at_each_stage(workspace, stage):
    code, lines = interrupted_compile(workspace, stage, signal.SIGINT)
    started = next(i for i, line in enumerate(lines) if line.startswith(f"[{STAGES.index(stage) + 1}/"))
    after = lines[started + 1 :]
    assert code == 1
    assert [line for line in after if line] == ["Aborted!"]  # click's one line, no traceback
    assert_nothing_left(workspace)
    assert kiln_temporaries(workspace / "tmp") == []


def run_save_child(source: Path, output: Path, fault: str, count: int = 1) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(HERE / "save_child.py"), str(source), str(output), fault, str(count)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, preexec_fn=default_sigint)


def load_outcome(vmfb: Path) -> str:
    """"old", "new" (the artifact's results are the old or the new model's), or the error's first line."""
    x = torch.from_numpy(np.load(artifact("mlp-external").inputs[0]))
    try:
        result = kiln.load(vmfb)(x)
    except KilnError as error:
        return str(error).splitlines()[0]
    for name, label in (("other-external", "old"), ("mlp-external", "new")):
        if torch.equal(result, kiln.load(artifact(name).vmfb)(x)):
            return label
    return "WRONG"


@pytest.mark.parametrize("renames", [1, 2, 3])
def test_sigkill_between_renames(workspace, renames):
    """Killed after 1 or 2 of the 3 renames, the set is mixed: load names the file that does not match
    (the .irpa, then the .vmfb). After 3 the new artifact is whole. Never a wrong result."""
    result = run_save_child(artifact("mlp-external").vmfb, workspace / "out" / "m.vmfb", "kill-after-renames", renames)
    assert result.returncode == -signal.SIGKILL
    outcome = load_outcome(workspace / "out" / "m.vmfb")
    expected = {1: r"m\.irpa does not match its manifest", 2: r"m\.vmfb does not match its manifest", 3: "^new$"}
    assert re.search(expected[renames], outcome), outcome
    hidden = [name for name in os.listdir(workspace / "out") if name.startswith(".")]
    assert len(hidden) == 3 - renames  # the temporaries not yet renamed; the next save removes them
    assert run_save_child(artifact("mlp-external").vmfb, workspace / "out" / "m.vmfb", "loop", 1).returncode == 0
    assert sorted(os.listdir(workspace / "out")) == sorted(ARTIFACT)
    assert load_outcome(workspace / "out" / "m.vmfb") == "new"


def test_ctrl_c_during_the_renames_waits_for_them(workspace):
    """Ctrl-C between two renames is held until the third is done: the new artifact is whole."""
    result = run_save_child(artifact("mlp-external").vmfb, workspace / "out" / "m.vmfb", "interrupt-after-renames", 1)
    assert result.returncode == -signal.SIGINT and result.stderr.rstrip().endswith("KeyboardInterrupt")
    assert load_outcome(workspace / "out" / "m.vmfb") == "new"
    assert sorted(os.listdir(workspace / "out")) == sorted(ARTIFACT)


def test_sigkill_while_writing(workspace):
    result = run_save_child(artifact("mlp-external").vmfb, workspace / "out" / "m.vmfb", "kill-while-writing")
    assert result.returncode == -signal.SIGKILL
    assert files_in(workspace / "out") == old_files()
    assert run_save_child(artifact("mlp-external").vmfb, workspace / "out" / "m.vmfb", "loop", 1).returncode == 0
    assert sorted(os.listdir(workspace / "out")) == sorted(ARTIFACT)


def test_file_size_limit_during_save(workspace):
    """A file may not grow past 64 KiB (the .irpa is 104 KiB): a KilnError, the old artifact kept."""
    result = run_save_child(artifact("mlp-external").vmfb, workspace / "out" / "m.vmfb", "file-size-limit", 64 << 10)
    assert result.returncode == 3, result.stderr
    assert result.stdout.strip().startswith("[save] cannot write the artifact")
    assert "out of disk space" in result.stdout and "nothing was replaced" in result.stdout
    assert_nothing_left(workspace)


def test_file_size_limit_on_the_command_line(workspace):
    """The CLI with the same limit: iree-compile reaches it first; one error, exit 1, the old artifact kept."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

    result = subprocess.run(
        compile_command(workspace, "-q"), capture_output=True, text=True, env=environment(workspace), preexec_fn=limit
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: [vmfb] iree-compile stopped: a file it wrote reached the file-size limit")
    assert "Traceback" not in result.stderr
    assert_nothing_left(workspace)


def test_output_is_a_directory(workspace):
    (workspace / "out" / "dir.vmfb").mkdir()
    started = time.monotonic()
    result = subprocess.run([KILN, "compile", str(workspace / "model.py"), "-o", str(workspace / "out" / "dir.vmfb")],
                            capture_output=True, text=True, env=environment(workspace))  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: [save] cannot write the artifact to {workspace}/out/dir.vmfb: " \
        f"{workspace}/out/dir.vmfb is a directory"  # fmt: skip
    assert time.monotonic() - started < 60  # refused before compiling
    assert not (workspace / "out" / "dir.stages").exists()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("out/m.json", "its manifest and weights take the .json and .irpa names"),
        ("model.py/m.vmfb", "model.py is not a directory"),
    ],
)
def test_output_path_refused_before_compiling(workspace, name, expected):
    with pytest.raises(KilnError, match=expected):
        check_output(workspace / name)


def test_saved_files_have_the_usual_permissions(workspace):
    """Readable by whoever may read the folder (0666 less the umask), as a plain write would make them:
    the temporary files they were renamed from used to leave them 0600."""
    result = run_save_child(artifact("mlp-external").vmfb, workspace / "fresh" / "m.vmfb", "loop", 1)
    assert result.returncode == 0, result.stderr
    umask = os.umask(0)
    os.umask(umask)
    for name in ARTIFACT:
        assert (workspace / "fresh" / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


def test_missing_output_folder_is_made(workspace):
    result = run_save_child(artifact("mlp-external").vmfb, workspace / "new" / "deeper" / "m.vmfb", "loop", 1)
    assert result.returncode == 0, result.stderr
    assert load_outcome(workspace / "new" / "deeper" / "m.vmfb") == "new"


def test_read_only_output_folder(workspace):
    """A read-only folder (a read-only bind mount: root ignores permissions): refused before compiling."""
    if os.geteuid() != 0:
        (workspace / "out").chmod(0o555)
        command = " ".join(compile_command(workspace, "-q"))
    elif shutil.which("unshare") is None:
        pytest.skip("root without unshare: no way to make a read-only folder here")
    else:
        out = workspace / "out"
        command = f"mount --bind {out} {out} && mount -o remount,bind,ro {out} && {' '.join(compile_command(workspace, '-q'))}"
        command = f"unshare -rm sh -c {json.dumps(command)}"
    result = subprocess.run(command, shell=True, capture_output=True, text=True, env=environment(workspace))
    if "unshare" in command and "Operation not permitted" in result.stderr:
        pytest.skip(f"no user namespaces here: {result.stderr.strip()}")
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip() == f"error: [save] cannot write the artifact to {workspace}/out/m.vmfb: " \
        f"{workspace}/out is not writable"  # fmt: skip
    assert_nothing_left(workspace)


def test_two_saves_and_a_loader_at_once(workspace):
    """Two processes save different artifacts to one path, 20 times each, while this one loads it
    over and over: every load sees one whole artifact, never a mixture, never an error."""
    output = workspace / "out" / "m.vmfb"
    command = [sys.executable, str(HERE / "save_child.py"), "", str(output), "loop", "20"]
    children = [
        subprocess.Popen([*command[:2], str(artifact(name).vmfb), *command[3:]], stdout=subprocess.PIPE, text=True)
        for name in ("mlp-external", "other-external")
    ]
    outcomes = []
    while any(child.poll() is None for child in children):
        outcomes.append(load_outcome(output))
    for child in children:
        assert child.wait() == 0 and child.stdout.read().count("saved") == 20  # type: ignore[union-attr]
    outcomes.append(load_outcome(output))
    assert set(outcomes) <= {"old", "new"}, [o for o in outcomes if o not in ("old", "new")][:3]
    assert sorted(os.listdir(workspace / "out")) == sorted(ARTIFACT)
    print(f"\n{len(outcomes)} loads while two processes saved 40 times: {sorted(set(outcomes))}")


def test_two_compiles_at_once(workspace):
    """Two `kiln compile`s of different models to one output: the artifact left is one of them, whole."""
    (workspace / "other.py").write_text(MODEL.replace("mlp(0)", "mlp(1)"))
    commands = [compile_command(workspace, "-q"), compile_command(workspace, "-q", "--dump-dir", str(workspace / "d2"))]
    commands[1][2] = str(workspace / "other.py")
    children = [subprocess.Popen(command, env=environment(workspace), stderr=subprocess.PIPE) for command in commands]
    assert [child.wait(timeout=600) for child in children] == [0, 0]
    assert load_outcome(workspace / "out" / "m.vmfb") in ("old", "new")
    assert sorted(os.listdir(workspace / "out")) == sorted(ARTIFACT)
    manifest = json.loads((workspace / "out" / "m.json").read_text())
    for kind, digest in manifest["files"].items():
        assert hashlib.sha256((workspace / "out" / f"m.{kind}").read_bytes()).hexdigest() == digest["sha256"]


def test_full_disk(workspace):
    """A 200 KiB tmpfs holding the old artifact (136 KiB) has no room for a second: ENOSPC during the
    save, a KilnError, and the old artifact as it was. (Mounted in a user namespace; skipped without.)"""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare here to mount a small tmpfs")
    disk = workspace / "disk"
    disk.mkdir()
    save = [sys.executable, str(HERE / "save_child.py"), str(artifact("mlp-external").vmfb), str(disk / "m.vmfb"), "loop", "1"]
    script = (
        f"mount -t tmpfs -o size=200k tmpfs {disk} && cp {workspace}/out/m.* {disk}/ && "
        f"{' '.join(save)}; echo exit=$?; ls -a {disk}; sha256sum {disk}/m.*"
    )
    result = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    if "exit=" not in result.stdout:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()[-200:]}")
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[save] cannot write the artifact") and "out of disk space" in lines[0], result.stdout
    assert lines[1] == "exit=3"
    assert sorted(lines[2:7]) == sorted([".", "..", *ARTIFACT])  # no temporary left
    hashes = {Path(line.split()[1]).name: line.split()[0] for line in lines[7:]}
    assert hashes == {name: hashlib.sha256(data).hexdigest() for name, data in old_files().items()}
