"""The exception tree of the orchestrator (sandbox errors live in sandbox.base):

* PopcornError
  x UserError            bad input the user can fix: one line, exit 2
    + ProblemNotFound
    + ManifestError      names the file and JSON pointer
  x InfraError           the infrastructure failed; recorded as infra_error, never
                         charged to the model
"""
from __future__ import annotations


class PopcornError(Exception):
    """Base of every orchestrator error."""


class UserError(PopcornError):
    """Bad input (unknown id, unreadable file, invalid manifest): one clear line."""


class ProblemNotFound(UserError):
    pass


class ManifestError(UserError):
    def __init__(self, path: str, pointer: str, message: str):
        super().__init__(f"{path}: {pointer or '/'}: {message}")
        self.path, self.pointer, self.message = path, pointer, message


class InfraError(PopcornError):
    """The sandbox, engine, GPU or model endpoint failed: not the model's fault."""
