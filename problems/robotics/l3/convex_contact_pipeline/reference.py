"""robotics/l3/convex_contact_pipeline: AABB broad phase, then exact SAT penetration depth.

N convex polyhedra, instances of P prism templates. World AABBs of the posed vertices feed a
sort-and-sweep broad phase (robotics/l1/aabb_broadphase_pairs); every candidate pair is
tested on the face normals of both bodies and the normalized cross products of every pair
of edge directions. The minimum overlap over those axes is the penetration depth of two
convex polyhedra; a pair is in contact iff it is positive.
"""
import math

import torch
import torch.nn as nn

CANDIDATES_PER_CHUNK = 2 ** 22
SAT_ELEMENTS_PER_CHUNK = 2 ** 24        # pairs x axes x vertices per SAT chunk
PARALLEL_EDGES = 1e-6
N_TEMPLATES = 8


def broad_phase(lo, hi):
    """Pairs (i < j) whose closed AABBs overlap, sorted by (i, j): sort and sweep on x."""
    n = lo.shape[0]
    order = torch.argsort(lo[:, 0], stable=True)
    lo_s, hi_s = lo[order], hi[order]
    end = torch.searchsorted(lo_s[:, 0].contiguous(), hi_s[:, 0].contiguous(), right=True)
    start = torch.arange(1, n + 1, device=lo.device)
    counts = (end - start).clamp(min=0)
    cum = torch.cumsum(counts, 0)
    found, first = [], 0
    while first < n:
        done_before = int(cum[first - 1]) if first else 0
        last = max(int(torch.searchsorted(cum, done_before + CANDIDATES_PER_CHUNK, right=True)), first + 1)
        i = torch.repeat_interleave(torch.arange(first, last, device=lo.device), counts[first:last])
        offset = torch.arange(i.numel(), device=lo.device) - torch.repeat_interleave(
            cum[first:last] - counts[first:last] - done_before, counts[first:last])
        j = start[i] + offset
        keep = ((lo_s[i, 1:] <= hi_s[j, 1:]) & (lo_s[j, 1:] <= hi_s[i, 1:])).all(-1)
        a, b = order[i[keep]], order[j[keep]]
        found.append(torch.stack([torch.minimum(a, b), torch.maximum(a, b)], -1))
        first = last
    pairs = torch.cat(found) if found else torch.empty(0, 2, dtype=torch.long, device=lo.device)
    return pairs[torch.argsort(pairs[:, 0] * n + pairs[:, 1])]


def projection_overlap(axes, a, b):
    """min(max_a n.a - min_b n.b, max_b n.b - min_a n.a) for axes [c,X,3], vertices [c,V,3]."""
    pa = axes @ a.transpose(1, 2)
    pb = axes @ b.transpose(1, 2)
    return torch.minimum(pa.amax(-1) - pb.amin(-1), pb.amax(-1) - pa.amin(-1))


def sat(template_vertices, template_normals, template_edges, template_id, rotation, translation, i, j):
    """Minimum overlap and its axis (oriented from i to j) for pairs i, j [c]."""
    Ri, Rj = rotation[i], rotation[j]
    ti, tj = template_id[i], template_id[j]
    offset = translation[j] - translation[i]                       # body i's centroid is the origin here
    a = template_vertices[ti] @ Ri.transpose(1, 2)
    b = template_vertices[tj] @ Rj.transpose(1, 2) + offset[:, None]
    faces = torch.cat([template_normals[ti] @ Ri.transpose(1, 2), template_normals[tj] @ Rj.transpose(1, 2)], 1)
    ea = template_edges[ti] @ Ri.transpose(1, 2)
    eb = template_edges[tj] @ Rj.transpose(1, 2)
    cross = torch.linalg.cross(ea[:, :, None, :].expand(-1, -1, eb.shape[1], -1),
                               eb[:, None, :, :].expand(-1, ea.shape[1], -1, -1), dim=-1).flatten(1, 2)
    length = cross.norm(dim=-1)
    valid = length >= PARALLEL_EDGES
    edge_axes = cross / torch.where(valid, length, torch.ones_like(length))[..., None]
    axes = torch.cat([faces, edge_axes], 1)                        # order: faces_i, faces_j, edge pairs
    overlap = projection_overlap(axes, a, b)
    skip = torch.cat([torch.zeros_like(faces[..., 0], dtype=torch.bool), ~valid], 1)
    overlap = overlap.masked_fill(skip, math.inf)
    depth, best = overlap.min(-1)                                  # first minimum on ties
    normal = torch.gather(axes, 1, best[:, None, None].expand(-1, 1, 3))[:, 0]
    flip = (normal * offset).sum(-1) < 0
    return depth, torch.where(flip[:, None], -normal, normal)


class Model(nn.Module):
    def forward(self, template_vertices, template_normals, template_edges, template_id, rotation, translation):
        world = template_vertices[template_id] @ rotation.transpose(1, 2) + translation[:, None]   # [N,V,3]
        candidates = broad_phase(world.amin(1), world.amax(1))
        V, F, E = template_vertices.shape[1], template_normals.shape[1], template_edges.shape[1]
        chunk = max(1, SAT_ELEMENTS_PER_CHUNK // ((2 * F + E * E) * V))
        depths, normals = [], []
        for c0 in range(0, len(candidates), chunk):
            i, j = candidates[c0:c0 + chunk].unbind(1)
            d, n = sat(template_vertices, template_normals, template_edges, template_id, rotation, translation, i, j)
            depths.append(d)
            normals.append(n)
        depth = torch.cat(depths) if depths else template_vertices.new_empty(0)
        normal = torch.cat(normals) if normals else template_vertices.new_empty(0, 3)
        contact = depth > 0
        return candidates[contact], depth[contact], normal[contact]


def prism_templates(count: int, sides: int, g: torch.Generator):
    """Prisms over random convex polygons (jittered points on ellipses), centred on their
    vertex mean: vertices [P,2s,3], outward face normals [P,s+2,3], edge directions [P,s+1,3]."""
    step = 2 * math.pi / sides
    angle = torch.arange(sides) * step + (torch.rand(count, sides, generator=g) - 0.5) * 0.6 * step
    radii = 0.3 + 0.3 * torch.rand(count, 2, generator=g)
    half_height = 0.15 + 0.35 * torch.rand(count, 1, generator=g)
    x, y = radii[:, :1] * torch.cos(angle), radii[:, 1:] * torch.sin(angle)
    x, y = x - x.mean(1, keepdim=True), y - y.mean(1, keepdim=True)
    z = half_height.expand(-1, sides)
    vertices = torch.cat([torch.stack([x, y, -z], -1), torch.stack([x, y, z], -1)], 1)
    dx, dy = x.roll(-1, 1) - x, y.roll(-1, 1) - y                  # counter-clockwise polygon edges
    side = torch.nn.functional.normalize(torch.stack([dy, -dx, torch.zeros_like(dx)], -1), dim=-1)
    caps = torch.tensor([[0.0, 0, 1], [0, 0, -1]]).expand(count, 2, 3)
    normals = torch.cat([side, caps], 1)
    edges = torch.cat([torch.nn.functional.normalize(torch.stack([dx, dy, torch.zeros_like(dx)], -1), dim=-1),
                       torch.tensor([[0.0, 0, 1]]).expand(count, 1, 3)], 1)
    area = 0.5 * (x * y.roll(-1, 1) - x.roll(-1, 1) * y).sum(1)
    return vertices, normals, edges, area * 2 * half_height[:, 0]


def random_rotations(n: int, g: torch.Generator) -> torch.Tensor:
    w, x, y, z = torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=-1).unbind(-1)
    return torch.stack([
        torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        torch.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n, verts, packing = shape["n_bodies"], shape["verts"], shape["packing"]
    g = generator
    vertices, normals, edges, volume = prism_templates(N_TEMPLATES, verts // 2, g)
    template_id = torch.randint(0, N_TEMPLATES, (n,), generator=g)
    side = (float(volume[template_id].sum()) / packing) ** (1 / 3)      # a cube holding `packing` of solid
    translation = (torch.rand(n, 3, generator=g) - 0.5) * side
    rotation = random_rotations(n, g)
    return tuple(t.to(device) for t in (vertices, normals, edges, template_id, rotation, translation))


def check_output(inputs, output, expected, tolerance):
    """The contact set matches the reference except pairs whose depth is below the depth atol;
    depths within atol; a normal within the normal atol of the reference's, or else, when the
    minimizing axis is not unique, a unit normal oriented from i to j whose overlap equals the
    depth (recomputed in float64): every minimum-overlap axis is a valid answer."""
    # The harness returns the candidate's output on the CPU while the inputs and the reference
    # output may sit on the GPU: judge everything on the reference's device.
    device = expected[0].device
    pairs, depth, normal = (t.to(device) for t in output)
    pairs_ref, depth_ref, normal_ref = expected
    template_vertices, _, _, template_id, rotation, translation = (t.to(device) for t in inputs)
    depth_atol, normal_atol = tolerance["per_output"][1]["atol"], tolerance["per_output"][2]["atol"]
    n = template_id.shape[0]

    def posed_vertices(body: torch.Tensor) -> torch.Tensor:
        """World vertices [k,V,3] of the given bodies in float64."""
        local = template_vertices[template_id[body]].double()
        return local @ rotation[body].double().transpose(1, 2) + translation[body].double()[:, None]

    key, key_ref = pairs[:, 0] * n + pairs[:, 1], pairs_ref[:, 0] * n + pairs_ref[:, 1]
    if len(key) and (bool((pairs[:, 0] >= pairs[:, 1]).any()) or bool((key[1:] <= key[:-1]).any())):
        return False, "pairs must be (i < j), unique and sorted by (i, j)"
    shared = torch.isin(key, key_ref)
    shared_ref = torch.isin(key_ref, key)
    if bool((depth_ref[~shared_ref] >= depth_atol).any()):
        return False, f"{int((depth_ref[~shared_ref] >= depth_atol).sum())} contacts of the reference are missing"
    if bool(((depth[~shared] >= depth_atol) | (depth[~shared] <= 0)).any()):
        return False, f"{int((~shared).sum())} pairs are not contacts of the reference"
    d, d_ref = depth[shared].double(), depth_ref[shared_ref].double()
    if bool(((d - d_ref).abs() > depth_atol).any()):
        return False, f"depth off by {float((d - d_ref).abs().max()):.3g} (atol {depth_atol})"
    m, m_ref = normal[shared].double(), normal_ref[shared_ref].double()
    off = ((m - m_ref).abs() > normal_atol).any(-1)
    if bool(off.any()):
        i, j = pairs[shared][off].unbind(1)
        axis = m[off]
        pa, pb = (posed_vertices(i) * axis[:, None]).sum(-1), (posed_vertices(j) * axis[:, None]).sum(-1)
        overlap = torch.minimum(pa.amax(-1) - pb.amin(-1), pb.amax(-1) - pa.amin(-1))
        towards = (axis * (translation[j] - translation[i]).double()).sum(-1)
        valid = ((axis.norm(dim=-1) - 1).abs() <= normal_atol) & (towards >= 0) \
            & ((overlap - d_ref[off]).abs() <= depth_atol)
        if not bool(valid.all()):
            return False, f"{int((~valid).sum())} normals are neither the reference's nor a minimum-overlap axis"
    return True, f"{int(shared.sum())} contacts match, {int(off.sum())} on tied axes"
