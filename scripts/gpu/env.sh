# Sourced by every scripts/gpu/*.sh on the device machine: carried wheels, a clean
# PYTHONPATH with the repository, and NVLink multicast off (it can take a shared host's
# GPUs out of service).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 \
        || echo "env.sh: carried wheels did not install" >&2
    export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
