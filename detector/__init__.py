"""In-job straggler detector, a drop-in for ``nvidia_resiliency_ext.straggler``."""
