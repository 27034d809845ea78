"""A Kubernetes API stand-in for tests: kmock's emulator with the gaps closed.

See docs/testing.md. Fixtures live in tests/k8s/conftest.py.
"""

from .clients import DEFAULT_NAMESPACE, aio_client_configuration, client_configuration, kopf_login
from .emulator import ApiError, ApiServer
from .faults import Fault, FaultBook
from .history import History, RequestRecord
from .running import RunningServer, start_server
from .waiting import eventually

__all__ = [
    "DEFAULT_NAMESPACE",
    "ApiError",
    "ApiServer",
    "Fault",
    "FaultBook",
    "History",
    "RequestRecord",
    "RunningServer",
    "aio_client_configuration",
    "client_configuration",
    "eventually",
    "kopf_login",
    "start_server",
]
