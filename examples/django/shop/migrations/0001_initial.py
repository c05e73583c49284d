from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies: list[tuple[str, str]] = []
    operations = [  # noqa: RUF012  (the layout of Django's migrations)
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("shop", models.CharField(max_length=100)),
                ("total", models.IntegerField()),
                ("receipt_sent", models.BooleanField(default=False)),
            ],
        ),
    ]
