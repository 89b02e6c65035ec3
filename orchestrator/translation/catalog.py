"""Translation task folders: `translation/<single|multi>/<task-id>/manifest.json`.

`load_tasks(translation_dir)` is what `python -m orchestrator list` calls; `find_task`
resolves one id; `validate_manifest` checks a manifest against
schemas/translation.schema.json and the rules a schema cannot express.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from orchestrator.config import REPO_ROOT
from orchestrator.errors import ManifestError, ProblemNotFound

TRACK_DIRS = {"single": "translation-single", "multi": "translation-multi"}
SCHEMA_DIR = REPO_ROOT / "schemas"


@dataclass(frozen=True)
class Task:
    path: Path
    manifest: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.manifest["id"])

    @property
    def track(self) -> str:
        return str(self.manifest["track"])

    @property
    def is_multi(self) -> bool:
        return self.track == "translation-multi"

    def file(self, name: str) -> Path:
        return self.path / name

    def as_record(self) -> dict[str, Any]:
        m = self.manifest
        return {"id": self.id, "title": m["title"], "family": m["family"], "track": self.track,
                "path": str(self.path), "manifest": m}


@lru_cache(maxsize=1)
def _validator(schema_dir: str) -> Any:
    import jsonschema
    from referencing import Registry, Resource

    schemas = {p.name: json.loads(p.read_text()) for p in Path(schema_dir).glob("*.schema.json")}
    registry: Registry = Registry()
    for name, schema in schemas.items():
        resource = Resource.from_contents(schema)
        registry = registry.with_resource(schema.get("$id", name), resource).with_resource(name, resource)
    schema = schemas["translation.schema.json"]
    return jsonschema.Draft202012Validator(schema, registry=registry)


def validate_manifest(manifest: dict[str, Any], path: Path, schema_dir: Path = SCHEMA_DIR) -> None:
    """Raise ManifestError (file and JSON pointer) on the first problem found."""
    errors = sorted(_validator(str(schema_dir)).iter_errors(manifest), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        pointer = "/" + "/".join(str(p) for p in err.absolute_path)
        raise ManifestError(str(path), pointer, err.message)
    folder = path.parent
    if manifest["id"] != folder.name:
        raise ManifestError(str(path), "/id", f"id {manifest['id']!r} differs from the folder name {folder.name!r}")
    expected_track = TRACK_DIRS.get(folder.parent.name)
    if expected_track and manifest["track"] != expected_track:
        raise ManifestError(str(path), "/track", f"a task under {folder.parent.name}/ has track {expected_track!r}")
    pins = manifest["pins"]
    refs = [("/a100/pin", manifest["a100"]["pin"]), ("/h100/pin", manifest["h100"]["pin"])]
    refs += [(f"/build/includes/{i}/pin", inc["pin"]) for i, inc in enumerate(manifest["build"]["includes"])]
    for side in ("a100", "h100"):
        refs += [(f"/{side}/includes/{i}/pin", inc["pin"]) for i, inc in enumerate(manifest[side].get("includes", []))]
    for pointer, key in refs:
        if key not in pins:
            raise ManifestError(str(path), pointer, f"names pin {key!r}, which is not under /pins")
    for side in ("a100", "h100"):
        if manifest[side]["main"] not in manifest[side]["sources"]:
            raise ManifestError(str(path), f"/{side}/main", "the main file must be listed in sources")
    for i, rel in enumerate(manifest["build"].get("local_includes", [])):
        if not (folder.parent.parent / rel).is_dir():
            raise ManifestError(str(path), f"/build/local_includes/{i}", f"{rel} is not a folder under translation/")
    _check_shapes(manifest, path)
    if manifest["glue"] == "complete":
        needed = [manifest["entry"]["header"], "task.py", "Dockerfile"]
        needed += [manifest[s]["adapter"] for s in ("a100", "h100") if "adapter" in manifest[s]]
        for name in needed:
            if not (folder / name).is_file():
                raise ManifestError(str(path), "/glue", f"glue is 'complete' but {name} is missing from the task folder")
    if manifest["track"] == "translation-multi":
        env = manifest.get("nccl_env", {})
        if env.get("NCCL_NVLS_ENABLE") != "0":
            raise ManifestError(str(path), "/nccl_env", "multi-GPU tasks must set NCCL_NVLS_ENABLE to \"0\" (no NVLink multicast)")
        ws = manifest["world_size"]
        if not (2 <= ws["min"] <= ws["default"] <= ws["max"]):
            raise ManifestError(str(path), "/world_size", "need 2 <= min <= default <= max")


def _check_shapes(manifest: dict[str, Any], path: Path) -> None:
    from orchestrator.runner import shapes

    params = manifest["shapes"]
    for name, spec in params.items():
        if spec.get("type", "int") == "choice":
            if spec["default"] not in spec["choices"]:
                raise ManifestError(str(path), f"/shapes/{name}/default", "default is not one of the choices")
            continue
        if not spec["min"] <= spec["default"] <= spec["max"]:
            raise ManifestError(str(path), f"/shapes/{name}/default", "default outside [min, max]")
        step = spec.get("multiple_of", 1)
        if spec.get("type", "int") == "int" and spec["default"] % step:
            raise ManifestError(str(path), f"/shapes/{name}/default", f"default is not a multiple of {step}")
    default = shapes.default_shape(params, "cuda")
    try:
        violated = shapes.satisfies(default, manifest.get("constraints", []))
    except shapes.FormulaError as exc:
        raise ManifestError(str(path), "/constraints", str(exc)) from exc
    if violated:
        raise ManifestError(str(path), "/constraints", f"the default shape violates {violated[0]!r}")
    for key in ("flops", "bytes"):
        try:
            shapes.evaluate(manifest[key], default)
        except shapes.FormulaError as exc:
            raise ManifestError(str(path), f"/{key}", str(exc)) from exc


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ManifestError(str(path), "", f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ManifestError(str(path), "", "a manifest is a JSON object")
    return data


def iter_tasks(translation_dir: Path, validate: bool = True) -> list[Task]:
    tasks = []
    for sub in TRACK_DIRS:
        for manifest_path in sorted((Path(translation_dir) / sub).glob("*/manifest.json")):
            manifest = _read(manifest_path)
            if validate:
                validate_manifest(manifest, manifest_path)
            tasks.append(Task(manifest_path.parent, manifest))
    return tasks


def load_tasks(translation_dir: str | Path) -> list[dict[str, Any]]:
    """Every task as {id, title, family, track, path, manifest}, validated, sorted by track then id."""
    return [t.as_record() for t in iter_tasks(Path(translation_dir))]


def find_task(task_id: str, translation_dir: str | Path) -> Task:
    for sub in TRACK_DIRS:
        manifest_path = Path(translation_dir) / sub / task_id / "manifest.json"
        if manifest_path.is_file():
            manifest = _read(manifest_path)
            validate_manifest(manifest, manifest_path)
            return Task(manifest_path.parent, manifest)
    known = ", ".join(t.id for t in iter_tasks(Path(translation_dir), validate=False)) or "none"
    raise ProblemNotFound(f"no translation task {task_id!r} under {translation_dir} (known: {known})")


def is_translation_id(problem_id: str) -> bool:
    return problem_id.startswith("tr-")
