"""The detector inside training frameworks: one module per framework.

* ``lightning``: ``StragglerDetectionCallback``, a PyTorch Lightning callback taking
  the arguments of NVRx's (``nvidia_resiliency_ext.ptl_resiliency``, deprecated
  since 2026-03);
* ``huggingface``: ``StragglerDetectionCallback``, a Transformers ``TrainerCallback``;
* ``ray_train``: ``detect_stragglers``, for the workers of a Ray Train ``TorchTrainer``,
  reporting to the ScoreBoard, and the driver's reads of it;
* ``torchelastic``: what a torchrun restart keeps and changes in the job's identity.

Each module imports its framework inside functions and classes, so importing
``pacekeeper.detector`` (or this package) pulls in no training stack. docs/integrations.md
shows each in use.
"""
