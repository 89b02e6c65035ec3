"""robotics/l1/imu_preintegration: on-manifold IMU preintegration (Forster et al. 2017) of B windows."""
import torch
import torch.nn as nn


def skew(x: torch.Tensor) -> torch.Tensor:
    z = torch.zeros_like(x[..., 0])
    return torch.stack([
        torch.stack([z, -x[..., 2], x[..., 1]], -1),
        torch.stack([x[..., 2], z, -x[..., 0]], -1),
        torch.stack([-x[..., 1], x[..., 0], z], -1),
    ], -2)


def so3_exp(phi: torch.Tensor) -> torch.Tensor:
    """Rodrigues; the second-order series I + [phi]x + 0.5 [phi]x^2 when |phi| < 1e-6."""
    theta = phi.norm(dim=-1)
    small = theta < 1e-6
    safe = torch.where(small, torch.ones_like(theta), theta)
    a = torch.where(small, torch.ones_like(theta), torch.sin(safe) / safe)
    b = torch.where(small, torch.full_like(theta, 0.5), (1 - torch.cos(safe)) / (safe * safe))
    K = skew(phi)
    eye = torch.eye(3, dtype=phi.dtype, device=phi.device)
    return eye + a[..., None, None] * K + b[..., None, None] * (K @ K)


class Model(nn.Module):
    def forward(self, gyro, accel, bias, dt):               # [B,T,3], [B,T,3], [B,6], scalar
        B, T, _ = gyro.shape
        R = torch.eye(3, dtype=gyro.dtype, device=gyro.device).expand(B, 3, 3)
        v = torch.zeros(B, 3, dtype=gyro.dtype, device=gyro.device)
        p = torch.zeros_like(v)
        for k in range(T):
            omega = gyro[:, k] - bias[:, :3]
            a = (R @ (accel[:, k] - bias[:, 3:])[..., None])[..., 0]      # rotated with R before its update
            p = p + v * dt + 0.5 * a * dt * dt
            v = v + a * dt
            R = R @ so3_exp(omega * dt)
        return R, v, p


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    b, t = shape["batch"], shape["T"]
    g = generator
    bias = torch.cat([0.01 * torch.randn(b, 3, generator=g), 0.05 * torch.randn(b, 3, generator=g)], -1)
    # a slowly varying body rate plus noise; specific force = gravity reaction plus motion
    rate = 0.5 * torch.randn(b, 1, 3, generator=g) + 0.05 * torch.randn(b, t, 3, generator=g).cumsum(1) / t ** 0.5
    gyro = rate + bias[:, None, :3]
    accel = torch.tensor([0.0, 0.0, 9.81]) + torch.randn(b, t, 3, generator=g) + bias[:, None, 3:]
    if b > 1:
        gyro[0] = bias[0, :3]                                 # one stationary window: |phi| < 1e-6 branch
    dt = torch.tensor(0.005)
    return tuple(x.to(device) for x in (gyro, accel, bias, dt))
