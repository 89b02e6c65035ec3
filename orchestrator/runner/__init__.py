"""Code that runs inside a sandbox: the trusted judge and the candidate's process.

Depends on the standard library and torch only, so that it can be baked into the
base image without the orchestrator's host-side dependencies.
"""
