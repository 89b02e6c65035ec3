"""robotics/l2/trajectory_collision_check: batched motion validation, robot spheres vs oriented boxes.

The chain is the URDF-style chain of robotics/l2/geometric_jacobian (7 joints, same
construction and seed). At every waypoint, FK gives each link frame (R_j, p_j) = T_j, the
frame after joint j; a sphere on link l has world centre R_l c_local + p_l. Its clearance to
an oriented box is the box SDF at the centre minus the radius; a waypoint's clearance is the
minimum over spheres and boxes, and a trajectory collides where a clearance is negative.
"""
import torch
import torch.nn as nn

N_JOINTS = 7
CHUNK_SPHERES = 2 ** 24       # sphere instances per pass (bounds the reference's memory)


def skew(x: torch.Tensor) -> torch.Tensor:
    z = torch.zeros_like(x[..., 0])
    return torch.stack([
        torch.stack([z, -x[..., 2], x[..., 1]], -1),
        torch.stack([x[..., 2], z, -x[..., 0]], -1),
        torch.stack([-x[..., 1], x[..., 0], z], -1),
    ], -2)


def rodrigues(axis: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Rotation by q [N] about the unit axis [3] -> [N,3,3]."""
    K = skew(axis)
    eye = torch.eye(3, dtype=q.dtype, device=q.device)
    return eye + torch.sin(q)[:, None, None] * K + (1 - torch.cos(q))[:, None, None] * (K @ K)


def link_frames(q, R_f, p_f, axis):
    """World rotation [N,J,3,3] and origin [N,J,3] of every link frame T_j (after joint j)."""
    N, J = q.shape
    R = torch.eye(3, dtype=q.dtype, device=q.device).expand(N, 3, 3)
    p = torch.zeros(N, 3, dtype=q.dtype, device=q.device)
    rotations, origins = [], []
    for j in range(J):
        p = p + R @ p_f[j]
        R = R @ R_f[j] @ rodrigues(axis[j], q[:, j])
        rotations.append(R)
        origins.append(p)
    return torch.stack(rotations, 1), torch.stack(origins, 1)


def box_sdf(points, centre, rotation, half):
    """Signed distance of points [...,3] to the box (centre [3], rotation [3,3], half-extents [3])."""
    local = (points - centre) @ rotation                        # R^T (c - centre), as row vectors
    d = local.abs() - half
    return d.clamp_min(0).norm(dim=-1) + d.max(-1).values.clamp_max(0)


class Model(nn.Module):
    def __init__(self, R_f, p_f, axis):
        super().__init__()
        self.register_buffer("R_f", R_f)          # [J,3,3] fixed parent -> joint rotation
        self.register_buffer("p_f", p_f)          # [J,3]   fixed parent -> joint offset
        self.register_buffer("axis", axis)        # [J,3]   unit joint axis in the joint frame

    def forward(self, q, sphere_link, sphere_centre, sphere_radius, box_centre, box_rotation, box_half):
        # q [B,T,J]; spheres: link int64 [S], local centre [S,3], radius [S]; boxes [O,3], [O,3,3], [O,3]
        B, T, J = q.shape
        S = sphere_link.shape[0]
        flat_q = q.reshape(B * T, J)
        clearance = []
        step = max(1, CHUNK_SPHERES // S)
        for start in range(0, B * T, step):
            R, p = link_frames(flat_q[start:start + step], self.R_f, self.p_f, self.axis)
            R, p = R[:, sphere_link], p[:, sphere_link]                       # [n,S,3,3], [n,S,3]
            centres = (R @ sphere_centre[:, :, None])[..., 0] + p
            best = torch.full(centres.shape[:2], torch.inf, dtype=q.dtype, device=q.device)
            for o in range(box_centre.shape[0]):
                best = torch.minimum(best, box_sdf(centres, box_centre[o], box_rotation[o], box_half[o]) - sphere_radius)
            clearance.append(best.min(-1).values)
        min_clearance = torch.cat(clearance).reshape(B, T)
        hits = min_clearance < 0
        colliding = hits.any(-1)
        first_hit = torch.where(colliding, hits.int().argmax(-1), -1).long()   # argmax: first maximum
        return min_clearance, colliding, first_hit


def _random_rotations(n: int, g: torch.Generator) -> torch.Tensor:
    Q = torch.linalg.qr(torch.randn(n, 3, 3, generator=g, dtype=torch.float64))[0]
    return Q * torch.linalg.det(Q)[:, None, None]


def chain_for(n_joints: int) -> dict:
    """The robotics/l2/geometric_jacobian chain (identical construction and seed), float32;
    T_ee is drawn (to keep the seed's sequence) but spheres do not use it."""
    g = torch.Generator().manual_seed(0)
    axis = torch.randn(n_joints, 3, generator=g, dtype=torch.float64)
    _random_rotations(1, g)
    torch.randn(3, generator=g, dtype=torch.float64)
    chain = dict(
        R_f=_random_rotations(n_joints, g),
        p_f=torch.randn(n_joints, 3, generator=g, dtype=torch.float64) * 0.2,
        axis=axis / axis.norm(dim=-1, keepdim=True),
    )
    return {k: v.float() for k, v in chain.items()}


def get_init_inputs(shape):
    return chain_for(N_JOINTS)


def get_inputs(shape, generator, device):
    B, T, S, O = shape["batch"], shape["horizon"], shape["spheres"], shape["obstacles"]
    f64 = torch.float64
    chain = chain_for(N_JOINTS)
    # trajectories: straight joint-space segments with a smooth random detour
    start = (2 * torch.rand(B, 1, N_JOINTS, generator=generator, dtype=f64) - 1) * torch.pi
    goal = start + (2 * torch.rand(B, 1, N_JOINTS, generator=generator, dtype=f64) - 1) * 1.5
    detour = 0.3 * torch.randn(B, 1, N_JOINTS, generator=generator, dtype=f64)
    s = torch.linspace(0, 1, T, dtype=f64)[None, :, None]
    q = start + (goal - start) * s + detour * torch.sin(torch.pi * s)
    # spheres along each link, towards the next joint
    link = torch.randint(0, N_JOINTS, (S,), generator=generator)
    offsets = torch.cat([chain["p_f"][1:].double(), torch.zeros(1, 3, dtype=f64)])
    along = torch.rand(S, 1, generator=generator, dtype=f64)
    local = along * offsets[link] + 0.03 * torch.randn(S, 3, generator=generator, dtype=f64)
    radius = 0.04 + 0.06 * torch.rand(S, generator=generator, dtype=f64)
    # boxes in a shell around the base; total volume roughly independent of their number
    direction = torch.nn.functional.normalize(torch.randn(O, 3, generator=generator, dtype=f64), dim=-1)
    centre = direction * (0.7 + 0.8 * torch.rand(O, 1, generator=generator, dtype=f64))
    size = 0.06 * (32 / O) ** 0.5
    half = (size * (0.4 + 1.2 * torch.rand(O, 3, generator=generator, dtype=f64))).clamp(max=0.35)
    rotation = _random_rotations(O, generator)
    tensors = (q.float(), link, local.float(), radius.float(), centre.float(), rotation.float(), half.float())
    return tuple(t.to(device) for t in tensors)


def check_output(inputs, output, expected, tolerance):
    """min_clearance within atol + rtol |ref| (and relative norm <= rel_norm_max); colliding and
    first_hit must match unless the deciding clearance is within the margin (per_output[1].atol)
    of 0: a candidate's first_hit t is accepted when every reference clearance before t is
    >= -margin and the one at t is < margin (t = -1: all >= -margin); colliding must equal
    first_hit >= 0, and may differ from the reference only if min_t clearance is within the margin."""
    clear, colliding, first_hit = output
    clear_ref, colliding_ref, first_ref = (t.to(clear.device) for t in expected)
    atol, rtol = float(tolerance["atol"]), float(tolerance["rtol"])
    margin = float(tolerance["per_output"][1]["atol"])
    err = (clear.double() - clear_ref.double()).abs()
    bad = err > atol + rtol * clear_ref.double().abs()
    if bool(bad.any()):
        return False, f"min_clearance: {int(bad.sum())} of {bad.numel()} outside atol={atol:g} rtol={rtol:g} " \
                      f"(max abs err {float(err.max()):.3g})"
    rel = float(err.norm() / clear_ref.double().norm().clamp_min(1e-30))
    if rel > float(tolerance.get("rel_norm_max", 1e-2)):
        return False, f"min_clearance: relative norm error {rel:.3g}"
    if bool((colliding != (first_hit >= 0)).any()):
        return False, "colliding must be true exactly where first_hit >= 0"
    B, T = clear_ref.shape
    deciding = clear_ref.min(-1).values
    flag_bad = (colliding != colliding_ref) & (deciding.abs() > margin)
    if bool(flag_bad.any()):
        return False, f"colliding: {int(flag_bad.sum())} trajectories differ although the deciding clearance is not within {margin:g} of 0"
    if bool(((first_hit < -1) | (first_hit >= T)).any()):
        return False, "first_hit out of range"
    t = torch.where(first_hit < 0, T, first_hit)
    before = torch.arange(T, device=clear.device)[None, :] < t[:, None]
    early = (before & (clear_ref < -margin)).any(-1)
    at = clear_ref.gather(1, t.clamp(max=T - 1)[:, None])[:, 0]
    late = (t < T) & (at >= margin)
    hit_bad = (first_hit != first_ref) & (early | late)
    if bool(hit_bad.any()):
        return False, f"first_hit: {int(hit_bad.sum())} trajectories disagree with the reference's clearances beyond {margin:g}"
    return True, f"min_clearance max abs err {float(err.max()):.3g}; flags consistent"
