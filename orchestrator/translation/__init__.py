"""The hardware-translation track: port a production A100 kernel to H100.

Modules: `catalog` (task folders and manifests), `sources` (pinned upstream
artifacts: download, verify, unpack), `builds` (nvcc recipes and the build cache),
`prompts` (what the model is shown), `scoring` (correctness on hidden shapes, timing
against the H100 reference and the A100 baseline), `worker` (the process that loads
a built library and runs it), `commands` (`python -m orchestrator translation ...`).
"""
