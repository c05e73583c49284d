"""The shop's fairq App and jobs. A worker runs them with Django set up first::

DJANGO_SETTINGS_MODULE=shop.settings fairq worker shop.jobs:app
"""

from __future__ import annotations

import django
from django.apps import apps
from django.conf import settings

import fairq

if not apps.ready:  # a worker process imports this module first: the ORM needs set-up
    django.setup()

app = fairq.App(settings.FAIRQ_URL)


@app.job(tenant="shop", queue="receipts")
def send_receipt(order_id: int, shop: str) -> None:
    """Mark the order's receipt sent (a real shop would e-mail it)."""
    from shop.models import Order

    Order.objects.filter(id=order_id, shop=shop).update(receipt_sent=True)
