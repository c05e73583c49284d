"""Settings of the example shop: Django and fairq in one PostgreSQL database.

``DATABASE_URL`` (default: the local ``test`` database) is Django's database; Django's tables
go in the schema ``DJANGO_SCHEMA`` (default ``public``). fairq's store is ``FAIRQ_URL``, by
default the same database with fairq's own schema (``shop_fairq``): then an enqueue joins the
request's transaction (fairq.integrations.django).
"""

from __future__ import annotations

import os

from psycopg.conninfo import conninfo_to_dict

DATABASE_URL = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
FAIRQ_URL = os.environ.get("FAIRQ_URL", f"{DATABASE_URL}?schema=shop_fairq")

_db = conninfo_to_dict(DATABASE_URL)
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _db.get("dbname", "postgres"),
        "USER": _db.get("user", ""),
        "PASSWORD": _db.get("password", ""),
        "HOST": _db.get("host", ""),
        "PORT": _db.get("port", ""),
        "OPTIONS": {"options": f"-c search_path={os.environ.get('DJANGO_SCHEMA', 'public')}"},
    }
}

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
INSTALLED_APPS = ["shop"]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "shop.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
