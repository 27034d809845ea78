"""The Kubernetes runtime around the core: the Kopf operator, level-based reconcile,
Lease leader election, the state store, metrics and structured logs. Talks to the API."""
