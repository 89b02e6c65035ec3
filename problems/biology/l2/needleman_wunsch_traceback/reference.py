"""biology/l2/needleman_wunsch_traceback: global alignment (affine gaps, Gotoh) with traceback."""
import torch
import torch.nn as nn

NEG = -(1 << 28)
# pointer byte per cell: bits 0-1 = H's choice (0 diagonal, 1 E, 2 F); bit 2 = E stays in E; bit 3 = F stays in F
DIAG, FROM_E, FROM_F = 0, 1, 2
PAIR, TARGET_ONLY, QUERY_ONLY, PAD = 0, 1, 2, -1


class Model(nn.Module):
    def __init__(self, gap_open: int = 5, gap_extend: int = 2):
        super().__init__()
        assert gap_open >= gap_extend >= 0, "the column scan for F needs gap_open >= gap_extend"
        self.go, self.ge = int(gap_open), int(gap_extend)

    def forward(self, query, target, qlen, tlen, subst):
        go, ge = self.go, self.ge
        batch, lq = query.shape
        lt = target.shape[1]
        dev = query.device
        rows = torch.arange(lq + 1, device=dev)
        border = torch.where(rows > 0, -(go + (rows - 1) * ge), 0).int()      # H_i0
        h = border.expand(batch, -1).clone()
        e = torch.full_like(h, NEG)
        ptr = torch.zeros(batch, lq + 1, lt + 1, dtype=torch.uint8, device=dev)
        ptr[:, 1:, 0] = QUERY_ONLY  # column 0: only query consumption is possible (handled in traceback)
        score = torch.where(tlen == 0, border[qlen], 0).int()
        for j in range(1, lt + 1):
            s = subst[query, target[:, j - 1:j]]                               # [B, Lq]
            e_ext, e_open = e - ge, h - go
            e = torch.maximum(e_ext, e_open)
            e[:, 0] = NEG
            h_top = torch.full((batch,), -(go + (j - 1) * ge), dtype=torch.int32, device=dev)
            diag = h[:, :-1] + s                                                # H_{i-1, j-1} + S
            h_no_f = torch.maximum(diag, e[:, 1:])
            col = torch.cat([h_top[:, None], h_no_f], 1)                        # H without F, row 0 = border
            # F_i = max_{k<i} H_k - go - (i-1-k) ge (exact with go >= ge), H_0 included
            best_above = torch.cummax(col + rows * ge, dim=1).values
            f = torch.full_like(col, NEG)
            f[:, 1:] = best_above[:, :-1] - go - (rows[1:] - 1) * ge
            new_h = torch.maximum(col, f)
            new_h[:, 0] = h_top
            # pointers (ties: diagonal, then E, then F; gaps stay open on ties)
            choice = torch.where(diag >= torch.maximum(e[:, 1:], f[:, 1:]), DIAG,
                                 torch.where(e[:, 1:] >= f[:, 1:], FROM_E, FROM_F))
            e_stay = (e_ext[:, 1:] >= e_open[:, 1:])
            f_prev_ext = f[:, :-1] - ge
            f_prev_open = new_h[:, :-1] - go
            f_stay = f_prev_ext >= f_prev_open
            ptr[:, 1:, j] = (choice | (e_stay.int() << 2) | (f_stay.int() << 3)).to(torch.uint8)
            h = new_h
            score = torch.where(tlen == j, h.gather(1, qlen[:, None])[:, 0], score)
        return score, self._traceback(ptr, qlen, tlen, lq + lt)

    @staticmethod
    def _traceback(ptr, qlen, tlen, max_ops):
        batch = ptr.shape[0]
        dev = ptr.device
        i, j = qlen.clone(), tlen.clone()
        state = torch.zeros(batch, dtype=torch.long, device=dev)     # 0 = H, 1 = E, 2 = F
        rev = torch.full((batch, max_ops), PAD, dtype=torch.int8, device=dev)
        n_ops = torch.zeros(batch, dtype=torch.long, device=dev)
        b = torch.arange(batch, device=dev)
        for _ in range(max_ops):
            live = (i > 0) | (j > 0)
            if not bool(live.any()):
                break
            p = ptr[b, i, j].long()
            # on the borders only one move exists
            state = torch.where(i == 0, torch.ones_like(state), torch.where(j == 0, torch.full_like(state, 2), state))
            h_state = state == 0
            state = torch.where(h_state, p & 3, state)                  # H resolves to diagonal, E or F here
            op = torch.where(state == 0, PAIR, torch.where(state == 1, TARGET_ONLY, QUERY_ONLY))
            rev[b, n_ops.clamp_max(max_ops - 1)] = torch.where(live, op, rev[b, n_ops.clamp_max(max_ops - 1)].long()).to(torch.int8)
            stay = torch.where(state == 1, (p >> 2) & 1, torch.where(state == 2, (p >> 3) & 1, 0))
            di = torch.where(state == 1, 0, 1) * live
            dj = torch.where(state == 2, 0, 1) * live
            # after the move: an open-gap state returns to H unless it stays (diagonal always returns to H)
            state = torch.where(live & (state != 0) & (stay == 1), state, torch.zeros_like(state))
            i, j = i - di, j - dj
            n_ops = n_ops + live.long()
        k = torch.arange(max_ops, device=dev)
        src = (n_ops[:, None] - 1 - k[None, :]).clamp_min(0)
        return torch.where(k[None, :] < n_ops[:, None], rev.gather(1, src), torch.full_like(rev, PAD))


def get_init_inputs(shape):
    return {"gap_open": 5, "gap_extend": 2}


def get_inputs(shape, generator, device):
    batch, lq, lt = shape["batch"], shape["len_q"], shape["len_t"]
    query = torch.randint(0, 4, (batch, lq), generator=generator)
    # targets: mutated copies of the queries with random indels, so alignments have real structure
    src = torch.cumsum(torch.randint(0, 3, (batch, lt), generator=generator).clamp_max(1) +
                       (torch.rand(batch, lt, generator=generator) < 0.05).long(), 1) - 1
    homolog = query.gather(1, src.clamp(0, lq - 1))
    keep = torch.rand(batch, lt, generator=generator) < 0.8
    target = torch.where(keep, homolog, torch.randint(0, 4, (batch, lt), generator=generator))
    qlen = torch.randint(lq // 2, lq + 1, (batch,), generator=generator)
    tlen = torch.randint(lt // 2, lt + 1, (batch,), generator=generator)
    subst = torch.where(torch.eye(4, dtype=torch.bool), 2, -3).int()
    return tuple(t.to(device) for t in (query, target, qlen, tlen, subst))
