"""fairq in front of real Celery workers (Redis broker)."""
