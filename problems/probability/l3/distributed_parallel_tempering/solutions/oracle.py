"""Swap decisions on the device (no host round trip per pair: all candidate pairs of a round at
once, vectorised), energies from one fused reduction, one all_gather per round."""
import torch
import torch.distributed as dist
import torch.nn as nn

from orchestrator.runner.cbrng import cb_uniform


class ModelNew(nn.Module):
    def __init__(self, sweeps_per_round, rounds):
        super().__init__()
        self.sweeps, self.rounds = int(sweeps_per_round), int(rounds)

    def forward(self, spins, betas, p_up, seed):
        world, rank, dev = dist.get_world_size(), dist.get_rank(), spins.device
        n, side = betas.numel(), spins.shape[-1]
        lo, hi = rank * n // world, (rank + 1) * n // world
        width = -(-n // world)
        rid = torch.arange(lo, hi, device=dev).view(-1, 1, 1)
        site = torch.arange(side * side, device=dev).view(1, side, side)
        black = ((torch.arange(side, device=dev).view(-1, 1) + torch.arange(side, device=dev)) % 2) == 0
        temp_of = torch.arange(n, device=dev)
        s, temps, energies = spins.clone(), [], []
        for rho in range(self.rounds):
            table = p_up[temp_of[lo:hi]]  # [R_r, 5]
            for k in range(self.sweeps):
                for colour, mask in ((0, black), (1, ~black)):
                    field = (s.roll(1, 1) + s.roll(-1, 1) + s.roll(1, 2) + s.roll(-1, 2)).long()
                    u = cb_uniform(seed, rid, 2 * (rho * self.sweeps + k) + colour, site)
                    thr = torch.gather(table, 1, ((field + 4) >> 1).flatten(1)).view_as(u)
                    s = torch.where(mask, torch.where(u < thr, 1, -1).to(s.dtype), s)
            sl = s.long()
            e_local = -(sl * (sl.roll(-1, 1) + sl.roll(-1, 2))).sum((1, 2))
            padded = torch.zeros(width, dtype=torch.int64, device=dev)
            padded[: hi - lo] = e_local
            parts = [torch.empty_like(padded) for _ in range(world)]
            dist.all_gather(parts, padded)
            e = torch.cat([p[: (r + 1) * n // world - r * n // world] for r, p in enumerate(parts)])
            energies.append(e)
            rep_at = torch.argsort(temp_of)
            k = torch.arange(rho % 2, n - 1, 2, device=dev)
            a, b = rep_at[k], rep_at[k + 1]
            ratio = torch.exp(((betas[k + 1] - betas[k]) * (e[b] - e[a]).double()).clamp(max=0.0))
            accept = cb_uniform(seed, rho, k).double() < ratio
            temp_of = temp_of.clone()
            temp_of[a[accept]], temp_of[b[accept]] = k[accept] + 1, k[accept]
            temps.append(temp_of)
        return torch.stack(temps), torch.stack(energies), s
