"""Run model-generated code in a sandboxed subprocess, never in this process.

Threat model: generated code is untrusted (README "Sandbox"). Layers, outermost first:

1. An OS boundary (:mod:`llm_methods.mas2.isolation`): bubblewrap or user namespaces; no
   network, no other process, no file of the machine but the interpreter's and the system
   libraries (read-only) and an empty working directory (the only writable place). Without one,
   :func:`run_code` refuses (:class:`SandboxUnavailable`) unless ``allow_unisolated=True``.
2. A separate ``python -I -S -B`` process with an emptied environment, a wall-clock timeout (its
   process group is killed), rlimits set before the program runs (address space, CPU seconds,
   file size, open files, processes, no core files), and stdout/stderr read up to
   ``max_output`` bytes each (more ends the run: status ``"output"``).
3. A PEP 578 audit hook installed before the program: it ends the process on process creation,
   loading ``_posixsubprocess``/``_ctypes``/subinterpreter/``_test*`` modules (no audit event
   guards what they do), sockets, tracing/``gc`` introspection, code rewriting, a
   write/link/truncate/... outside the working directory, a read outside it and the
   interpreter's files, and an ``open`` of any directory but the working directory (so a
   ``dir_fd``, which the ``open`` event does not carry, can only be the working directory's).
   ``os.mknod``/``os.mkfifo`` (no audit event) are removed from ``posix`` first. The hook keeps
   its state in closure cells of a function the program cannot reach (no module globals,
   builtins captured at install time), and fails closed. It is a layer, not the boundary.

A violation is reported, never silent: :attr:`SandboxResult.status` is ``"timeout"``,
``"memory"``, ``"forbidden"`` or ``"output"`` and :meth:`SandboxResult.check` raises
:class:`SandboxError`. Linux only.
"""

from __future__ import annotations

import builtins
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from llm_methods.mas2.isolation import DEVICES, PROG, WORK, SandboxUnavailable, choose, command
from llm_methods.mas2.isolation import interpreter as _interpreter

__all__ = [
    "MAX_OUTPUT",
    "SandboxError",
    "SandboxResult",
    "SandboxUnavailable",
    "run_code",
    "run_tests",
]

FORBIDDEN_EXIT = 86
MAX_OUTPUT = 1 << 20  # bytes kept of each of stdout and stderr; more ends the run
MAX_FILES = 64  # RLIMIT_NOFILE
_FORBIDDEN_EVENTS = (
    "os.fork",
    "os.forkpty",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.system",
    "os.startfile",
    "subprocess.Popen",
    "os.kill",
    "os.killpg",
    "signal.pthread_kill",
    "pty.spawn",
    "os.putenv",
    "os.unsetenv",
    "os.chdir",
    "resource.setrlimit",
    "resource.prlimit",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "sys.settrace",
    "sys.setprofile",
    "sys._current_frames",
    "syslog.openlog",
    "syslog.syslog",
)
_BLOCKED_PREFIXES = (
    "socket.",
    "ctypes.",
    "_ctypes.",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
    "poplib.",
    "imaplib.",
    "telnetlib.",
    "nntplib.",
    "webbrowser.",
)
# events whose path arguments (positions) must lie in the working directory
_WRITE_PATHS = (
    ("os.remove", (0,)),
    ("os.rename", (0, 1)),
    ("os.rmdir", (0,)),
    ("os.mkdir", (0,)),
    ("shutil.rmtree", (0,)),
    ("os.chmod", (0,)),
    ("os.chown", (0,)),
    ("os.link", (0, 1)),
    ("os.symlink", (1,)),
    ("os.truncate", (0,)),
    ("os.utime", (0,)),
    ("os.setxattr", (0,)),
    ("os.removexattr", (0,)),
)
# events whose path arguments must lie in the working directory or the interpreter's files
_READ_PATHS = (
    ("os.listdir", (0,)),
    ("os.scandir", (0,)),
    ("os.getxattr", (0,)),
    ("os.listxattr", (0,)),
    ("glob.glob", (0,)),
)
# modules whose loading ends the run (the ``import`` event fires whenever an extension module is
# loaded, by any route): ``_posixsubprocess.fork_exec`` starts processes without an audit event,
# the others give raw memory, C-API or interpreter access; ``posix`` is re-imported only to undo
# the removals of ``_UNAUDITED`` below.
_BLOCKED_IMPORTS = (
    "_posixsubprocess",
    "_ctypes",
    "_xxsubinterpreters",
    "_interpreters",
    "_xxinterpchannels",
    "_interpchannels",
    "_interpqueues",
    "_testcapi",
    "_testinternalcapi",
    "_testmultiphase",
    "_testsinglephase",
    "_testbuffer",
    "_testimportmultiple",
    "_testclinic",
    "posix",
)
# functions of ``posix`` that raise no audit event but create files: removed before the program
_UNAUDITED = ("mknod", "mkfifo")
_EXCEPTIONS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

# Runs in the child before the program (argv: program, limits..., audit, config json). The only
# names it leaves in __main__ are ``_code`` and ``_sandbox_exec``; the hook reads none of them.
_PREAMBLE = r"""
def _sandbox_setup():
    import json, posix, resource, sys
    prog, mem, cpu, fsize, nofile, audit, config = sys.argv[1:8]
    R = resource
    for lim, val in ((R.RLIMIT_AS, mem), (R.RLIMIT_CPU, cpu), (R.RLIMIT_FSIZE, fsize),
                     (R.RLIMIT_CORE, 0), (R.RLIMIT_NOFILE, nofile), (R.RLIMIT_NPROC, 0)):
        try:
            R.setrlimit(lim, (int(val), int(val)))
        except (ValueError, OSError):  # NPROC below the current count: the hook still blocks
            pass
    with open(prog) as f:
        code = compile(f.read(), prog, "exec")
    cfg = json.loads(config)
    sys.argv = [prog]
    if audit == "1":
        for name in cfg["imports"]:  # none is loaded here; if one were, it goes out of reach
            if name != "posix":
                sys.modules.pop(name, None)
        for name in cfg["unaudited"]:
            if hasattr(posix, name):
                delattr(posix, name)
        sys.addaudithook(_make_hook(posix.getcwd(), tuple(cfg["reads"]), tuple(cfg["writes"]),
                                    frozenset(cfg["block"]), tuple(cfg["prefixes"]),
                                    tuple(tuple(e) for e in cfg["write_paths"]),
                                    tuple(tuple(e) for e in cfg["read_paths"]),
                                    cfg["write_flags"], frozenset(cfg["imports"]), cfg["exit"]))
    return code

def _make_hook(home, reads, writes, block, prefixes, write_paths, read_paths, write_flags,
               imports, code, _exit=__import__("posix")._exit, _write=__import__("posix").write,
               _lstat=__import__("posix").lstat, _stat=__import__("posix").stat,
               _readlink=__import__("posix").readlink,
               _type=type, _len=len, _str=str, _bytes=bytes, _int=int, _none=type(None),
               _OSError=OSError, _BaseException=BaseException):
    reads, writes = (home, *reads), (home, *writes)

    def resolve(path):  # like os.path.realpath, from captured builtins only
        if _type(path) is _bytes:
            path = path.decode("utf-8", "surrogateescape")
        elif _type(path) is not _str:
            return None
        if not path.startswith("/"):
            path = home + "/" + path
        todo, out, hops = path.split("/")[::-1], [], 0
        while todo:
            part = todo.pop()
            if part == "" or part == ".":
                continue
            if part == "..":
                if out:
                    out.pop()
                continue
            cand = "/" + "/".join(out + [part])
            try:
                mode = _lstat(cand).st_mode
            except _OSError:
                out.append(part)
                continue
            if mode & 0o170000 == 0o120000:
                hops += 1
                if hops > 40:
                    return None
                target = _readlink(cand)
                if target.startswith("/"):
                    out = []
                todo.extend(target.split("/")[::-1])
            else:
                out.append(part)
        return "/" + "/".join(out)

    def inside(path, roots):
        if _type(path) is _int or _type(path) is _none:  # an open fd / the working directory
            return True
        real = resolve(path)
        if real is None:
            return False
        for root in roots:
            if real == root or real.startswith(root + "/"):
                return True
        return False

    def other_dir(path):  # a directory but the working directory: a dir_fd must be home's
        if _type(path) is not _str and _type(path) is not _bytes:
            return False
        real = resolve(path)
        if real is None:
            return True
        if real == home:
            return False
        try:
            return _stat(real).st_mode & 0o170000 == 0o040000
        except _OSError:
            return False

    def hook(event, args):
        try:
            bad = event in block or event.startswith(prefixes)
            if event == "import":
                bad = args[0] in imports
            elif event == "open":
                write = _type(args[2]) is _int and args[2] & write_flags
                bad = not inside(args[0], writes if write else reads) or other_dir(args[0])
            elif event == "object.__setattr__":
                bad = args[1] in ("__code__", "__defaults__", "__kwdefaults__")
            else:
                for table, roots in ((write_paths, writes), (read_paths, reads)):
                    for name, positions in table:
                        if name == event:
                            for i in positions:
                                if i < _len(args) and not inside(args[i], roots):
                                    bad = True
        except _BaseException:
            bad = True
        if bad:
            _write(2, b"\nsandbox: forbidden: " + event.encode("ascii", "replace") + b"\n")
            _exit(code)

    return hook

_code = _sandbox_setup()
del _sandbox_setup, _make_hook
exec(_code, {"__name__": "__main__", "__builtins__": __builtins__})
"""


class SandboxError(RuntimeError):
    """A sandboxed run broke a limit (timeout, memory, output) or tried something forbidden."""


@dataclass(frozen=True)
class SandboxResult:
    status: str  # ok | error | timeout | memory | forbidden | output
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    isolation: str = "none"  # bwrap | userns | none

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def violation(self) -> bool:
        return self.status in ("timeout", "memory", "forbidden", "output")

    def feedback(self) -> str:
        """How the run failed, in a fixed vocabulary (status, builtin exception name): safe to
        put in a prompt to a remote model, unlike the program's own output, which may carry
        whatever the program read."""
        if self.status != "error":
            return "it passed" if self.ok else f"the run was stopped ({self.status})"
        last = (self.stderr.strip().splitlines() or [""])[-1]
        name = last.split(":", 1)[0].strip()
        return f"it raised {name}" if name in _EXCEPTIONS else "it raised an exception"

    def check(self) -> SandboxResult:
        """Raise :class:`SandboxError` with one clear line on a violation; else return self."""
        if self.violation:
            tail = self.stderr.strip().splitlines()[-1:] or [""]
            raise SandboxError(f"sandbox {self.status}: {tail[0][:200]}".rstrip(": "))
        return self


def _config(prog: str) -> str:
    """The hook's configuration: read roots (the interpreter's prefixes, devices, the program's
    read-only folder ``prog``, so that a traceback can quote it), blocked events."""
    prefixes = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
    exe = _interpreter()
    if not any(exe.startswith(p + os.sep) for p in prefixes):
        prefixes.add(os.path.dirname(os.path.dirname(exe)))
    reads = sorted(prefixes) + list(DEVICES) + [prog]
    return json.dumps(
        {
            "reads": reads,
            "writes": ["/dev/null"],
            "block": _FORBIDDEN_EVENTS,
            "prefixes": _BLOCKED_PREFIXES,
            "write_paths": _WRITE_PATHS,
            "read_paths": _READ_PATHS,
            "write_flags": _WRITE_FLAGS,
            "imports": _BLOCKED_IMPORTS,
            "unaudited": _UNAUDITED,
            "exit": FORBIDDEN_EXIT,
        }
    )


def _communicate(
    proc: subprocess.Popen, timeout: float, max_output: int
) -> tuple[bytes, bytes, str | None]:
    """Read both pipes until EOF; stop at ``timeout`` or at ``max_output`` bytes on either."""
    bufs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    sel = selectors.DefaultSelector()
    for f in bufs:
        sel.register(f, selectors.EVENT_READ)  # type: ignore[arg-type]
    deadline, stop = time.monotonic() + timeout, None
    while sel.get_map() and stop is None:
        left = deadline - time.monotonic()
        if left <= 0:
            stop = "timeout"
            break
        for key, _ in sel.select(min(left, 0.5)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            buf = bufs[key.fileobj]  # type: ignore[index]
            buf += chunk[: max_output + 1 - len(buf)]
            if len(buf) > max_output:
                stop = "output"
    sel.close()
    if stop is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:  # closed its pipes but still runs
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        stop = stop or "timeout"
    out, err = (bytes(bufs[f][:max_output]) for f in (proc.stdout, proc.stderr))
    return out, err, stop


def run_code(
    code: str,
    timeout: float = 5.0,
    memory_mb: int = 512,
    file_mb: int = 8,
    stdin: str = "",
    *,
    isolation: str = "auto",
    allow_unisolated: bool = False,
    max_output: int = MAX_OUTPUT,
    audit: bool = True,
) -> SandboxResult:
    """Run ``code`` as ``__main__`` in a sandboxed ``python -I -S`` subprocess.

    ``isolation``: ``auto`` (the best OS boundary here) | ``bwrap`` | ``userns`` | ``none``;
    without an OS boundary this raises :class:`SandboxUnavailable` unless ``allow_unisolated``.
    ``audit=False`` leaves out the audit hook (tests of the OS boundary alone).
    """
    mode = choose(isolation, allow_unisolated)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mas2-sandbox-") as tmp:
        work, progdir = Path(tmp, "work"), Path(tmp, "prog")
        work.mkdir()
        progdir.mkdir()
        (progdir / "program.py").write_text(code)
        (progdir / "stdin").write_text(stdin)
        inside = mode != "none"
        prog = f"{PROG}/program.py" if inside else str(progdir / "program.py")
        home = WORK if inside else str(work)
        limits = [
            str(memory_mb * 2**20),
            str(max(1, int(timeout) + 1)),
            str(file_mb * 2**20),
            str(MAX_FILES),
        ]
        argv = [
            _interpreter(),
            "-I",
            "-S",
            "-B",
            "-c",
            _PREAMBLE,
            prog,
            *limits,
            "1" if audit else "0",
            _config(PROG if inside else os.path.realpath(progdir)),
        ]
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": home, "TMPDIR": home}
        cmd = command(mode, Path(tmp), work, progdir, argv, env)
        with open(progdir / "stdin", "rb") as fin:
            proc = subprocess.Popen(
                cmd,
                cwd=work,
                env=env,
                stdin=fin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        try:
            raw_out, raw_err, stop = _communicate(proc, timeout, max_output)
        finally:
            for f in (proc.stdout, proc.stderr):
                f.close()  # type: ignore[union-attr]
    out = raw_out.decode("utf-8", "replace")
    err = raw_err.decode("utf-8", "replace")
    rc, seconds = proc.returncode, time.perf_counter() - start
    if stop == "timeout":
        err += f"\nsandbox: timed out after {timeout:g} s"
        return SandboxResult("timeout", None, out, err, seconds, mode)
    if stop == "output":
        err += f"\nsandbox: output over {max_output} bytes"
        return SandboxResult("output", None, out, err, seconds, mode)
    if rc == FORBIDDEN_EXIT and "sandbox: forbidden:" in err:
        status = "forbidden"
    elif "MemoryError" in err or (rc == -signal.SIGSEGV and "memory" in err.lower()):
        status = "memory"
    elif rc in (-signal.SIGXCPU, -signal.SIGKILL):
        status = "timeout"
    else:
        status = "ok" if rc == 0 else "error"
    return SandboxResult(status, rc, out, err, seconds, mode)


def run_tests(
    solution: str, test: str, entry_point: str, timeout: float = 5.0, **kwargs: object
) -> SandboxResult:
    """HumanEval-style check: ``solution`` + ``test`` (defines ``check``) + ``check(entry_point)``."""
    program = f"{solution}\n\n{test}\n\ncheck({entry_point})\n"
    return run_code(program, timeout=timeout, **kwargs)  # type: ignore[arg-type]
