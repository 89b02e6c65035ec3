"""probability/l3/distributed_parallel_tempering: replica-exchange MCMC for the 2-D Ising model.

R replicas (periodic L x L lattices) over W ranks; replica i lives on the rank whose block
[r*R//W, (r+1)*R//W) holds i. Round rho: every replica does n sweeps of heat-bath Gibbs
(as probability/l1/gibbs_ising_checkerboard, keyed by replica id and GLOBAL sweep index)
at its current temperature; energies are all_gathered; then adjacent temperatures (k, k+1)
with k = rho (mod 2) swap their replicas iff cb_uniform(seed, rho, k) < exp((b_{k+1} - b_k)
(E_{k+1} - E_k)) in float64. Swaps exchange temperature labels, never lattices.
"""
import torch
import torch.distributed as dist
import torch.nn as nn

from orchestrator.runner.cbrng import cb_uniform


def block(n, world_size, rank):
    return rank * n // world_size, (rank + 1) * n // world_size


def sweep(s, p_up_rows, seed, replica_ids, sweep_index):
    """One checkerboard sweep of every local lattice; p_up_rows [R_r, 5] by current temperature."""
    side = s.shape[-1]
    site = torch.arange(side * side, device=s.device).view(1, side, side)
    colour_of_site = (torch.arange(side, device=s.device).view(-1, 1) + torch.arange(side, device=s.device)) % 2
    rid = replica_ids.view(-1, 1, 1)
    for colour in (0, 1):
        field = (s.roll(1, 1) + s.roll(-1, 1) + s.roll(1, 2) + s.roll(-1, 2)).long()  # in {-4..4}
        u = cb_uniform(seed, rid, 2 * sweep_index + colour, site)
        threshold = torch.gather(p_up_rows, 1, ((field + 4) // 2).flatten(1)).view_as(u)
        new = torch.where(u < threshold, 1, -1).to(s.dtype)
        s = torch.where(colour_of_site == colour, new, s)
    return s


def energy(s):
    """E = -sum over nearest-neighbour pairs (each pair once, periodic) of s_i s_j, int64."""
    s = s.long()
    return -(s * s.roll(-1, 1) + s * s.roll(-1, 2)).sum((1, 2))


def gather_energies(e_local, n_total):
    world = dist.get_world_size()
    width = -(-n_total // world)
    padded = torch.zeros(width, dtype=torch.int64, device=e_local.device)
    padded[: e_local.numel()] = e_local
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    return torch.cat([p[: hi - lo] for p, (lo, hi) in zip(parts, (block(n_total, world, r) for r in range(world)))])


class Model(nn.Module):
    def __init__(self, sweeps_per_round, rounds):
        super().__init__()
        self.sweeps, self.rounds = int(sweeps_per_round), int(rounds)

    def forward(self, spins, betas, p_up, seed):
        """spins int8 [R_r, L, L] (this rank's replicas), betas float64 [R] increasing,
        p_up float32 [R, 5] per temperature, seed int64 scalar."""
        n = betas.numel()
        lo, hi = block(n, dist.get_world_size(), dist.get_rank())
        replica_ids = torch.arange(lo, hi, device=spins.device)
        temp_of = torch.arange(n, device=spins.device)  # temperature index of every replica
        s, temps, energies = spins.clone(), [], []
        for rho in range(self.rounds):
            for k in range(self.sweeps):
                s = sweep(s, p_up[temp_of[lo:hi]], seed, replica_ids, rho * self.sweeps + k)
            e = gather_energies(energy(s), n)  # [R] by replica
            energies.append(e)
            rep_at = torch.argsort(temp_of)  # replica at every temperature
            for k in range(rho % 2, n - 1, 2):
                a, b = rep_at[k], rep_at[k + 1]
                log_ratio = (betas[k + 1] - betas[k]) * (e[b] - e[a]).double()
                if float(cb_uniform(seed, rho, k)) < float(torch.exp(log_ratio.clamp(max=0.0))):
                    temp_of[a], temp_of[b] = k + 1, k
            temps.append(temp_of.clone())
        return torch.stack(temps), torch.stack(energies), s


def get_init_inputs(shape):
    return {"sweeps_per_round": shape["sweeps_per_round"], "rounds": shape["rounds"]}


def get_inputs(shape, generator, device, rank=0, world_size=1):
    n, side = shape["replicas"], shape["L"]
    betas = torch.linspace(0.25, 0.65, n, dtype=torch.float64)  # spans the critical beta_c = 0.4407
    field = torch.tensor([-4.0, -2.0, 0.0, 2.0, 4.0], dtype=torch.float64)
    p_up = (1.0 / (1.0 + torch.exp(-2.0 * betas[:, None] * field))).float()
    seed = torch.randint(0, 2**62, (), generator=generator, dtype=torch.int64)
    base = int(torch.randint(0, 2**62, (1,), generator=generator))
    lo, hi = block(n, world_size, rank)
    g = torch.Generator().manual_seed(base + 65537 * rank)
    spins = (torch.randint(0, 2, (hi - lo, side, side), generator=g) * 2 - 1).to(torch.int8)
    return spins.to(device), betas.to(device), p_up.to(device), seed.to(device)
