"""A run directory, `results/<run_id>/`, and how it survives crashes.

    run.json                  config, versions, device, run seed, planned episodes
    episodes.jsonl            one episode record per line (schemas/result.schema.json)
    transcripts/<episode>.json  messages, tool calls and outputs, per-call usage, artifact
    artifacts/<episode>.py    the submitted file
    work/<episode>/           host-side scratch of the tools

episodes.jsonl is the source of truth for resuming: a record is appended with one
write(2) on an O_APPEND descriptor and fsync'd, after its transcript and artifact are
on disk, so a crash leaves either the whole record or (power loss) a torn last line,
which `load_records` drops and `repair` truncates. An episode without a record is
re-run from the start. Records whose status is infra_error are not the model's doing:
`--resume` moves them to episodes.infra.jsonl (kept for audit) and re-runs them, so the
final file has exactly one record per planned episode.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


def atomic_write(path: Path, data: bytes) -> None:
    """Write a whole file or nothing (temp file + fsync + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path)

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def episodes(self) -> Path:
        return self.path / "episodes.jsonl"

    @property
    def infra_episodes(self) -> Path:
        return self.path / "episodes.infra.jsonl"

    def transcript(self, episode_id: str) -> Path:
        return self.path / "transcripts" / f"{episode_id}.json"

    def artifact(self, episode_id: str, suffix: str = ".py") -> Path:
        return self.path / "artifacts" / f"{episode_id}{suffix}"

    def workdir(self, episode_id: str) -> Path:
        return self.path / "work" / episode_id

    def exists(self) -> bool:
        return self.run_json.is_file()

    def read_run(self) -> dict[str, Any]:
        return dict(json.loads(self.run_json.read_text()))

    def write_run(self, info: dict[str, Any]) -> None:
        atomic_write(self.run_json, (json.dumps(info, indent=2, default=str) + "\n").encode())

    def write_transcript(self, episode_id: str, transcript: dict[str, Any]) -> None:
        atomic_write(self.transcript(episode_id), json.dumps(transcript, indent=1, default=str).encode())

    def write_artifact(self, episode_id: str, code: str, suffix: str = ".py") -> Path:
        path = self.artifact(episode_id, suffix)
        atomic_write(path, code.encode())
        return path

    def append_record(self, record: dict[str, Any], path: Path | None = None) -> None:
        line = (json.dumps(record, default=str) + "\n").encode()
        target = path or self.episodes
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)
            if written != len(line):  # a short write on a full disk: never leave half a line
                raise OSError(f"short write to {target}: {written} of {len(line)} bytes")
            os.fsync(fd)
        finally:
            os.close(fd)

    def load_records(self, path: Path | None = None) -> list[dict[str, Any]]:
        target = path or self.episodes
        if not target.is_file():
            return []
        records = []
        for line in target.read_bytes().split(b"\n"):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError:
                continue  # a torn last line from a crash: that episode re-runs
        return records

    def repair(self) -> int:
        """Truncate a torn last line; return the number of bytes removed."""
        if not self.episodes.is_file():
            return 0
        data = self.episodes.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep == len(data):
            return 0
        with open(self.episodes, "r+b") as f:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        return len(data) - keep

    def set_aside_infra(self) -> int:
        """Move infra_error records to episodes.infra.jsonl so those episodes re-run."""
        records = self.load_records()
        infra = [r for r in records if r.get("status") == "infra_error"]
        if not infra:
            return 0
        for record in infra:
            self.append_record(record, self.infra_episodes)
        kept = [r for r in records if r.get("status") != "infra_error"]
        atomic_write(self.episodes, _jsonl(kept))
        return len(infra)


def _jsonl(records: Iterable[dict[str, Any]]) -> bytes:
    return b"".join((json.dumps(r, default=str) + "\n").encode() for r in records)
