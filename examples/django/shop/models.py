from django.db import models


class Order(models.Model):
    shop = models.CharField(max_length=100)
    total = models.IntegerField()
    receipt_sent = models.BooleanField(default=False)
