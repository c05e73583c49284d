"""Adapters that bring fairq to the workers teams already run (each behind its extra)."""
