"""The pure decision core: policy models, observations, attribution, ladder, budgets,
decisions, engine (with mark_records, job_window, job_decisions and run) and state.
Windows of reports in, decisions out.

Nothing in this folder does I/O: no clock, environment, file, socket or logging, and
no kubernetes, kopf, ray, torch or cupti import (tests/unit/test_layout.py and
tests/unit/test_import_isolation.py check every module of the folder).
"""
