"""The steps every mode is timed on: launch-bound (100 x Linear(256), forward and
backward, ~600 small kernels) and GEMM-bound (4 x bf16 8192^3). Apart from the modes
because a step is what both blocks of a pair run, timed or not."""

from __future__ import annotations

from collections.abc import Callable

Step = Callable[[], None]


def build_steps() -> dict[str, Step]:
    import torch

    torch.manual_seed(0)
    layers = [torch.nn.Linear(256, 256) for _ in range(100)]
    model = torch.nn.Sequential(*layers).cuda()
    x = torch.randn(64, 256, device="cuda")

    def launch_bound() -> None:
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def gemm_bound() -> None:
        c = a
        for _ in range(4):
            c = torch.matmul(a, b)
        del c

    return {"launch_bound": launch_bound, "gemm_bound": gemm_bound}
