"""The ``pacekeeper`` command line: ``app`` is the entry point, one module per group."""
