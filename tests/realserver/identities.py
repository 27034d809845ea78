"""The ServiceAccount identities that `real_cluster` issues static tokens for.

Tokens are fixed when kube-apiserver starts (its token file is read once), so every
identity a test of this tier authenticates as is listed here, before the session starts.
Tests bind them to Roles in their own namespaces; the identity's namespace need not exist.
"""

from __future__ import annotations

from cluster import ServiceAccountIdentity

IDENTITY_NAMESPACE = "pk-identities"
NO_ROLE = ServiceAccountIdentity(IDENTITY_NAMESPACE, "no-role")
ONE_REPORT = ServiceAccountIdentity(IDENTITY_NAMESPACE, "one-report")
SERVICE_ACCOUNTS = (NO_ROLE, ONE_REPORT)
