"""A straggler simulator that drives the real detector scoring and the real decision core.

``models`` (generative timing models), ``faults`` (what breaks, from when, ramps, host
faults), ``pauses`` (job-wide eval/checkpoint/GC stalls), ``noise`` (drift and jitter at
other strengths), ``restarts`` (new incarnations with fresh detector state),
``scenarios`` (named cases with ground truth), ``detection`` (the detector's scoring
played for N ranks), ``runner`` (reports into ``engine.decide``; trace replay),
``nvrx_rule`` (NVRx's published rule, the baseline), ``quality`` (precision, recall,
times, false actions), ``goals`` (issue #18's goals over runs), ``plot`` (heatmap).
"""
