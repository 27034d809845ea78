"""wrap_callables on a module function, class methods and an instance method; restore."""

from __future__ import annotations

import pytest
import wrap_targets
from wrap_targets import Bigger, Model

from pacekeeper.detector import CallableId, Detector


def test_callable_id_names_follow_nvrx_rules() -> None:
    assert str(CallableId(wrap_targets, "train_step")) == "wrap_targets.train_step"
    assert str(CallableId(Model, "forward")) == "wrap_targets.Model.forward"
    assert str(CallableId(Model(), "forward")) == "Model.forward"


def test_wrapped_callables_are_timed_and_then_restored() -> None:
    model = Model()
    originals = {
        "module": wrap_targets.train_step,
        "class": Model.__dict__["forward"],
        "classmethod": Model.__dict__["build"],
        "staticmethod": Model.__dict__["loss"],
    }
    ids = [
        CallableId(wrap_targets, "train_step"),
        CallableId(Model, "forward"),
        CallableId(Model, "build"),
        CallableId(Model, "loss"),
        CallableId(model, "forward"),
    ]
    Detector.initialize()
    Detector.wrap_callables(ids)

    assert wrap_targets.train_step(1) == 2
    assert Model().forward(3) == 6
    assert Bigger().forward(3) == 9  # subclasses still bind to themselves
    assert isinstance(Bigger.build(), Bigger)  # classmethod keeps its binding
    assert Model.loss(4) == -4 and Model().loss(4) == -4
    assert model.forward(5) == 10  # instance wrapper around the (wrapped) class method

    counts = {name: s.total_entry_cnt for name, s in Detector.custom_sections.items()}
    assert counts == {
        "wrap_targets.train_step": 1,
        "wrap_targets.Model.forward": 3,  # Model(), Bigger(), and inside the instance wrapper
        "wrap_targets.Model.build": 1,
        "wrap_targets.Model.loss": 2,
        "Model.forward": 1,
    }

    Detector.restore_original_callables()
    assert wrap_targets.train_step is originals["module"]
    assert Model.__dict__["forward"] is originals["class"]
    assert Model.__dict__["build"] is originals["classmethod"]
    assert Model.__dict__["loss"] is originals["staticmethod"]
    assert "forward" not in vars(model)  # no leftover shadow on the instance
    assert "forward" not in vars(Bigger)
    wrap_targets.train_step(1)
    assert Detector.custom_sections["wrap_targets.train_step"].total_entry_cnt == 1


def test_shutdown_restores_wrapped_callables() -> None:
    original = wrap_targets.train_step
    Detector.initialize()
    Detector.wrap_callables([CallableId(wrap_targets, "train_step")], profile_cuda=False)
    assert wrap_targets.train_step is not original
    Detector.shutdown()
    assert wrap_targets.train_step is original


def test_wrapping_an_inherited_method_on_a_subclass_restores_the_inherited_one() -> None:
    Detector.initialize()
    Detector.wrap_callables([CallableId(Bigger, "forward")])
    assert "forward" in vars(Bigger)
    assert Bigger().forward(2) == 6
    Detector.restore_original_callables()
    assert "forward" not in vars(Bigger)
    assert Bigger().forward(2) == 6


def test_wrapping_a_missing_attribute_names_the_callable() -> None:
    Detector.initialize()
    with pytest.raises(AttributeError, match=r"wrap_targets\.Model\.nope"):
        Detector.wrap_callables([CallableId(Model, "nope")])
    assert Detector.custom_sections == {}
