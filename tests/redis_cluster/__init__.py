"""Tests of the Redis store on a real local Redis Cluster, and the servers they start."""
