"""No-op job apps for benchmarks/postgres_throughput.py, one per queue, each its own way."""
