"""Tests of the PostgreSQL store beyond the conformance suite (a real server; never skipped)."""
