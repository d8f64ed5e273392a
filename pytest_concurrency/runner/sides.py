"""The base side of ``--concurrency-against=SPEC``: its code installed apart, and imported first.

The base side is installed with ``pip install --no-deps --target DIR`` so the environment the
run uses is never touched:

* ``git:REF``: the current repository at REF (``git archive``, then installed from that tree);
* an existing path: a project directory, a wheel or an sdist;
* ``pip:REQUIREMENT``: a pip requirement (``pip:mylib==1.4.2``); the bare form with a version
  clause (``mylib==1.4.2``) too, when no file of that name exists. Anything else is refused.

The base side's session runs with DIR first on ``PYTHONPATH`` (its children inherit it) and a
finder in front of ``sys.meta_path`` that serves DIR's top-level packages from DIR: pytest puts
the rootdir on ``sys.path`` itself, and a package in the working tree would otherwise shadow
the installed base. ``identity`` says where each side imported them from and which version,
and ``check`` refuses a side that imported the other side's code.
"""

import importlib.abc
import importlib.machinery
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import lifetime
from ..backends import child_env, scratch


class SideError(Exception):
    """The base side could not be prepared: the message names the step and the fix."""


@dataclass
class Spec:
    kind: str  # "git", "path" or "pip"
    what: str  # the ref, the path, or the requirement

    def __str__(self) -> str:
        return {"git": "git:", "path": "", "pip": "pip:"}[self.kind] + self.what


#: What makes a bare spec a pip requirement: a version clause (PEP 440's operators).
_VERSION_CLAUSE = re.compile(r"(===|==|!=|~=|>=|<=|<|>)")
#: What makes a spec a path, existing or not: a directory part, a relative start, an archive.
_PATH_LIKE = re.compile(r"[/\\]|^[.~]|\.(whl|zip|tar\.gz|tgz|tar\.bz2)$")


def parse(text: str, root: Path) -> Spec:
    """The base side a spec names. A typo must never become a package from the index, so a pip
    requirement is either said (``pip:NAME...``) or unmistakable (a version clause, and no file
    of that name); anything that could name a file must name one that exists."""
    text = text.strip()
    if not text:
        raise SideError(
            "--concurrency-against is empty: give git:REF, a path, or pip:REQUIREMENT "
            "(pip:mylib==1.4.2)"
        )
    if text.startswith("git:"):
        ref = text[4:]
        if not ref:
            raise SideError(
                "--concurrency-against=git: names no ref: give one, e.g. git:HEAD~1 or git:origin/main"
            )
        if ref.startswith("-"):  # git would read it as an option
            raise SideError(
                f"--concurrency-against={text}: a ref cannot start with '-'; name a branch, tag or commit"
            )
        return Spec("git", ref)
    said = text.startswith("pip:")
    requirement = text[4:].strip() if said else text
    if requirement.startswith("-"):  # pip would read it as an option (--index-url=...)
        raise SideError(
            f"--concurrency-against={text}: a requirement cannot start with '-'; give "
            "pip:mylib==1.4.2, a path or git:REF (pip's options go in its environment, "
            "PIP_INDEX_URL=...)"
        )
    if said:
        if not requirement:
            raise SideError(
                "--concurrency-against=pip: names no requirement: give one, e.g. pip:mylib==1.4.2"
            )
        return Spec("pip", requirement)
    path = (root / text) if not os.path.isabs(text) else Path(text)
    exists = os.path.lexists(path)
    if _VERSION_CLAUSE.search(text) and not _PATH_LIKE.search(text):
        if exists:
            raise SideError(
                f"--concurrency-against={text}: both a file here ({path}) and a pip requirement; "
                f"say which: ./{text} for the file, or pip:{text} for the package index"
            )
        return Spec("pip", text)
    if exists:
        if not path.exists():
            raise SideError(f"--concurrency-against={text}: {path} is a link to nothing")
        return Spec("path", str(path.resolve()))
    if _PATH_LIKE.search(text):
        raise SideError(
            f"--concurrency-against={text}: no such path ({path}); check it, or give "
            f"pip:REQUIREMENT for a package from the index"
        )
    raise SideError(
        f"--concurrency-against={text}: no file or directory {path} exists, and a bare name is not "
        f"installed from the package index (a typo would install someone else's code): give "
        f"./{text} for a directory (once it exists), or pip:{text} for the package index"
    )


def install(spec: Spec, root: Path, into: Path, log=print) -> Path:
    """Install the base side into ``into/site`` and return that directory."""
    site = into / "site"
    source = spec.what
    if spec.kind == "git":
        source = str(_export(spec.what, root, into / "tree"))
    name, installer = _installer()
    log(f"pytest-concurrency: installing the base side ({spec}) apart, with {name} --target")
    # its temporary files in this run's directory, removed with it: a Ctrl-C kills the installer,
    # which then leaves its build directories and caches in TMPDIR
    temporary = into / "installer-tmp"
    temporary.mkdir(exist_ok=True)
    _run(
        [*installer, "install", "--no-deps", "--quiet", "--target", str(site), source],
        f"{name} could not install {spec}",
        env={**os.environ, "TMPDIR": str(temporary)},
    )
    names = top_level(site)
    if not names:
        raise SideError("the base side installed nothing importable")
    if "pytest_concurrency" in names:  # its sessions would run the old plugin, which takes no turns
        raise SideError(
            "the base side is this plugin itself, which both sides run as it is installed "
            "now: compare its versions with stored baselines (--concurrency-baseline)"
        )
    return site


def _installer() -> tuple[str, list[str]]:
    """pip in this environment, else uv (an environment uv made has no pip)."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("pip") is not None:
        return "pip", [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    uv = shutil.which("uv")
    if uv:
        return "uv pip", [uv, "pip", "--python", sys.executable]
    raise SideError(
        "installing the base side needs pip in this environment or uv on PATH: "
        f"{sys.executable} -m ensurepip, or install uv"
    )


def _export(ref: str, root: Path, tree: Path) -> Path:
    top = _run(
        ["git", "-C", str(root), "rev-parse", "--show-toplevel"],
        f"git:{ref} needs a git repository, and {root} is not in one",
    )
    commit = _run(
        ["git", "-C", top, "rev-parse", "--verify", f"{ref}^{{commit}}"],
        f"git:{ref} is not a commit of {top} (fetch it first: shallow CI clones lack history, "
        "use fetch-depth: 0)",
    )
    tree.mkdir(parents=True)
    archive = lifetime.run(
        ["git", "-C", top, "archive", "--format=tar", commit], capture_output=True
    )
    if archive.returncode != 0:
        raise SideError(
            f"git archive {commit} failed: {archive.stderr.decode(errors='replace').strip()}"
        )
    untar = lifetime.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, capture_output=True)
    if untar.returncode != 0:
        why = untar.stderr.decode(errors="replace").strip()
        raise SideError(f"tar could not unpack git archive {commit} in {tree}: {why}")
    # the project may sit in a subdirectory of the repository: the same one as the run's
    inside = Path(root).resolve().relative_to(Path(top).resolve())
    return tree / inside


def _run(cmd: list, what: str, env: dict | None = None) -> str:
    """``cmd``'s output; a ``SideError`` saying ``what`` failed, with its last lines, if it
    failed. pip's build backend and the compiler it starts die with this process and end with a
    Ctrl-C (``lifetime.run``)."""
    try:
        done = lifetime.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env)
    except FileNotFoundError:
        raise SideError(f"{what}: {cmd[0]} is not on PATH") from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise SideError(f"{what}:\n{tail}")
    return done.stdout.strip()


def run_directory() -> tempfile.TemporaryDirectory:
    """The session's own directory for the base side (removed with the session)."""
    return tempfile.TemporaryDirectory(prefix="against-", dir=scratch.directory())


@dataclass(frozen=True)
class Run:
    """One run against the base side: ``spec``, installed in ``site``; the run's own ``directory``
    (``run_directory``) and the user's ``root``, where both sides start."""

    spec: Spec
    site: Path
    directory: Path
    root: Path


# -- in each side's process ------------------------------------------------------------------------


def top_level(site: Path) -> dict[str, tuple[str, str]]:
    """Top-level importable names in ``site`` -> their distribution's name, as its metadata
    spells it (``lifx-async`` for ``lifx``: the name a user installs and a counted run's
    versions use), and version ("" if unknown)."""
    names: dict[str, tuple[str, str]] = {}
    for dist in site.glob("*.dist-info"):
        project, _, version = dist.name[: -len(".dist-info")].rpartition("-")
        project = _metadata_name(dist) or project
        top = dist / "top_level.txt"
        listed = top.read_text().split() if top.exists() else []
        for line in (
            (dist / "RECORD").read_text().splitlines() if (dist / "RECORD").exists() else []
        ):
            first = line.split(",")[0].split("/")[0]
            if (
                first
                and not first.endswith((".dist-info", ".data"))
                and first not in ("..", "bin", "__pycache__")
            ):
                listed.append(first[:-3] if first.endswith(".py") else first.split(".")[0])
        for name in listed:
            names.setdefault(name, (project, version))
    return names


def _metadata_name(dist: Path) -> str:
    """The ``Name:`` a ``*.dist-info`` directory's ``METADATA`` gives ("" if none)."""
    try:
        with open(dist / "METADATA", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Name:"):
                    return line.partition(":")[2].strip()
                if not line.strip():  # the headers end at the first blank line
                    break
    except OSError:
        pass
    return ""


class _BaseFirst(importlib.abc.MetaPathFinder):
    """Finds the base side's top-level packages in its directory before anywhere else."""

    def __init__(self, site: str, names):
        self.site, self.names = site, set(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.names:
            return importlib.machinery.PathFinder.find_spec(fullname, [self.site])
        return None


def import_base_first(site: str, head: bool = False) -> None:
    """In the base side's session: make its code, installed in ``site``, win over the working
    tree's. In the head's
    (``head``), the same finder looks first in an empty directory as long as the base's
    (``same_length``), and finds nothing there: both processes then import alike. With the head
    doing less, an A/A read the head 2-3% faster on gevent in every pair of sessions of a run
    (docs/gates/against.md: the address layout is fixed, so such a difference never averages out)."""
    if not any(isinstance(f, _BaseFirst) for f in sys.meta_path):
        names = top_level(Path(site))
        sys.meta_path.insert(0, _BaseFirst(str(same_length(Path(site))) if head else site, names))


def same_length(site: Path) -> Path:
    """An empty directory named as long as ``site``, beside it: the head's stand-in for the base's
    install (on its ``PYTHONPATH`` and in its finder), so that the two processes' environments,
    paths and imports are of one size (a layout effect)."""
    return site.parent / ("n" * len(site.name))


def same_size(launches: dict) -> None:
    """Pad the sides' environments so that both processes start with as many strings, of as many
    bytes, above their stacks: with the address layout fixed, where the stack starts (and all that
    is aligned from it) then does not differ between them. In the first pair the head has the user's
    command line and the base one of its own: one more layout difference between the two processes."""

    def size(argv, env) -> tuple[int, int]:
        strings = sum(len(os.fsencode(a)) + 1 for a in argv)
        strings += sum(len(os.fsencode(k)) + len(os.fsencode(v)) + 2 for k, v in env.items())
        return len(argv) + len(env), strings

    for _, env in launches.values():
        for key in [k for k in env if k.startswith(child_env.PAD)]:
            del env[key]
    sizes = {side: size(*launch) for side, launch in launches.items()}
    entries = max(n for n, _ in sizes.values())
    pads = {side: entries - n + 1 for side, (n, _) in sizes.items()}  # every side at least one
    # each pad costs its name, "=" and the terminating NUL: the longest total wins, the rest fill up
    strings = max(
        b + sum(len(f"{child_env.PAD}{i}") + 2 for i in range(pads[side]))
        for side, (_, b) in sizes.items()
    )
    for side, (_argv, env) in launches.items():
        names = [f"{child_env.PAD}{i}" for i in range(pads[side])]
        room = strings - sizes[side][1] - sum(len(name) + 2 for name in names)
        for name in names:
            env[name] = ""
        env[names[-1]] = "x" * room


def identity(site: Path, base_side: bool) -> dict:
    """For each of the base side's packages: where this process imported it from, its version, and
    the distribution it belongs to."""
    out = {}
    for name, (distribution, installed) in sorted(top_level(site).items()):
        module = sys.modules.get(name)
        where = (
            getattr(module, "__file__", None)
            or (list(getattr(module, "__path__", [])) or [None])[0]
        )
        version = str(getattr(module, "__version__", "") or "") if module is not None else ""
        out[name] = {
            "file": where,
            "version": version or (installed if base_side else _installed_version(distribution)),
            "distribution": distribution,
        }
    return out


def _installed_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


def check(site: Path, base: dict, this: dict) -> list[str]:
    """What each side imported from where it should not (empty when both are right)."""
    problems = []
    for name, seen in base.items():
        if seen["file"] and not str(seen["file"]).startswith(str(site)):
            problems.append(
                f"the base side imported {name} from {seen['file']}, not from its install in {site}"
            )
    for name, seen in this.items():
        if seen["file"] and str(seen["file"]).startswith(str(site)):
            problems.append(
                f"this side imported {name} from the base side's install ({seen['file']})"
            )
    return problems
