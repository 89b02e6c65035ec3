#!/usr/bin/env bash
# Reports: matplotlib (Pareto plot) and pyarrow (Parquet export) from PyPI, and Debian's
# chromium for the test that renders the HTML page headless. Idempotent and quiet; fails loudly.
set -euo pipefail

if ! python3 -c 'import matplotlib, pyarrow' >/dev/null 2>&1; then
    python3 -m pip install -q 'matplotlib>=3.7' 'pyarrow>=14'
fi
python3 -c 'import matplotlib, pyarrow' || { echo "report.sh: matplotlib/pyarrow did not import" >&2; exit 1; }

if ! command -v chromium >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
command -v chromium >/dev/null || { echo "report.sh: chromium is not on PATH after install" >&2; exit 1; }
echo "report.sh: matplotlib $(python3 -c 'import matplotlib; print(matplotlib.__version__)'), pyarrow $(python3 -c 'import pyarrow; print(pyarrow.__version__)'), $(chromium --version 2>/dev/null | head -1)"
