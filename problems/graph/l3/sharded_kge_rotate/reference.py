"""graph/l3/sharded_kge_rotate: RotatE scoring with negatives over an entity table sharded by
id % W: each rank fetches the embeddings its triples need from their owners (all_to_all)."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

GAMMA = 12.0


def fetch_rows(shard, ids):
    """Rows of the global entity table for `ids` (entity e lives on rank e % W, local row e // W):
    dedup, bucket by owner, exchange counts, ids and rows with all_to_all_single."""
    world = dist.get_world_size()
    uniq, inverse = torch.unique(ids, return_inverse=True)
    owner = uniq % world
    order = torch.argsort(owner, stable=True)
    send_counts = torch.bincount(owner, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    ask, give = send_counts.tolist(), recv_counts.tolist()
    wanted = torch.empty(sum(give), dtype=ids.dtype, device=ids.device)
    dist.all_to_all_single(wanted, uniq[order].contiguous(), give, ask)
    rows = torch.empty(uniq.numel(), shard.shape[1], dtype=shard.dtype, device=shard.device)
    dist.all_to_all_single(rows, shard[wanted // world].contiguous(), ask, give)
    table = torch.empty_like(rows)
    table[order] = rows
    return table[inverse]


def rotate_score(h, phase, t):
    """gamma - sum_k |h_k e^{i phase_k} - t_k| over complex embeddings stored as [re | im]."""
    d = phase.shape[-1]
    h_re, h_im, t_re, t_im = h[..., :d], h[..., d:], t[..., :d], t[..., d:]
    cos, sin = torch.cos(phase), torch.sin(phase)
    dr, di = h_re * cos - h_im * sin - t_re, h_re * sin + h_im * cos - t_im
    return GAMMA - torch.sqrt(dr * dr + di * di).sum(-1)


class Model(nn.Module):
    def __init__(self, phases):
        super().__init__()
        self.phases = nn.Parameter(phases, requires_grad=False)

    def forward(self, shard, triples, negatives):
        b, k = negatives.shape
        rows = fetch_rows(shard, torch.cat([triples[:, 0], triples[:, 2], negatives.reshape(-1)]))
        h, t, neg = rows[:b], rows[b:2 * b], rows[2 * b:].view(b, k, -1)
        phase = self.phases[triples[:, 1]]
        pos = rotate_score(h, phase, t)
        negs = rotate_score(h[:, None], phase[:, None], neg)
        loss = (-F.logsigmoid(pos) - F.logsigmoid(-negs).mean(1)).mean()
        return pos, negs, loss


def get_init_inputs(shape):
    g = torch.Generator().manual_seed(4242 + shape["n_relations"] * 31 + shape["dim"])
    return {"phases": (torch.rand(shape["n_relations"], shape["dim"], generator=g) * 2 - 1) * torch.pi}


def get_inputs(shape, generator, device, rank=0, world_size=1):
    """Rank r's shard (entities r, r+W, ...) and its own triples and negative tails."""
    n, d = shape["n_entities"], shape["dim"]
    base = int(torch.randint(0, 2**62, (1,), generator=generator))
    g = torch.Generator().manual_seed(base + 8191 * rank)
    shard = 0.1 * torch.randn(len(range(rank, n, world_size)), 2 * d, generator=g)
    b, k = shape["batch"], shape["negatives"]
    triples = torch.stack([torch.randint(0, n, (b,), generator=g), torch.randint(0, shape["n_relations"], (b,), generator=g),
                           torch.randint(0, n, (b,), generator=g)], 1)
    negatives = torch.randint(0, n, (b, k), generator=g)
    return shard.to(device), triples.to(device), negatives.to(device)
