"""An autograd step whose backward sleeps: a rank's backward work made exact, for the
gloo worlds that slow one rank's backward (``victim_worlds``, ``discovery_worlds``)."""

from __future__ import annotations

import time
from typing import Any

import torch


class SleepingBackward(torch.autograd.Function):
    """Identity forward; its backward sleeps ``seconds`` before passing the gradient on."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, seconds: float) -> torch.Tensor:
        ctx.seconds = seconds
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        time.sleep(ctx.seconds)
        return grad, None
