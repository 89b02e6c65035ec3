"""GPUs in docker sandboxes (run on the GPU machine by scripts/gpu/docker_on_device.sh):
one GPU per scoring container, and every GPU of a multi-GPU task in ONE container with
a large /dev/shm and memlock unlimited, NCCL between them."""
from __future__ import annotations

import textwrap

import pytest

from .conftest import GPUS

pytestmark = [pytest.mark.docker, pytest.mark.gpu]


@pytest.mark.skipif(not GPUS, reason="POPCORN_TEST_DOCKER_GPUS is not set")
def test_one_gpu_visible_and_usable(make_sandbox):
    sb = make_sandbox(gpus=GPUS[:1], memory_bytes=16 << 30)
    r = sb.exec([sb.python, "-c", "import torch; x = torch.ones(1 << 20, device='cuda'); "
                 "print(torch.cuda.device_count(), torch.cuda.get_device_name(0), int(x.sum()))"], timeout_s=300)
    assert r.returncode == 0, r.stderr[-3000:]
    count, *_, total = r.stdout.split()
    assert count == "1" and total == str(1 << 20), r.stdout


@pytest.mark.skipif(len(GPUS) < 2, reason="needs two GPUs (POPCORN_TEST_DOCKER_GPUS=0,1)")
def test_multi_gpu_nccl_in_one_container(make_sandbox):
    sb = make_sandbox(gpus=GPUS, memory_bytes=64 << 30, shm_bytes=16 << 30, pids=1024, cpus=8.0)
    sb.put_files({"allreduce.py": textwrap.dedent("""
        import os, torch, torch.distributed as dist, torch.multiprocessing as mp
        def rank_main(rank, world):
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29555")
            dist.init_process_group("nccl", rank=rank, world_size=world)
            torch.cuda.set_device(rank)
            x = torch.full((1 << 20,), float(rank + 1), device="cuda")
            dist.all_reduce(x)
            assert x[0].item() == world * (world + 1) / 2, x[0].item()
            if rank == 0:
                print("allreduce ok", world, x[0].item(), flush=True)
            dist.destroy_process_group()
        if __name__ == "__main__":
            world = torch.cuda.device_count()
            mp.spawn(rank_main, args=(world,), nprocs=world)
    """).encode()})
    r = sb.exec([sb.python, "allreduce.py"], timeout_s=300,
                env={"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"})
    assert r.returncode == 0 and f"allreduce ok {len(GPUS)}" in r.stdout, (r.stdout[-2000:], r.stderr[-3000:])
    shm = sb.exec(["sh", "-c", "df -k /dev/shm | tail -1; ulimit -l"], timeout_s=10).stdout.split()
    assert int(shm[1]) >= (16 << 20) - 1024 and shm[-1] == "unlimited", shm
