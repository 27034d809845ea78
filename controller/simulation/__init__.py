"""A straggler simulator that drives the real detector scoring and the real decision core.

``models`` (generative timing models), ``scenarios`` (named cases with ground truth),
``detection`` (the detector's scoring played for N ranks), ``runner`` (reports into
``engine.decide``; trace replay), ``nvrx_rule`` (NVRx's published rule, the baseline),
``quality`` (precision, recall, times, false actions), ``plot`` (heatmap).
"""
