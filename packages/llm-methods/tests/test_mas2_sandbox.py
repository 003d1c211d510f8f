"""MAS² sandbox: every escape found in review is a regression test, on each layer on its own.

Layers: ``auto`` (the OS boundary + the audit hook, the default), each OS boundary that works on
this machine without the hook (``audit=False``), and the hook alone (``isolation="none"``).
Every escape must fail on every layer. The escapes (issue 28) all succeeded with the sandbox of
commit 39884a9 (audit hook reading ``_BLOCK``/``_HOME`` from ``__main__``, no read confinement,
no output cap).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from llm_methods.mas2 import isolation
from llm_methods.mas2.sandbox import (
    MAX_OUTPUT,
    SandboxError,
    SandboxUnavailable,
    run_code,
)

LAYERS = [
    pytest.param({"isolation": "auto"}, id="auto"),
    *(pytest.param({"isolation": m, "audit": False}, id=f"{m}-only") for m in isolation.MODES),
    pytest.param({"isolation": "none", "allow_unisolated": True}, id="hook-only"),
]
SECRET = "s3cr3t-token-8271"


def _run(code: str, layer: dict, **kw: object):  # type: ignore[no-untyped-def]
    mode = layer["isolation"]
    if mode in isolation.MODES and mode not in isolation.available():
        pytest.skip(f"OS boundary {mode!r} is not available on this machine")
    if mode == "auto" and not isolation.available():
        layer = {**layer, "allow_unisolated": True}
    return run_code(code, timeout=3.0, memory_mb=256, **layer, **kw)  # type: ignore[arg-type]


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text("original")
    return path


@pytest.mark.parametrize("layer", LAYERS)
def test_rewritten_hook_state_does_not_unlock_system(layer: dict, tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    code = (
        "import __main__, os\n"
        "for name in ('_BLOCK', '_HOME', '_PATHS', '_WRITE'):\n"
        "    setattr(__main__, name, () if name != '_HOME' else '/')\n"
        f"os.system('echo pwned > {target}')\n"
        f"open({str(target)!r}, 'w').write('pwned')\n"
    )
    _run(code, layer)
    assert not target.exists()


@pytest.mark.parametrize("layer", LAYERS)
def test_hard_link_then_write_leaves_outside_file(layer: dict, victim: Path) -> None:
    code = f"import os\nos.link({str(victim)!r}, 'l')\nopen('l', 'w').write('pwned')\n"
    _run(code, layer)
    assert victim.read_text() == "original"


@pytest.mark.parametrize("layer", LAYERS)
def test_truncate_outside_file(layer: dict, victim: Path) -> None:
    _run(f"import os\nos.truncate({str(victim)!r}, 0)\n", layer)
    assert victim.read_text() == "original"


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("target", ["secret", "/etc/passwd"])
def test_reads_are_confined(layer: dict, target: str, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    path = str(secret) if target == "secret" else target
    code = (
        f"import os\ntry:\n    print(open({path!r}).read())\nexcept OSError as e:\n"
        f"    print('no', e)\nprint(os.listdir({str(tmp_path)!r}))\n"
    )
    res = _run(code, layer)
    seen = res.stdout + res.stderr
    assert SECRET not in seen and "root:" not in seen and "['secret.txt']" not in seen


@pytest.mark.parametrize("layer", LAYERS)
def test_output_is_capped(layer: dict) -> None:
    start = time.perf_counter()
    res = _run("import sys\nsys.stdout.write('x' * 60_000_000)\n", layer, max_output=1 << 16)
    assert res.status == "output" and res.violation
    assert len(res.stdout) <= 1 << 16
    assert time.perf_counter() - start < 10.0
    with pytest.raises(SandboxError, match="sandbox output"):
        res.check()


@pytest.mark.parametrize("layer", LAYERS)
def test_no_network_to_this_machine(layer: dict) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.3)
    port = server.getsockname()[1]
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 2).sendall(b'x')\n"
    try:
        res = _run(code, layer)
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
    assert not res.ok


@pytest.mark.parametrize("layer", LAYERS)
def test_environment_is_scrubbed(layer: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAS2_TEST_SECRET", SECRET)
    res = _run("import os\nprint(dict(os.environ))\n", layer)
    assert res.ok, res
    assert SECRET not in res.stdout


@pytest.mark.parametrize(
    "code",
    [
        "import gc\nprint(len(gc.get_objects()))",
        "import sys\nsys.settrace(lambda *a: None)",
        "import builtins\nbuiltins.type = lambda x: int\nprint(open('/etc/passwd').read())",
        "import os\nos.chdir('/')\nprint(open('etc/passwd').read())",
    ],
)
def test_hook_state_is_out_of_reach(code: str) -> None:
    """The hook on its own: introspection, tracing and patched builtins do not switch it off."""
    res = run_code(code, timeout=3.0, isolation="none", allow_unisolated=True)
    assert res.status == "forbidden", res
    assert "root:" not in res.stdout


def test_unisolated_needs_explicit_consent(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SandboxUnavailable, match="pass --allow-unisolated"):
        run_code("print(1)", isolation="none")
    monkeypatch.setattr(isolation, "available", lambda: ())
    with pytest.raises(SandboxUnavailable, match="no OS-level isolation"):
        run_code("print(1)")
    assert run_code("print(1)", allow_unisolated=True).stdout.strip() == "1"


def test_os_boundary_used_by_default_where_available() -> None:
    res = run_code("import os\nprint(os.getcwd())", timeout=3.0, allow_unisolated=True)
    assert res.ok, res
    if isolation.available():
        assert res.isolation == isolation.available()[0] and res.stdout.strip() == "/work"
    else:
        assert res.isolation == "none"


def test_output_under_the_cap_is_kept_whole() -> None:
    res = run_code(
        "print('y' * 1000)\nimport sys\nprint('e' * 10, file=sys.stderr)",
        timeout=3.0,
        allow_unisolated=True,
    )
    assert res.ok and res.stdout == "y" * 1000 + "\n" and res.stderr.strip() == "e" * 10
    assert MAX_OUTPUT >= 1 << 20


# Review of the sandbox (issue h17): holes that raised no audit event or that the hook misjudged.
# Each succeeded before the fix in hook-only mode (the OS boundaries held).
_SPAWN = {
    "fork_exec": (
        "import _posixsubprocess, os\n"
        "argv = [b'/bin/sh', b'-c', b'echo pwned > {target}']\n"
        "_posixsubprocess.fork_exec(argv, [b'/bin/sh'], True, (), None, None, -1, -1, -1, -1,"
        " -1, -1, *os.pipe(), False, False, -1, None, None, None, -1, None, False)\n"
    ),
    "popen": "import subprocess\nsubprocess.Popen(['/bin/sh', '-c', 'echo pwned > {target}'])\n",
    "ctypes": "import ctypes\nctypes.CDLL(None).system(b'echo pwned > {target}')\n",
    "reload-posix": (
        "import sys\ndel sys.modules['posix']\nimport posix\nposix.mkfifo({target!r})\n"
    ),
}


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("attack", sorted(_SPAWN))
def test_no_process_or_ctypes_without_audit_event(layer: dict, attack: str, tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    code = _SPAWN[attack].format(target=str(target)) + "import time\ntime.sleep(0.5)\n"
    res = _run(code, layer)
    time.sleep(0.2)
    assert not target.exists()
    if layer.get("audit", True):  # the hook ends the run at the import itself
        assert res.status == "forbidden", res


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("call", ["os.mkfifo({p!r})", "os.mknod({p!r})"])
def test_mknod_mkfifo_outside(layer: dict, call: str, tmp_path: Path) -> None:
    target = tmp_path / "node"
    res = _run("import os\n" + call.format(p=str(target)) + "\n", layer)
    assert not target.exists() and not res.ok


@pytest.mark.parametrize("layer", LAYERS)
def test_dir_fd_of_an_outside_directory(layer: dict, tmp_path: Path) -> None:
    """A readable outside directory (the interpreter's prefix) as ``dir_fd`` of a create; the
    target's folder does not exist, so nothing is written even where the hook would miss it."""
    code = (
        "import os, sys\n"
        "fd = os.open(sys.base_prefix, os.O_RDONLY)\n"
        "os.close(os.open('no-such-dir-h17/x', os.O_WRONLY | os.O_CREAT, dir_fd=fd))\n"
    )
    res = _run(code, layer)
    assert not res.ok
    if layer.get("audit", True):  # before the fix: FileNotFoundError, the create was allowed
        assert res.status == "forbidden", res


def test_dir_fd_of_a_subdirectory_with_an_outside_link(tmp_path: Path) -> None:
    """The hook alone: a subdirectory fd would make ``link/x`` mean ``sub/link/x``, not ``link/x``."""
    code = (
        "import os\nos.mkdir('sub')\n"
        f"os.symlink({str(tmp_path)!r}, 'sub/link')\n"
        "fd = os.open('sub', os.O_RDONLY)\n"
        "os.close(os.open('link/x', os.O_WRONLY | os.O_CREAT, dir_fd=fd))\n"
    )
    res = run_code(code, timeout=3.0, isolation="none", allow_unisolated=True)
    assert res.status == "forbidden", res
    assert not (tmp_path / "x").exists()


def test_working_directory_fd_and_plain_files_still_work() -> None:
    code = (
        "import os\nfd = os.open('.', os.O_RDONLY)\n"
        "os.close(os.open('a', os.O_WRONLY | os.O_CREAT, dir_fd=fd))\n"
        "os.mkdir('d')\nopen('d/b', 'w').write('1')\nprint(sorted(os.listdir('.')))\n"
    )
    res = run_code(code, timeout=3.0, allow_unisolated=True)
    assert res.ok, res
    assert res.stdout.strip() == "['a', 'd']"


def test_uncaught_exception_is_an_error_in_hook_only_mode() -> None:
    """The traceback quotes the program file: reading it is not a violation (was ``forbidden``)."""
    res = run_code("raise ValueError('x')", timeout=3.0, isolation="none", allow_unisolated=True)
    assert res.status == "error", res
    assert res.feedback() == "it raised ValueError"
