"""Confirmable requests: one flow (``flow.py``) for every kind (``kind.py``); the kinds by name are
``handlers/request_kinds.py``."""
