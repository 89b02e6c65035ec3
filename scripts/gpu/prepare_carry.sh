#!/usr/bin/env bash
# Prepare the three ignored folders every device call carries (docs/verification.md):
#   .whl                        wheels for the GPU image's Python 3.12 that it lacks or has too old
#   .carry/translation-pins     the pinned upstream archives of the 16 translation tasks (no network there)
#   .lanes                      lane lists and measured ceilings, kept between calls of a session
# Idempotent; run here, on a fresh machine, before the first device call (about 36 MiB in all).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .whl .lanes .carry
if ! ls .whl/pydantic_settings-*.whl >/dev/null 2>&1; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl \
        pydantic==2.13.4 pydantic-core==2.46.4 pydantic-settings==2.14.1 annotated-types==0.7.0 \
        typing-inspection==0.4.2 typing-extensions python-dotenv==1.2.2 \
        jsonschema jsonschema-specifications referencing rpds-py attrs \
        tabulate tqdm pytest pluggy iniconfig packaging pytest-timeout
fi
.venv/bin/python -m orchestrator translation pack .carry/translation-pins
du -sh .whl .lanes .carry/translation-pins
