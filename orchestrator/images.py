"""`python -m orchestrator images build|push|pull|list|clean|host-toolchain`.

Layers, each tagged by the content hash of what built it (its Dockerfile, its build
context and its parent's hash, as SWE-bench keys its env images):

    toolchain  images/toolchain/Dockerfile: pinned CUDA devel image, torch, Triton, ncu
               (or any image given with --toolchain, e.g. one from `images host-toolchain`)
    base       images/base/Dockerfile: the runner part of orchestrator, the non-root user
    domain     images/<domain>/Dockerfile: what a domain's problems share
    problem    problems/<domain>/l<N>/<slug>/Dockerfile: that problem folder only
               (solutions/ and tests are never in the build context)
    task       translation/<single|multi>/<task>/Dockerfile: FROM base

Builds go in dependency order, skip what exists, drop the dependents of a failed
build, keep one log per image under .cache/images/logs/ and write `images.lock.json`
(name, tag, id, digest, inputs hash) atomically, never partially.
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from orchestrator.config import REPO_ROOT, Settings
from orchestrator.errors import UserError

NAMESPACE = "popcorn"
LOCK_VERSION = 1
DEFAULT_LOCK = REPO_ROOT / "images.lock.json"
# Left out of every problem's build context: never shown to a model, not needed to score.
PRIVATE_PARTS = ("solutions", "__pycache__", ".pytest_cache")
PRIVATE_FILES = ("test_*.py", "*_test.py", "conftest.py", "*.pyc")
# The runner part of orchestrator: what runs inside a sandbox (needs only torch).
RUNNER_FILES = ("orchestrator/__init__.py", "orchestrator/runner")
# Pinned CUDA devel image for the toolchain layer; its digest is recorded in the lock.
CUDA_IMAGE = "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"

PROBLEM_DOCKERFILE = """\
# Built by `python -m orchestrator images build` with this folder as context, less
# solutions/ and tests (the harness leaves them out). Add only what this problem needs.
ARG DOMAIN_IMAGE={namespace}/{domain}:latest
FROM ${{DOMAIN_IMAGE}}
COPY --chown=0:0 . /popcorn/problem/
LABEL popcorn.problem="{problem_id}"
"""


class ImageBuildError(UserError):
    """A Dockerfile failed to build: names the image and its log."""


@dataclass
class ImageSpec:
    """One image: its name, Dockerfile, build context and parent; the tag is computed."""

    name: str                          # e.g. popcorn/graph/l1/csr_spmv
    kind: str                          # toolchain | base | domain | problem | task
    dockerfile: Path | None            # None: an external image (given with --toolchain)
    context: dict[str, Path] = field(default_factory=dict)   # path in context -> host file
    parent: "ImageSpec | None" = None
    parent_arg: str | None = None      # build argument that carries the parent reference
    build_args: dict[str, str] = field(default_factory=dict)
    problem: str | None = None         # problem or task id
    external_ref: str | None = None    # kind == external: the image reference
    external_id: str | None = None     # its image id (the hash input)
    _hash: str | None = field(default=None, repr=False)

    @property
    def inputs_hash(self) -> str:
        if self._hash is None:
            digest = hashlib.sha256()
            digest.update(f"{self.kind}\0{self.name}\0".encode())
            if self.external_ref:
                digest.update(f"external\0{self.external_id or self.external_ref}\0".encode())
            if self.parent is not None:
                digest.update(f"parent\0{self.parent.inputs_hash}\0".encode())
            for key in sorted(self.build_args):
                digest.update(f"arg\0{key}={self.build_args[key]}\0".encode())
            if self.dockerfile is not None:
                digest.update(b"Dockerfile\0" + self.dockerfile.read_bytes())
            for rel in sorted(self.context):
                digest.update(f"file\0{rel}\0".encode() + _file_digest(self.context[rel]).encode())
            self._hash = digest.hexdigest()
        return self._hash

    @property
    def tag(self) -> str:
        return self.inputs_hash[:16]

    @property
    def ref(self) -> str:
        return self.external_ref if self.external_ref else f"{self.name}:{self.tag}"

    def ancestors(self) -> Iterator["ImageSpec"]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def context_tar(self) -> bytes:
        """The build context: the Dockerfile plus exactly the hashed files."""
        assert self.dockerfile is not None
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            _add_bytes(tar, "Dockerfile", self.dockerfile.read_bytes())
            _add_bytes(tar, ".dockerignore", b"Dockerfile\n.dockerignore\n")
            for rel in sorted(self.context):
                _add_bytes(tar, rel, self.context[rel].read_bytes(),
                           mode=0o755 if os.access(self.context[rel], os.X_OK) else 0o644)
        return buf.getvalue()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


_DIGESTS: dict[tuple[str, float, int], str] = {}


def _file_digest(path: Path) -> str:
    stat = path.stat()
    key = (str(path), stat.st_mtime, stat.st_size)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _DIGESTS[key]


def _folder_files(folder: Path, prefix: str = "", private: bool = False) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not (private and d in PRIVATE_PARTS) and d != "__pycache__")
        for name in sorted(filenames):
            if name in ("Dockerfile", ".dockerignore") and Path(dirpath) == folder:
                continue
            if private and any(fnmatch.fnmatch(name, pat) for pat in PRIVATE_FILES):
                continue
            path = Path(dirpath) / name
            files[prefix + path.relative_to(folder).as_posix()] = path
    return files


# -- the image graph ---------------------------------------------------------------


def problem_folders(problems_dir: Path) -> list[Path]:
    """Every problem folder (holds a manifest.json)."""
    return sorted(p.parent for p in problems_dir.glob("*/l*/*/manifest.json"))


def task_folders(translation_dir: Path) -> list[Path]:
    return sorted(p.parent for p in translation_dir.glob("*/*/manifest.json")) if translation_dir.is_dir() else []


def image_name(problem_id: str) -> str:
    """The repository name of a problem's or task's image."""
    return f"{NAMESPACE}/{problem_id}".lower()


def plan(settings: Settings, toolchain: str | None = None, client: Any = None,
         translation: bool = False) -> list[ImageSpec]:
    """Every image in dependency order. Raises UserError for a folder without a Dockerfile.

    Translation tasks (their Dockerfiles download and build upstream sources, so they
    need a network) are planned only with `translation=True`."""
    images_dir = REPO_ROOT / "images"
    if toolchain:
        root = ImageSpec(name="external", kind="external", dockerfile=None, external_ref=toolchain,
                         external_id=_image_id(client, toolchain) if client is not None else None)
    else:
        root = ImageSpec(name=f"{NAMESPACE}/toolchain", kind="toolchain",
                         dockerfile=images_dir / "toolchain" / "Dockerfile",
                         build_args={"CUDA_IMAGE": CUDA_IMAGE})
    runner: dict[str, Path] = {}
    for item in RUNNER_FILES:
        path = REPO_ROOT / item
        runner.update({f"{item}": path} if path.is_file() else _folder_files(path, f"{item}/"))
    runner.update(_folder_files(images_dir / "base", "image/"))
    base = ImageSpec(name=f"{NAMESPACE}/base", kind="base", dockerfile=images_dir / "base" / "Dockerfile",
                     context=runner, parent=root, parent_arg="TOOLCHAIN_IMAGE")
    specs = ([] if root.kind == "external" else [root]) + [base]
    domains: dict[str, ImageSpec] = {}
    missing: list[str] = []
    for folder in problem_folders(settings.problems_dir):
        domain = folder.parent.parent.name
        if domain not in domains:
            dockerfile = images_dir / domain / "Dockerfile"
            if not dockerfile.is_file():
                missing.append(str(dockerfile))
                continue
            domains[domain] = ImageSpec(name=f"{NAMESPACE}/{domain}", kind="domain", dockerfile=dockerfile,
                                        context=_folder_files(images_dir / domain), parent=base,
                                        parent_arg="BASE_IMAGE")
            specs.append(domains[domain])
    for folder in problem_folders(settings.problems_dir):
        problem_id = folder.relative_to(settings.problems_dir).as_posix()
        domain = folder.parent.parent.name
        if domain in domains:
            specs.append(ImageSpec(name=image_name(problem_id), kind="problem", dockerfile=folder / "Dockerfile",
                                   context=_folder_files(folder, private=True), parent=domains[domain],
                                   parent_arg="DOMAIN_IMAGE", problem=problem_id))
    for folder in task_folders(settings.translation_dir) if translation else []:
        task_id = "translation/" + folder.relative_to(settings.translation_dir).as_posix()
        specs.append(ImageSpec(name=image_name(task_id), kind="task", dockerfile=folder / "Dockerfile",
                               context=_folder_files(folder, private=True), parent=base,
                               parent_arg="BASE", problem=task_id))
    if missing:
        raise UserError("no Dockerfile: " + ", ".join(missing))
    return specs


def check_dockerfiles(specs: list[ImageSpec]) -> None:
    """UserError naming every selected image whose Dockerfile is missing."""
    missing = [str(s.dockerfile) for s in specs if s.dockerfile is not None and not s.dockerfile.is_file()]
    if missing:
        raise UserError("no Dockerfile: " + ", ".join(missing) +
                        " (python -m orchestrator images build --write-dockerfiles writes the standard one)")


def select(specs: list[ImageSpec], only: str | None) -> list[ImageSpec]:
    """The images matching GLOB (by problem id or image name) plus everything they build on."""
    if not only:
        return specs
    chosen = {id(s) for s in specs if fnmatch.fnmatch(s.problem or "", only) or fnmatch.fnmatch(s.name, only)
              or fnmatch.fnmatch(s.name, f"{NAMESPACE}/{only}")}
    if not chosen:
        raise UserError(f"--only {only!r} matches no problem, task or image")
    for spec in specs:
        if id(spec) in chosen:
            chosen |= {id(a) for a in spec.ancestors()}
    return [s for s in specs if id(s) in chosen]


def write_dockerfiles(settings: Settings) -> list[Path]:
    """Write the standard Dockerfile into every problem folder that has none."""
    written = []
    for folder in problem_folders(settings.problems_dir):
        path = folder / "Dockerfile"
        if not path.exists():
            problem_id = folder.relative_to(settings.problems_dir).as_posix()
            path.write_text(PROBLEM_DOCKERFILE.format(namespace=NAMESPACE, domain=folder.parent.parent.name,
                                                      problem_id=problem_id))
            written.append(path)
    return written


# -- engine helpers -----------------------------------------------------------------


def engine() -> Any:
    """A docker client, or UserError naming the engine that did not answer."""
    try:
        import docker

        client = docker.from_env(timeout=1800)
        client.ping()
        return client
    except Exception as exc:
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise UserError(f"no Docker engine answers at {host}: {exc}") from exc


def _image_id(client: Any, ref: str) -> str:
    import docker.errors

    try:
        return str(client.images.get(ref).id)
    except docker.errors.ImageNotFound as exc:
        raise UserError(f"image {ref} is not on this engine") from exc


def _exists(client: Any, ref: str) -> bool:
    import docker.errors

    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def log_dir(settings: Settings) -> Path:
    return settings.cache_dir / "images" / "logs"


def build_one(client: Any, spec: ImageSpec, log_path: Path) -> None:
    """Build `spec` (its parent already exists); the engine's output goes to `log_path`."""
    import docker.errors

    args = dict(spec.build_args)
    if spec.parent is not None and spec.parent_arg:
        args[spec.parent_arg] = spec.parent.ref
    log_path.parent.mkdir(parents=True, exist_ok=True)
    error = None
    with open(log_path, "w") as log:
        log.write(f"# {spec.ref} from {spec.dockerfile}\n# build args: {json.dumps(args)}\n")
        try:
            stream = client.api.build(fileobj=io.BytesIO(spec.context_tar()), custom_context=True,
                                      tag=spec.ref, buildargs=args, rm=True, forcerm=True, decode=True,
                                      pull=False, labels={"popcorn.image": spec.name,
                                                          "popcorn.inputs": spec.inputs_hash})
            for chunk in stream:
                if "stream" in chunk:
                    log.write(chunk["stream"])
                if "error" in chunk:
                    error = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                    log.write(f"ERROR: {error}\n")
        except docker.errors.DockerException as exc:
            error = str(exc)
            log.write(f"ERROR: {error}\n")
    if error is None and not _exists(client, spec.ref):
        error = "the engine reported no error but the image is missing"
    if error is not None:
        raise ImageBuildError(f"{spec.dockerfile}: build of {spec.ref} failed: {error.strip().splitlines()[-1]} "
                              f"(log: {log_path})")


@dataclass
class BuildReport:
    built: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)          # one line each
    dropped: list[str] = field(default_factory=list)          # dependents of a failure
    seconds: dict[str, float] = field(default_factory=dict)


def build_all(client: Any, specs: list[ImageSpec], settings: Settings, force: bool = False,
              progress: bool = True) -> BuildReport:
    from tqdm import tqdm

    report = BuildReport()
    broken: set[int] = set()
    bar = tqdm(specs, desc="images", unit="image", disable=not progress, file=sys.stderr)
    for spec in bar:
        bar.set_postfix_str(spec.name)
        if spec.parent is not None and id(spec.parent) in broken:
            broken.add(id(spec))
            report.dropped.append(spec.ref)
            continue
        if not force and _exists(client, spec.ref):
            report.skipped.append(spec.ref)
            continue
        started = time.monotonic()
        try:
            build_one(client, spec, log_dir(settings) / f"{spec.name.replace('/', '__')}.log")
            report.built.append(spec.ref)
        except ImageBuildError as exc:
            broken.add(id(spec))
            report.failed.append(str(exc))
        report.seconds[spec.ref] = time.monotonic() - started
    return report


# -- the lock file -----------------------------------------------------------------


def read_lock(path: Path) -> dict[str, Any]:
    try:
        lock = json.loads(path.read_text())
    except OSError as exc:
        raise UserError(f"{path}: cannot read the lock file: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(lock, dict) or not isinstance(lock.get("images"), list):
        raise UserError(f"{path}: not an images lock file (no 'images' list)")
    return lock


def write_lock(path: Path, lock: dict[str, Any]) -> None:
    """Atomically: a reader sees the old file or the new one, never a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(lock, handle, indent=2, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def lock_entries(client: Any, specs: Iterable[ImageSpec]) -> list[dict[str, Any]]:
    entries = []
    for spec in specs:
        image = client.images.get(spec.ref)
        entry = {"name": spec.name, "tag": spec.tag, "kind": spec.kind, "problem": spec.problem,
                 "id": image.id, "inputs_hash": spec.inputs_hash, "repository": None, "digest": None,
                 "parent": spec.parent.ref if spec.parent is not None else None}
        if spec.kind == "toolchain":
            entry["from"] = CUDA_IMAGE
            entry["from_digest"] = _repo_digest(client, CUDA_IMAGE)
        entries.append(entry)
    return entries


def _repo_digest(client: Any, ref: str) -> str | None:
    import docker.errors

    try:
        digests = client.images.get(ref).attrs.get("RepoDigests") or []
    except docker.errors.ImageNotFound:
        return None
    return digests[0] if digests else None


def merge_lock(path: Path, entries: list[dict[str, Any]], toolchain: str | None) -> dict[str, Any]:
    old = read_lock(path) if path.exists() else {"images": []}
    by_name = {e["name"]: e for e in old["images"]}
    for entry in entries:
        previous = by_name.get(entry["name"])
        if previous and previous.get("id") == entry["id"]:
            entry["repository"], entry["digest"] = previous.get("repository"), previous.get("digest")
        by_name[entry["name"]] = entry
    return {"version": LOCK_VERSION, "toolchain": toolchain or f"{NAMESPACE}/toolchain",
            "images": [by_name[k] for k in sorted(by_name)]}


def resolve_image(problem_id: str, lock_path: Path | None = None, settings: Settings | None = None,
                  client: Any = None) -> tuple[str, str]:
    """The image a problem's sandboxes run, as (reference to run, digest to record).

    With a lock file: exactly the recorded image (its id must be on the engine; pull it
    with `images pull --lock`). Without: the current content-hash tag (on the toolchain
    the last `images build` recorded in images.lock.json), which must exist.
    Raises UserError naming the image and how to get it.
    """
    client = client or engine()
    name = image_name(problem_id)
    if lock_path is not None:
        lock = read_lock(lock_path)
        entry = next((e for e in lock["images"] if e["name"] == name), None)
        if entry is None:
            raise UserError(f"{lock_path}: no image for {problem_id} ({name})")
        ref = f"{entry['name']}:{entry['tag']}"
        if not _exists(client, entry["id"]):
            raise UserError(f"{lock_path}: image {ref} ({entry['id'][:19]}) is not on this engine: "
                            f"python -m orchestrator images pull --lock {lock_path}")
        if _image_id(client, ref) != entry["id"] if _exists(client, ref) else False:
            raise UserError(f"{lock_path}: local {ref} is not the locked image {entry['id'][:19]}")
        recorded = f"{entry['repository']}@{entry['digest']}" if entry.get("digest") else entry["id"]
        return entry["id"], recorded
    settings = settings or Settings()
    # the toolchain the last `images build` used (recorded in the default lock file)
    toolchain = read_lock(DEFAULT_LOCK).get("toolchain") if DEFAULT_LOCK.is_file() else None
    if toolchain == f"{NAMESPACE}/toolchain":
        toolchain = None
    for spec in plan(settings, toolchain, client):
        if spec.problem == problem_id:
            check_dockerfiles([spec])
            if not _exists(client, spec.ref):
                raise UserError(f"image {spec.ref} for {problem_id} is not built: make images "
                                f"(python -m orchestrator images build --only {problem_id})")
            return spec.ref, _image_id(client, spec.ref)
    raise UserError(f"no image is planned for {problem_id}")


# -- commands ----------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="images_command", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="build what changed, in dependency order; write the lock file")
    build.add_argument("--only", metavar="GLOB", help="problem id or image name glob (and what it builds on)")
    build.add_argument("--force", action="store_true", help="rebuild even when the tag exists")
    build.add_argument("--toolchain", metavar="IMAGE",
                       help="use this local image instead of building images/toolchain (no registry needed)")
    build.add_argument("--write-dockerfiles", action="store_true",
                       help="first write the standard Dockerfile into problem folders without one")
    build.add_argument("--translation", action="store_true",
                       help="also build translation tasks (their builds download upstream sources)")
    build.add_argument("--lock", type=Path, default=DEFAULT_LOCK, help="lock file to write")
    build.add_argument("--quiet", action="store_true", help="no progress bar")
    push = sub.add_parser("push", help="push the locked images to a registry, record their digests")
    push.add_argument("--registry", required=True, help="e.g. 127.0.0.1:5000 or ghcr.io/org")
    push.add_argument("--lock", type=Path, default=DEFAULT_LOCK)
    pull = sub.add_parser("pull", help="pull the images of a lock file by digest and verify them")
    pull.add_argument("--lock", type=Path, required=True)
    lst = sub.add_parser("list", help="the planned images, their tags and whether they exist")
    lst.add_argument("--toolchain", metavar="IMAGE")
    clean = sub.add_parser("clean", help="remove outdated builds of the images the lock file names")
    clean.add_argument("--lock", type=Path, default=DEFAULT_LOCK)
    clean.add_argument("--all", action="store_true", help="remove every popcorn image")
    host = sub.add_parser("host-toolchain", help="import a toolchain image made from this host (no registry)")
    host.add_argument("--kind", choices=("python", "skeleton"), default="python")
    host.add_argument("--python", default=sys.executable, help="interpreter whose torch/Triton go in")
    host.add_argument("--force", action="store_true")


def main(args: argparse.Namespace) -> int:
    action = args.images_command
    return int({"build": cmd_build, "push": cmd_push, "pull": cmd_pull, "list": cmd_list,
                "clean": cmd_clean, "host-toolchain": cmd_host_toolchain}[action](args))


def cmd_build(args: argparse.Namespace) -> int:
    settings = Settings()
    if args.write_dockerfiles:
        for path in write_dockerfiles(settings):
            print(f"wrote {path}")
    client = engine()
    specs = select(plan(settings, args.toolchain, client, args.translation), args.only)
    check_dockerfiles(specs)
    report = build_all(client, specs, settings, force=args.force, progress=not args.quiet)
    for line in report.failed:
        print(f"error: {line}", file=sys.stderr)
    if report.dropped:
        print(f"error: not built because what they build on failed: {', '.join(report.dropped)}", file=sys.stderr)
    print(f"images: {len(report.built)} built, {len(report.skipped)} unchanged, {len(report.failed)} failed, "
          f"{len(report.dropped)} dropped")
    if report.failed or report.dropped:
        return 1  # the lock file is left as it was
    write_lock(args.lock, merge_lock(args.lock, lock_entries(client, specs), args.toolchain))
    print(f"lock: {args.lock}")
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    import docker.errors

    client = engine()
    lock = read_lock(args.lock)
    registry = args.registry.rstrip("/")
    for entry in lock["images"]:
        ref = f"{entry['name']}:{entry['tag']}"
        if not _exists(client, entry["id"]):
            raise UserError(f"{args.lock}: image {ref} is not on this engine (build or pull it first)")
        repository = f"{registry}/{entry['name']}"
        client.images.get(entry["id"]).tag(repository, entry["tag"])
        digest = None
        try:
            for chunk in client.api.push(repository, tag=entry["tag"], stream=True, decode=True):
                if "error" in chunk:
                    raise UserError(f"registry {registry} refused {ref}: {chunk['error']}")
                digest = (chunk.get("aux") or {}).get("Digest", digest)
        except docker.errors.DockerException as exc:
            raise UserError(f"registry {registry} refused {ref}: {exc}") from exc
        if not digest:
            raise UserError(f"registry {registry} returned no digest for {ref}")
        entry["repository"], entry["digest"] = repository, digest
        print(f"pushed {repository}@{digest}")
    write_lock(args.lock, lock)  # only after every push succeeded
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    import docker.errors

    client = engine()
    lock = read_lock(args.lock)
    for entry in lock["images"]:
        if not entry.get("repository") or not entry.get("digest"):
            raise UserError(f"{args.lock}: {entry['name']} has no registry digest (push it first)")
        source = f"{entry['repository']}@{entry['digest']}"
        try:
            image = client.images.pull(source)
        except docker.errors.DockerException as exc:
            raise UserError(f"{args.lock}: cannot pull {source}: {exc}") from exc
        if image.id != entry["id"]:
            raise UserError(f"{args.lock}: {source} is image {image.id[:19]}, the lock records "
                            f"{entry['id'][:19]}: digest mismatch")
        image.tag(entry["name"], entry["tag"])
        print(f"pulled {source} -> {entry['name']}:{entry['tag']}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    client = engine()
    rows = []
    for spec in plan(Settings(), args.toolchain, client):
        if spec.dockerfile is not None and not spec.dockerfile.is_file():
            rows.append([spec.kind, spec.name, "no Dockerfile", "-"])
            continue
        present = _exists(client, spec.ref)
        size = client.images.get(spec.ref).attrs.get("Size", 0) / 1e6 if present else None
        rows.append([spec.kind, spec.ref, "yes" if present else "no", f"{size:.0f}" if size else "-"])
    print(tabulate(rows, headers=["layer", "image", "built", "MB"]))
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    """Remove outdated builds: popcorn images named in the lock file whose id is not the
    locked one (and, with --all, every popcorn image). Images of other names are left
    alone, so one checkout's clean never removes what another one built."""
    import docker.errors

    client = engine()
    locked: dict[str, str] = {}
    if not args.all:
        if not args.lock.exists():
            raise UserError(f"no lock file at {args.lock}: pass --lock FILE, or --all to remove every popcorn image")
        locked = {e["name"]: e["id"] for e in read_lock(args.lock)["images"]}
    removed = 0
    for image in client.images.list(filters={"label": "popcorn.image"}):
        name = (image.labels or {}).get("popcorn.image", "")
        if not args.all and (name not in locked or locked[name] == image.id):
            continue
        for tag in image.tags or [image.id]:
            try:
                client.images.remove(tag, force=True)
                removed += 1
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                print(f"warning: cannot remove {tag}: {exc.explanation}", file=sys.stderr)
    client.images.prune(filters={"dangling": True})
    print(f"removed {removed} image tag(s)")
    return 0


def cmd_host_toolchain(args: argparse.Namespace) -> int:
    client = engine()
    started = time.monotonic()
    ref = build_host_toolchain(client, args.kind, python=args.python, force=args.force)
    size = client.images.get(ref).attrs.get("Size", 0) / 1e6
    print(ref)
    print(f"{ref}: {size:.0f} MB, {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


# -- toolchain images assembled from this host (`images host-toolchain`) -------------
#
# Two kinds, both made by `docker import` of a root file system built here, with no
# registry:
# - python: this host's Python (relocated to /opt/python) with torch, Triton and numpy,
#   the shell tools the sandbox uses, and every shared library they load (ldd closure).
#   CI builds the real base/domain/problem layers on top of it and scores on the CPU.
# - skeleton: an empty root (folders, the merged-/usr links, /etc/passwd) for a host
#   whose /usr and /opt are bind-mounted read-only into the container (the GPU machine).

PYTHON_PREFIX = "/opt/python"
# torch, Triton (interpreter on a CPU), numpy and what they import
DISTRIBUTIONS = ("torch", "triton", "numpy", "typing_extensions", "filelock", "sympy", "mpmath",
                 "networkx", "jinja2", "MarkupSafe", "fsspec", "setuptools", "tqdm", "certifi")
# Parts not needed to run on a CPU (GPU back ends of Triton, the stdlib's tests and IDE)
EXCLUDE = re.compile(r"(^|/)(test|idlelib|tkinter|ensurepip|lib2to3|config-3[^/]*)/"
                     r"|triton/backends/(amd|nvidia)/(bin|lib)/|triton/_C/libproton")
TOOLS = ("sh", "bash", "timeout", "sleep", "cat", "env", "id", "ls", "mkdir", "rm", "cp", "mv",
         "tar", "grep", "head", "tail", "kill", "true", "false", "echo", "uname", "nproc", "sync",
         "chmod", "touch", "wc", "dd", "ps", "sed", "find", "xargs", "stat", "date", "tr", "sort",
         "uniq", "cut", "which", "od", "diff", "du", "df", "awk", "nice", "printf", "basename", "dirname")
PASSWD = "root:x:0:0:root:/root:/bin/sh\npopcorn:x:1000:1000:popcorn:/tmp:/bin/sh\n"
GROUP = "root:x:0:\npopcorn:x:1000:\n"
SKELETON_DIRS = ("etc", "tmp", "work", "proc", "sys", "dev", "root", "popcorn", "usr", "opt", "sbin",
                 "var/tmp", "run")


def host_python_files(python: str = sys.executable) -> dict[str, Path]:
    """Map of image path -> host path for the Python runtime, its packages and libraries."""
    info = json.loads(subprocess.check_output([python, "-c", _PROBE], text=True))
    prefix, version = Path(info["prefix"]), info["version"]
    files: dict[str, Path] = {}
    exe = Path(info["executable"]).resolve()
    files[f"{PYTHON_PREFIX}/bin/python{version}"] = exe
    for lib in (prefix / "lib").glob("libpython*.so*"):
        files[f"{PYTHON_PREFIX}/lib/{lib.name}"] = lib
    stdlib = Path(info["stdlib"])
    for path in _walk(stdlib, skip=("site-packages", "dist-packages")):
        rel = path.relative_to(stdlib).as_posix()
        if not EXCLUDE.search(rel + ("/" if path.is_dir() else "")):
            files[f"{PYTHON_PREFIX}/lib/python{version}/{rel}"] = path
    site = f"{PYTHON_PREFIX}/lib/python{version}/site-packages"
    for dist_root, dist_files in info["dists"].values():
        for rel in dist_files:
            host = Path(dist_root) / rel
            if host.is_file() and not EXCLUDE.search(rel) and ".." not in rel:
                files[f"{site}/{rel}"] = host
    for tool in TOOLS:
        found = shutil.which(tool)
        if found:
            files[f"/usr/bin/{tool}"] = Path(found).resolve()
    for inside, host in list(_library_closure(files.values()).items()):
        files.setdefault(inside, host)
    return files


_PROBE = r"""
import importlib.metadata as md, json, sys, sysconfig
dists = {}
for name in %r:
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    # each distribution relative to its own folder: a venv with --system-site-packages
    # finds torch in the base interpreter's site-packages, not in the venv's
    dists[name] = [str(d.locate_file("")), [str(f) for f in (d.files or [])]]
print(json.dumps({"prefix": sys.base_prefix, "executable": sys.executable,
                  "version": "%%d.%%d" %% sys.version_info[:2],
                  "stdlib": sysconfig.get_paths()["stdlib"],
                  "site": sysconfig.get_paths()["purelib"], "dists": dists}))
""" % (DISTRIBUTIONS,)


def _walk(root: Path, skip: tuple[str, ...]) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip]
        for name in filenames:
            yield Path(dirpath) / name


def _library_closure(paths: Iterable[Path]) -> dict[str, Path]:
    """Every shared library outside the copied trees that the ELF files load (via ldd)."""
    found: dict[str, Path] = {}
    for path in paths:
        if not _is_elf(path):
            continue
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
        for line in out.splitlines():
            match = re.search(r"(/\S+) \(0x", line)
            if not match:
                continue
            lib = match.group(1)
            if "/site-packages/" in lib or "/.pyenv/" in lib:
                continue  # inside the copied trees already (or found through them)
            # /lib is often a link to usr/lib: store under the real folder, found through the link
            inside = os.path.join(os.path.realpath(os.path.dirname(lib)), os.path.basename(lib))
            found[inside] = Path(lib).resolve()
    return found


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


ROOTFS_LAYOUT = 2  # bump when write_rootfs changes what every such image holds


def _fingerprint(files: dict[str, Path]) -> str:
    digest = hashlib.sha256(f"layout {ROOTFS_LAYOUT}\n{SKELETON_DIRS}\n{PASSWD}".encode())
    for inside in sorted(files):
        stat = files[inside].stat()
        digest.update(f"{inside}\0{stat.st_size}\0{int(stat.st_mtime)}\n".encode())
    return digest.hexdigest()


def write_rootfs(out: io.BufferedIOBase, files: dict[str, Path], *, merged_usr_links: bool = True) -> None:
    """A root file system as a tar stream: skeleton folders, /etc, then `files`."""
    with tarfile.open(fileobj=out, mode="w|") as tar:
        for folder in SKELETON_DIRS:
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder in ("tmp", "var/tmp") else 0o755
            tar.addfile(info)
        if merged_usr_links:
            # not sbin: the engine bind-mounts its init at /sbin/docker-init, which must not
            # resolve into a read-only /usr bound from the host
            for name in ("bin", "lib", "lib64", "lib32", "libx32"):
                host = Path("/") / name
                if host.is_symlink():
                    info = tarfile.TarInfo(name)
                    info.type, info.linkname = tarfile.SYMTYPE, os.readlink(host)
                    tar.addfile(info)
        for name, text in (("etc/passwd", PASSWD), ("etc/group", GROUP)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for inside in sorted(files):
            host = files[inside]
            info = tar.gettarinfo(str(host), arcname=inside.lstrip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = (info.mode | 0o444 | (0o111 if info.mode & 0o111 else 0)) & 0o7755
            with open(host, "rb") as handle:
                tar.addfile(info, handle)


def build_host_toolchain(client: Any, kind: str, repository: str = "popcorn/host-toolchain",
          python: str = sys.executable, force: bool = False) -> str:
    """Import the image (or find it already imported); returns `repository:tag`."""
    import docker.errors

    files = host_python_files(python) if kind == "python" else {}
    tag = f"{kind}-{_fingerprint(files)[:16]}"
    ref = f"{repository}:{tag}"
    images = client.images  # type: ignore[attr-defined]
    if not force:
        try:
            images.get(ref)
            return ref
        except docker.errors.ImageNotFound:
            pass
    changes = [f"ENV PATH={PYTHON_PREFIX}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
               f"ENV LD_LIBRARY_PATH={PYTHON_PREFIX}/lib", "ENV LANG=C.UTF-8",
               f'LABEL popcorn.toolchain="{kind}"']
    with tempfile.TemporaryDirectory(prefix="popcorn-rootfs-") as tmp:
        tar_path = Path(tmp) / "rootfs.tar"
        with open(tar_path, "wb") as out:
            write_rootfs(out, files)
        if kind == "python":
            _add_python_links(tar_path)
        client.api.import_image_from_file(str(tar_path), repository=repository, tag=tag,  # type: ignore[attr-defined]
                                          changes=changes)
    images.get(ref)  # raises ImageNotFound when the import did not land
    return ref


def _add_python_links(tar_path: Path) -> None:
    """python3 and python next to python3.X (appended to the finished archive)."""
    with tarfile.open(tar_path, "r:") as tar:
        exe = next(m.name for m in tar if re.fullmatch(r"opt/python/bin/python3\.\d+", m.name))
    with tarfile.open(tar_path, "a:") as tar:
        for link in ("python3", "python"):
            info = tarfile.TarInfo(f"opt/python/bin/{link}")
            info.type, info.linkname = tarfile.SYMTYPE, Path(exe).name
            tar.addfile(info)
