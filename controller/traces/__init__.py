"""Recorded traces in and out of the controller's ScoreReport JSONL: per-operation
traces and PyTorch profiler traces imported through the detector's own scoring
(``pacekeeper trace import``), and the live history of the ScoreBoard or a
StragglerReport exported (``pacekeeper export``), for ``pacekeeper replay``.

A folder of its own because it reads users' files and the cluster (I/O), unlike the
simulator, whose windows it shares: an imported trace becomes the same
``WindowSummary`` a simulated job produces, scored by the same ``RealScoring``.
"""
