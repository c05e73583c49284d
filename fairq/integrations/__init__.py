"""fairq in front of the workers teams already run: Celery, RQ and Dramatiq, each behind its
extra (``fairq[celery]``, ``fairq[rq]``, ``fairq[dramatiq]``). The core never imports them."""
