"""The OS-level boundary around generated code: bubblewrap, else user namespaces, else none.

Threat model (README "Sandbox"): code written by a model is untrusted. It runs in a separate
process whose view of the machine is built from scratch:

- ``bwrap``: `bubblewrap <https://github.com/containers/bubblewrap>`_ when it is on ``PATH``
  (``--unshare-all``: new user, mount, PID, IPC, UTS and network namespaces; uid 65534; all
  capabilities dropped; ``--die-with-parent``; a new session).
- ``userns``: the same boundary built by :data:`USERNS_SETUP` (a trusted prologue run by the
  interpreter before anything else) when the kernel allows unprivileged user namespaces:
  ``unshare(2)`` of the user, mount, PID, IPC, UTS and network namespaces; uid/gid 65534 inside;
  a fresh tmpfs root holding read-only binds of the interpreter's prefix and the system library
  directories, the run's empty working directory (read-write, ``/work``) and its program
  (read-only, ``/prog``), ``/dev/{null,zero,random,urandom}``; ``chroot``; ``no_new_privs``;
  the program is ``execve``'d in the new PID namespace (PID 2; PID 1 relays its exit status)
  with a non-zero uid, so the kernel clears its capabilities. The network namespace has only a
  loopback device, and it is down.
- ``none``: no OS boundary (rlimits and the audit hook only);
  :func:`llm_methods.mas2.sandbox.run_code` refuses it unless the caller passes
  ``allow_unisolated=True``.

In both OS modes the program sees no other file of the machine: not ``/etc``, ``/home``,
``/root``, ``/tmp`` nor the project. It can read the interpreter's files and the system
libraries (``/usr/lib``, public content) and write only ``/work``. Shape of a bind list entry:
``(kind, source, target)`` with kind ``ro`` | ``rw`` | ``dev`` | ``symlink``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["MODES", "SandboxUnavailable", "available", "binds", "choose", "command"]

MODES = ("bwrap", "userns")  # OS boundaries, in order of preference
WORK, PROG = "/work", "/prog"  # the run's working directory and program folder inside
SANDBOX_UID = 65534  # "nobody" inside the namespace
SYSTEM_LIBS = (
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib32",
    "/lib",
    "/lib64",
    "/lib32",
    "/etc/ld.so.cache",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
ISOLATION_FAILED = 87  # exit status of USERNS_SETUP when the boundary cannot be built


class SandboxUnavailable(RuntimeError):
    """No OS-level boundary here and the caller did not allow running without one."""


def interpreter() -> str:
    """The real interpreter binary (a venv's ``python`` is a symlink to it)."""
    return os.path.realpath(sys.executable)


def binds() -> list[tuple[str, str, str]]:
    """Read-only system entries of the sandbox root: the interpreter's prefix, system libraries."""
    exe = interpreter()
    roots = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
    if not any(exe.startswith(r + os.sep) for r in roots):
        roots.add(os.path.dirname(os.path.dirname(exe)))
    out: list[tuple[str, str, str]] = []
    for path in sorted(roots | set(SYSTEM_LIBS), key=len):
        if not os.path.lexists(path):
            continue
        if os.path.islink(path) and path in SYSTEM_LIBS:  # merged /usr: /lib -> usr/lib
            out.append(("symlink", os.readlink(path), path))
        elif not any(path.startswith(t + os.sep) or path == t for _, _, t in out):
            out.append(("ro", path, path))
    out += [("dev", d, d) for d in DEVICES if os.path.exists(d)]
    return out


# The trusted prologue of mode "userns": argv = [_, root, work, prog, *command]. It builds the
# namespaces and the root, then forks; the child (PID 1 inside) execs ``command``; the parent
# waits and exits like the child (same signal or status). ctypes is used here only, before the
# program exists; the program itself never gets ctypes (audit hook) nor capabilities.
USERNS_SETUP = r"""
import ctypes, json, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
def fail(what):
    err = ctypes.get_errno()
    os.write(2, f"sandbox: isolation failed: {what}: {os.strerror(err)}\n".encode())
    os._exit(@FAILED@)
def mount(src, dst, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    if libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        fail(f"mount {src} -> {dst}")
RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC, PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
LOCKED = NOEXEC | 1024 | 2048  # flags of the source that a user namespace must keep (+noatime)
root, work, prog, binds, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
uid, gid = os.geteuid(), os.getegid()
NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET = (0x20000, 0x4000000, 0x8000000, 0x10000000,
                                                 0x20000000, 0x40000000)
if libc.unshare(NEWUSER | NEWNS | NEWUTS | NEWIPC | NEWPID | NEWNET) != 0:
    fail("unshare")
for name, text in (("setgroups", "deny"), ("uid_map", f"@UID@ {uid} 1"),
                   ("gid_map", f"@UID@ {gid} 1")):
    with open(f"/proc/self/{name}", "w") as f:
        f.write(text)
mount("none", "/", None, REC | PRIVATE)
mount("tmpfs", root, "tmpfs", NOSUID | NODEV, "size=1m,mode=0755")
entries = json.loads(binds) + [["rw", work, "@WORK@"], ["ro", prog, "@PROG@"]]
for kind, src, dst in entries:
    target = root + dst
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if kind == "symlink":
        os.symlink(src, target)
        continue
    if os.path.isdir(src):
        os.makedirs(target, exist_ok=True)
    else:
        open(target, "w").close()
    mount(src, target, None, BIND | REC)
    if kind != "dev":
        keep = os.statvfs(src).f_flag & LOCKED
        mount(None, target, None, REMOUNT | BIND | NOSUID | NODEV | keep |
              (0 if kind == "rw" else RDONLY))
mount(None, root, None, REMOUNT | RDONLY | NOSUID | NODEV)
os.chdir(root)
os.chroot(".")
os.chdir("@WORK@")
if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
    fail("no_new_privs")
rfd, wfd = os.pipe()  # PID 1 ignores default-action signals: it relays the program's status
pid = os.fork()
if pid == 0:  # PID 1 of the new namespace: runs the program as PID 2, reports how it ended
    try:
        child = os.fork()
        if child == 0:
            os.execve(cmd[0], cmd, dict(os.environ))
        os.write(wfd, str(os.waitpid(child, 0)[1]).encode())
    finally:
        os._exit(@FAILED@)
os.close(wfd)
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, lambda s, f: os.kill(pid, signal.SIGKILL))
os.waitpid(pid, 0)
status = os.read(rfd, 64)
if not status:
    os._exit(@FAILED@)
status = int(status)
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    signal.signal(sig, signal.SIG_DFL)
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), sig)
os._exit(os.WEXITSTATUS(status))
"""
for _key, _value in (
    ("@FAILED@", ISOLATION_FAILED),
    ("@UID@", SANDBOX_UID),
    ("@WORK@", WORK),
    ("@PROG@", PROG),
):
    USERNS_SETUP = USERNS_SETUP.replace(_key, str(_value))
del _key, _value


def command(
    mode: str, tmp: Path, work: Path, prog: Path, argv: list[str], env: dict[str, str]
) -> list[str]:
    """The command line that runs ``argv`` (paths as seen inside) behind boundary ``mode``."""
    if mode == "bwrap":
        cmd = [
            shutil.which("bwrap") or "bwrap",
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--cap-drop",
            "ALL",
        ]
        for kind, src, dst in binds():
            if kind == "symlink":
                cmd += ["--symlink", src, dst]
            elif kind == "ro":
                cmd += ["--ro-bind", src, dst]
            else:
                cmd += ["--dev-bind", src, dst]
        cmd += [
            "--bind",
            str(work),
            WORK,
            "--ro-bind",
            str(prog),
            PROG,
            "--remount-ro",
            "/",
            "--chdir",
            WORK,
        ]
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        return [*cmd, "--", *argv]
    if mode == "userns":
        root = tmp / "root"
        root.mkdir()
        table = json.dumps(binds())
        return [
            interpreter(),
            "-I",
            "-S",
            "-B",
            "-c",
            USERNS_SETUP,
            str(root),
            str(work),
            str(prog),
            table,
            *argv,
        ]
    if mode == "none":
        return list(argv)
    raise ValueError(f"unknown isolation mode {mode!r}; choose from {(*MODES, 'none')}")


@functools.cache
def available() -> tuple[str, ...]:
    """The OS boundaries that work here (each probed once per process by a real run)."""
    import tempfile

    found = []
    for mode in MODES:
        if mode == "bwrap" and not shutil.which("bwrap"):
            continue
        with tempfile.TemporaryDirectory(prefix="mas2-probe-") as tmp:
            work, prog = Path(tmp, "work"), Path(tmp, "prog")
            work.mkdir()
            prog.mkdir()
            argv = [interpreter(), "-I", "-S", "-c", "import os; print(os.getcwd())"]
            cmd = command(mode, Path(tmp), work, prog, argv, {"PATH": "/usr/bin:/bin"})
            try:
                res = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=20, env={"PATH": "/usr/bin:/bin"}
                )
            except (OSError, subprocess.TimeoutExpired):
                continue
            if res.returncode == 0 and res.stdout.strip() == WORK:
                found.append(mode)
    return tuple(found)


def choose(isolation: str = "auto", allow_unisolated: bool = False) -> str:
    """Resolve ``auto`` to the best boundary here; ``none`` only when ``allow_unisolated``."""
    if isolation == "auto":
        found = available()
        if found:
            return found[0]
        isolation = "none"
    elif isolation in MODES and isolation not in available():
        raise SandboxUnavailable(f"sandbox isolation {isolation!r} does not work on this machine")
    if isolation == "none" and not allow_unisolated:
        raise SandboxUnavailable(
            "no OS-level isolation for generated code here (bubblewrap is not installed and "
            "unprivileged user namespaces are off): install bubblewrap, or pass "
            "--allow-unisolated to run it with rlimits and the audit hook only"
        )
    if isolation not in (*MODES, "none"):
        raise ValueError(
            f"unknown isolation mode {isolation!r}; choose from auto, bwrap, userns, none"
        )
    return isolation
