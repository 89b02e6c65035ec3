#!/usr/bin/env bash
# The Ray executor and its tests: Ray core from PyPI (the wheel is ~80 MB, no extras:
# no dashboard, no autoscaler cloud SDKs). Idempotent and quiet; fails loudly.
set -euo pipefail

RAY_SPEC='ray==2.60.0'   # the version the tests ran with; clusters need one Ray version throughout
if ! python3 -c "import ray, sys; sys.exit(ray.__version__ != \"${RAY_SPEC#ray==}\")" >/dev/null 2>&1; then
    python3 -m pip install -q --disable-pip-version-check "$RAY_SPEC"
fi
python3 -c 'import ray.cluster_utils' || { echo "executors.sh: ray did not import" >&2; exit 1; }
echo "executors.sh: ray $(python3 -c 'import ray; print(ray.__version__)')"
