"""Adapters that put fairq in front of Celery, RQ and Dramatiq (each behind its extra)."""
