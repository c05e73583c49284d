"""fairq in front of the workers teams already run (Celery, RQ, Dramatiq), each behind its extra."""
