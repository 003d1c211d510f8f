"""Run model-generated code in a sandboxed subprocess, never in this process.

Each run gets a fresh temporary directory as its working directory, a wall-clock timeout (the
process group is killed), ``resource.setrlimit`` limits set in the child before the program runs (address space, CPU seconds, file size,
no core files, no new processes) and an audit hook (PEP 578, installed before the program runs,
cannot be removed) that ends the process on any attempt to create a process (fork / exec / spawn
/ subprocess / system), open a network socket connection, load native code through ctypes or
write, remove or rename a file outside its temporary directory.
The environment is emptied (no proxies, no PYTHONPATH); the interpreter runs isolated (``-I -S``).
A violation is reported, never silent: :attr:`SandboxResult.status` is ``"timeout"``,
``"memory"`` or ``"forbidden"`` and :meth:`SandboxResult.check` raises :class:`SandboxError`.
Linux / POSIX only (``resource``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SandboxError", "SandboxResult", "run_code", "run_tests"]

FORBIDDEN_EXIT = 86
_FORBIDDEN_EVENTS = (
    "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
    "subprocess.Popen", "os.kill", "os.killpg", "pty.spawn", "socket.connect", "socket.bind",
    "socket.sendto", "socket.sendmsg", "socket.getaddrinfo", "ctypes.dlopen", "ctypes.dlsym",
    "ctypes.cdata", "_posixsubprocess.fork_exec", "os.putenv", "os.chdir",
)  # fmt: skip
# runs in the child before the program: audit hook first, then the program file under __main__
_PREAMBLE = f"""
import os, sys, resource
_mem, _cpu, _fsize = (int(x) for x in sys.argv[2:5])
resource.setrlimit(resource.RLIMIT_AS, (_mem, _mem))
resource.setrlimit(resource.RLIMIT_CPU, (_cpu, _cpu))
resource.setrlimit(resource.RLIMIT_FSIZE, (_fsize, _fsize))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
if os.getuid() != 0:  # root ignores NPROC; the audit hook blocks process creation anyway
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
del resource
_BLOCK = {_FORBIDDEN_EVENTS!r}
_HOME = os.path.realpath(os.getcwd()) + os.sep
_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATHS = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "shutil.rmtree", "os.chmod")
def _outside(path, _real=os.path.realpath, _fs=os.fsdecode):
    return isinstance(path, (str, bytes)) and not _real(_fs(path)).startswith(_HOME)
def _hook(event, args, _w=os.write, _exit=os._exit):
    bad = event in _BLOCK
    if event == "open" and len(args) > 2 and isinstance(args[2], int) and args[2] & _WRITE:
        bad = _outside(args[0])
        event = "write outside the sandbox directory"
    elif event in _PATHS and args:
        bad = _outside(args[0])
    if bad:
        _w(2, ("\\nsandbox: forbidden: " + event + "\\n").encode())
        _exit({FORBIDDEN_EXIT})
sys.addaudithook(_hook)
_path = sys.argv[1]
with open(_path) as _f:
    _src = _f.read()
del _f
sys.argv = [_path]
exec(compile(_src, _path, "exec"), {{"__name__": "__main__", "__builtins__": __builtins__}})
"""


class SandboxError(RuntimeError):
    """A sandboxed run broke a limit (timeout, memory) or tried something forbidden."""


@dataclass(frozen=True)
class SandboxResult:
    status: str  # ok | error | timeout | memory | forbidden
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def violation(self) -> bool:
        return self.status in ("timeout", "memory", "forbidden")

    def check(self) -> SandboxResult:
        """Raise :class:`SandboxError` with one clear line on a violation; else return self."""
        if self.violation:
            tail = self.stderr.strip().splitlines()[-1:] or [""]
            raise SandboxError(f"sandbox {self.status}: {tail[0][:200]}".rstrip(": "))
        return self


def run_code(
    code: str,
    timeout: float = 5.0,
    memory_mb: int = 512,
    file_mb: int = 8,
    stdin: str = "",
) -> SandboxResult:
    """Run ``code`` as ``__main__`` in a sandboxed ``python -I -S`` subprocess."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mas2-sandbox-") as tmp:
        prog = Path(tmp) / "program.py"
        prog.write_text(code)
        cpu = max(1, int(timeout) + 1)
        limits = [str(memory_mb * 2**20), str(cpu), str(file_mb * 2**20)]
        # limits are set by the preamble, before the program (no preexec_fn: thread-safe)
        cmd = [sys.executable, "-I", "-S", "-B", "-c", _PREAMBLE, str(prog), *limits]
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": tmp, "TMPDIR": tmp}
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)  # fmt: skip
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
            return SandboxResult("timeout", None, out, err + f"\nsandbox: timed out after "
                                 f"{timeout:g} s", time.perf_counter() - start)  # fmt: skip
    rc = proc.returncode
    if rc == FORBIDDEN_EXIT and "sandbox: forbidden:" in err:
        status = "forbidden"
    elif "MemoryError" in err or (rc == -signal.SIGSEGV and "memory" in err.lower()):
        status = "memory"
    elif rc in (-signal.SIGXCPU, -signal.SIGKILL):
        status = "timeout"
    else:
        status = "ok" if rc == 0 else "error"
    return SandboxResult(status, rc, out, err, time.perf_counter() - start)


def run_tests(solution: str, test: str, entry_point: str, timeout: float = 5.0) -> SandboxResult:
    """HumanEval-style check: ``solution`` + ``test`` (defines ``check``) + ``check(entry_point)``."""
    program = f"{solution}\n\n{test}\n\ncheck({entry_point})\n"
    return run_code(program, timeout=timeout)
