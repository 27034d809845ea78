"""Things to wrap in test_wrapping (a real module, so module-level wrapping is real)."""

from __future__ import annotations


def train_step(x: int) -> int:
    return x + 1


class Model:
    scale = 2

    def forward(self, x: int) -> int:
        return x * self.scale

    @classmethod
    def build(cls) -> Model:
        return cls()

    @staticmethod
    def loss(x: int) -> int:
        return -x


class Bigger(Model):
    scale = 3
