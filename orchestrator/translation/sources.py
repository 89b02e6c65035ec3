"""Pinned upstream artifacts: download from PyPI, verify size and sha256, unpack.

A pin names one file exactly as the PyPI simple index serves it (package, version,
file name, size, sha256) and the directory inside the archive that paths are
relative to. Layout under `cache_dir/translation/`:

    downloads/<file>            verified archives (re-verified on every use)
    src/<sha256[:16]>/          the unpacked archive; `.complete` marks a finished unpack
    src/<sha256[:16]>-fix<d>/   the same with the pin's source fixes applied (d: their digest)

A source fix is an upstream bug we fix at unpack time rather than copy a corrected file into
the repository: one exact text replacement in one file whose upstream sha256 is pinned, so it
applies to that file only, exactly once, or the unpack fails (docs/decisions.md, "Source fixes").

Offline machines: put the archives in a folder and pass it as `search_dirs` (the
`--pins-dir` flag); they are copied into the cache after verification. Every failure
is a `PinError`: one line naming the task, the pin and what differs.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from orchestrator.errors import UserError

PYPI_SIMPLE = "https://pypi.org/simple"
USER_AGENT = "popcornbench-translation/0.1 (+https://popcornbench.dev)"
CHUNK = 1 << 20


class PinError(UserError):
    """A pinned artifact cannot be obtained, does not match its pin, or lacks a path."""


@dataclass(frozen=True)
class SourceFix:
    path: str  # relative to the pin's root
    sha256: str  # of the upstream file, before the fix
    old: str
    new: str

    @classmethod
    def from_manifest(cls, spec: Mapping[str, Any]) -> "SourceFix":
        return cls(spec["path"], spec["sha256"], spec["old"], spec["new"])


@dataclass(frozen=True)
class Pin:
    key: str
    package: str
    version: str
    file: str
    sha256: str
    size: int
    root: str
    fixes: tuple[SourceFix, ...] = ()

    @classmethod
    def from_manifest(cls, key: str, spec: Mapping[str, Any]) -> "Pin":
        fixes = tuple(SourceFix.from_manifest(f) for f in spec.get("fixes", ()))
        return cls(key, spec["package"], spec["version"], spec["file"], spec["sha256"], int(spec["size"]),
                   spec.get("root", ""), fixes)

    @property
    def label(self) -> str:
        return f"pin {self.key} ({self.file})"

    @property
    def identity(self) -> str:
        """What fixes the unpacked files: the archive's sha256, and the fixes' digest if any."""
        if not self.fixes:
            return self.sha256
        digest = hashlib.sha256(json.dumps([vars(f) for f in self.fixes], sort_keys=True).encode()).hexdigest()
        return f"{self.sha256}-fix{digest[:12]}"


def translation_cache(cache_dir: Path) -> Path:
    return Path(cache_dir) / "translation"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def check_archive(pin: Pin, path: Path) -> None:
    """Raise PinError unless `path` has the pin's size and sha256."""
    size = path.stat().st_size
    if size != pin.size:
        raise PinError(f"{pin.label}: size mismatch: expected {pin.size} bytes, {path} has {size}")
    actual = sha256_of(path)
    if actual != pin.sha256:
        raise PinError(f"{pin.label}: sha256 mismatch: expected {pin.sha256}, got {actual} ({path})")


def _index_entry(pin: Pin, index_url: str, timeout: float) -> dict[str, Any]:
    url = f"{index_url.rstrip('/')}/{pin.package.lower().replace('_', '-').replace('.', '-')}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json",
                                                   "User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            index = json.load(response)
    except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
        raise PinError(f"{pin.label}: cannot read the package index {url}: {exc}") from exc
    for entry in index.get("files", []):
        if entry.get("filename") == pin.file:
            return dict(entry)
    raise PinError(f"{pin.label}: {url} does not serve {pin.file}")


def _download(pin: Pin, dest: Path, index_url: str, timeout: float) -> None:
    entry = _index_entry(pin, index_url, timeout)
    served = entry.get("hashes", {}).get("sha256")
    if served and served != pin.sha256:
        raise PinError(f"{pin.label}: sha256 mismatch: the pin says {pin.sha256}, the index serves {served}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
    tmp = Path(tmp_name)
    try:
        request = urllib.request.Request(entry["url"], headers={"User-Agent": USER_AGENT})
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(request, timeout=timeout) as response:
            shutil.copyfileobj(response, out, CHUNK)
        check_archive(pin, tmp)
        os.replace(tmp, dest)
    except (urllib.error.URLError, OSError) as exc:
        raise PinError(f"{pin.label}: download from {entry['url']} failed: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)


def fetch(pin: Pin, cache_dir: Path, search_dirs: Iterable[Path] = (), index_url: str = PYPI_SIMPLE,
          timeout: float = 120.0, offline: bool = False) -> Path:
    """The verified archive of `pin` in the cache: cached, copied from search_dirs, or downloaded."""
    dest = translation_cache(cache_dir) / "downloads" / pin.file
    if dest.is_file():
        try:
            check_archive(pin, dest)
            return dest
        except PinError:
            dest.unlink()  # a corrupt or foreign file: fetch a fresh copy below
    for folder in search_dirs:
        candidate = Path(folder) / pin.file
        if candidate.is_file():
            check_archive(pin, candidate)
            dest.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=".copy-")
            os.close(fd)
            shutil.copyfile(candidate, tmp_name)
            os.replace(tmp_name, dest)  # atomic: concurrent fetches never see a partial file
            return dest
    if offline:
        where = ", ".join(str(d) for d in search_dirs) or "no --pins-dir given"
        raise PinError(f"{pin.label}: not in the cache ({dest.parent}) nor in {where}, and downloads are off")
    _download(pin, dest, index_url, timeout)
    return dest


def _extract(archive: Path, target: Path) -> None:
    name = archive.name
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(target)
    elif name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(archive, "r:gz") as tf:
            tf.extractall(target, filter="data")
    else:
        raise PinError(f"{archive}: unknown archive type")


def _fix_target(pin: Pin, root: Path, fix: SourceFix) -> Path:
    """The file a fix names, which must lie inside the unpacked archive (never `..` out of it)."""
    path = (root / fix.path).resolve()
    if Path(fix.path).is_absolute() or not path.is_relative_to(root.resolve()):
        raise PinError(f"{pin.label}: source fix of {fix.path}: the path leaves the archive's root")
    if not path.is_file():
        raise PinError(f"{pin.label}: source fix of {fix.path}: no such file in the archive")
    return path


def apply_fixes(pin: Pin, root: Path) -> None:
    """Apply the pin's source fixes under `root`, or raise PinError naming the fix that does not fit.
    Every file's upstream sha256 is checked before anything changes; the texts are replaced as bytes."""
    targets = [(_fix_target(pin, root, fix), fix) for fix in pin.fixes]
    for path, fix in targets:
        actual = sha256_of(path)
        if actual != fix.sha256:
            raise PinError(f"{pin.label}: source fix of {fix.path}: the upstream file's sha256 is {actual}, "
                           f"the fix expects {fix.sha256}")
    for path, fix in targets:
        data, old = path.read_bytes(), fix.old.encode()
        count = data.count(old)
        if count != 1:
            raise PinError(f"{pin.label}: source fix of {fix.path}: the text to replace occurs {count} times, "
                           f"not once: {fix.old!r}")
        path.write_bytes(data.replace(old, fix.new.encode()))


def unpack(pin: Pin, archive: Path, cache_dir: Path) -> Path:
    """Unpack once into src/<sha256[:16]>/ (with fixes: src/<sha256[:16]>-fix<d>/) and return the
    pin's root inside it."""
    top = translation_cache(cache_dir) / "src" / (pin.sha256[:16] + pin.identity[64:])
    if not (top / ".complete").is_file():
        top.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=top.parent, prefix=".unpack-"))
        try:
            _extract(archive, tmp)
            apply_fixes(pin, tmp / pin.root if pin.root else tmp)
            (tmp / ".complete").write_text(f"{pin.file} {pin.identity}\n")
            if not (top / ".complete").is_file():  # another process may have finished first: keep its copy
                if top.exists():
                    shutil.rmtree(top)  # a stale, unfinished unpack
                os.replace(tmp, top)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    root = top / pin.root if pin.root else top
    if not root.is_dir():
        raise PinError(f"{pin.label}: root {pin.root!r} not found in the archive")
    return root


def resolve(pin: Pin, root: Path, relpath: str, task_id: str = "", kind: str = "path") -> Path:
    """`root/relpath`, or a PinError naming the task, the pin and the missing path."""
    path = root / relpath
    if not path.exists():
        prefix = f"{task_id}: " if task_id else ""
        raise PinError(f"{prefix}{kind} {relpath!r} not found in {pin.file} ({pin.label}, root {pin.root!r})")
    return path


def pins_of(manifest: Mapping[str, Any]) -> dict[str, Pin]:
    return {key: Pin.from_manifest(key, spec) for key, spec in manifest["pins"].items()}


def required_paths(manifest: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(pin key, relative path, kind) for every file and directory the task names."""
    out: list[tuple[str, str, str]] = []
    for side in ("a100", "h100"):
        spec = manifest[side]
        out += [(spec["pin"], p, f"{side} source") for p in spec["sources"]]
        out += [(inc["pin"], inc["path"], f"{side} include directory") for inc in spec.get("includes", [])]
    out += [(inc["pin"], inc["path"], "include directory") for inc in manifest["build"]["includes"]]
    return out


def prepare(manifest: Mapping[str, Any], cache_dir: Path, search_dirs: Iterable[Path] = (),
            offline: bool = False, index_url: str = PYPI_SIMPLE) -> dict[str, Path]:
    """Fetch, verify and unpack every pin of a task; check every named path exists.

    Returns pin key -> unpacked root.
    """
    search_dirs = list(search_dirs)
    task_id = str(manifest.get("id", ""))
    roots: dict[str, Path] = {}
    for key, pin in pins_of(manifest).items():
        try:
            archive = fetch(pin, cache_dir, search_dirs, index_url=index_url, offline=offline)
        except PinError as exc:
            raise PinError(f"{task_id}: {exc}") from exc
        roots[key] = unpack(pin, archive, cache_dir)
    pins = pins_of(manifest)
    for key, relpath, kind in required_paths(manifest):
        resolve(pins[key], roots[key], relpath, task_id, kind)
    return roots
