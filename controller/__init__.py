"""Remediation controller: policy models, decision core, actuators and operator runtime."""
