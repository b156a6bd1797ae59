"""Redaction of secrets in any shape, behind the public API of :mod:`services.redact`."""
