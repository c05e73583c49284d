"""Tests of the integrations with the workers teams already run (Celery, RQ, Dramatiq)."""
