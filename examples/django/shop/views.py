"""One view: place an order and enqueue its receipt in the same transaction."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from fairq.integrations.django import enqueue
from shop.jobs import send_receipt
from shop.models import Order


class PaymentDeclined(Exception):
    def __init__(self, job_id: str) -> None:
        super().__init__(job_id)
        self.job_id = job_id


@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """``shop``, ``total``; ``decline=1`` fails the payment after the enqueue, which rolls the
    order and its receipt job back together (the reply names the job that never existed)."""
    shop = request.POST["shop"]
    try:
        with transaction.atomic():
            order = Order.objects.create(shop=shop, total=int(request.POST.get("total", "0")))
            job_id = enqueue(send_receipt, order.id, shop=shop)
            if request.POST.get("decline") == "1":
                raise PaymentDeclined(job_id)
    except PaymentDeclined as declined:
        return JsonResponse({"stored": False, "job": declined.job_id}, status=402)
    return JsonResponse({"stored": True, "order": order.id, "job": job_id})
