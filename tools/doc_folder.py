"""One doc file's folder for the doc runner: links to the checkout's entries, a ``.venv/bin`` of
shims (``wai-dispatch``, ``python``: this interpreter), a clean ``WAI_DATA_DIR``, a free
``WAI_PORT``, its own ``HOME``; ``/tmp/…`` in a command becomes the folder's ``tmp/``.

``make TARGET`` runs the Makefile's recipe (not its install steps). ``wai-dispatch serve`` must
print its URL and answer ``GET /openapi.json`` within :data:`READY_S`, and is then stopped;
any other command must exit 0 within :data:`TIMEOUT_S`. Output is compared with the folder's
paths and port written as a reader sees them (:meth:`Folder.readable`)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from wai_dispatch.tools.harness import free_port

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 120.0
READY_S = 30.0
_SERVE = re.compile(r"(^|\s)(\S*/)?wai-dispatch\s+serve(\s|$)")


def _is_root(entry: str) -> bool:
    try:
        return Path(entry).resolve() == ROOT
    except OSError:
        return False


def make_recipe(target: str, makefile: Path = ROOT / "Makefile") -> list[str]:
    """The recipe lines of ``target``, with the venv variables written out."""
    lines = makefile.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(rf"^{re.escape(target)}\s*:(?!=)", line):
            recipe = []
            for body in lines[i + 1 :]:
                if not body.startswith("\t"):
                    break
                line = body[1:].removeprefix("@")  # make's "do not echo" prefix
                recipe.append(line.replace("$(BIN)", ".venv/bin").replace("$(VENV)", ".venv"))
            return recipe
    raise KeyError(f"the Makefile has no target {target!r}")


class Folder:
    """One doc file's folder: the checkout's entries, the shims, a clean data dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.work = root / "work"
        self.data = root / "data"
        self.home = root / "home"
        for d in (self.work, self.data, self.home, self.work / "tmp"):
            d.mkdir(parents=True)
        for entry in ROOT.iterdir():
            if entry.name not in {".venv", "out", ".git", "tmp"}:
                (self.work / entry.name).symlink_to(entry)
        shims = self.work / ".venv" / "bin"
        shims.mkdir(parents=True)
        for name, argv in {
            "wai-dispatch": f'"{sys.executable}" -m wai_dispatch.cli',
            "python": f'"{sys.executable}"',
            "python3": f'"{sys.executable}"',
        }.items():
            (shims / name).write_text(f'#!/bin/sh\nexec {argv} "$@"\n', encoding="utf-8")
            (shims / name).chmod(0o755)
        # the import root alone, as an installed package has it: a doc's `import dispatch`
        # fails here as it does outside a checkout (the checkout's root is no import path)
        site = root / "site"
        site.mkdir()
        (site / "wai_dispatch").symlink_to(ROOT / "wai_dispatch", target_is_directory=True)
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("WAI_")}
        env.pop("XDG_DATA_HOME", None)
        kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and not _is_root(p)]
        env.update(
            WAI_DATA_DIR=str(self.data),
            WAI_PORT=str(self.port),
            HOME=str(self.home),
            PATH=f"{shims}{os.pathsep}{env.get('PATH', '')}",
            PYTHONPATH=os.pathsep.join([str(site), *kept]),
        )
        self.env = env
        self.outputs: dict[str, str] = {}

    def readable(self, out: str) -> str:
        """``out`` with this folder's paths and port as the docs write them: the data dir as
        the default one, paths in the folder or the checkout relative (the docs' commands run
        at the checkout's root), the port as the default."""
        out = out.replace(str(self.data), "~/.local/share/wai-dispatch")
        for root in (self.work, ROOT):
            out = out.replace(str(root), ".")
        out = re.sub(r"(^|\s)\./", r"\1", out, flags=re.M)
        return out.replace(str(self.home), "~").replace(f":{self.port}", ":8080")

    def expand(self, text: str) -> list[str]:
        """The shell lines ``text`` stands for: a ``make`` target's recipe, ``/tmp/`` moved."""
        text = re.sub(r"(?<![\w/])/tmp/", str(self.work / "tmp") + "/", text)
        words = shlex.split(text)
        if len(words) == 2 and words[0] == "make":
            return make_recipe(words[1])
        return [text]

    def run(self, command: str) -> tuple[int, str]:
        """Exit status and the output (stdout and stderr, in order) of ``command``."""
        if _SERVE.search(command):
            return self._serve(command)
        try:
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=self.work,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else ""
            return 124, out + f"\n(no exit within {TIMEOUT_S:.0f} s)"
        return done.returncode, done.stdout.decode("utf-8", "replace")

    def _serve(self, command: str) -> tuple[int, str]:
        """Start, wait until it answers, stop: its stdout (the banner; its log, stderr, is
        shown only when it never got ready)."""
        import httpx

        proc = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        out: list[str] = []
        log: list[str] = []
        readers = [
            threading.Thread(target=_drain, args=(stream, sink), daemon=True)
            for stream, sink in ((proc.stdout, out), (proc.stderr, log))
        ]
        for reader in readers:
            reader.start()
        status, deadline = 1, time.monotonic() + READY_S
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                url = next((m.group(1) for ln in out if (m := _URL.search(ln))), None)
                if url is not None:
                    try:
                        if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                            status = 0
                            break
                    except httpx.HTTPError:
                        pass
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            for reader in readers:
                reader.join(5)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        if status == 0:
            return 0, "".join(out)
        note = f"\n(not ready within {READY_S:.0f} s: no 200 from /openapi.json)"
        return status, "".join(out + log) + note


_URL = re.compile(r"serving on (http://\S+)")


def _drain(stream: IO[bytes] | None, sink: list[str]) -> None:
    if stream is not None:
        sink.extend(line.decode("utf-8", "replace") for line in stream)
