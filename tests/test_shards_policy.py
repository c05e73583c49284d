"""fairq.policy.shards: which shards a tenant gets, stably, and the inputs it refuses."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter

import pytest

from fairq.errors import ConfigError
from fairq.policy.queues import check_declared_name, check_queue_name
from fairq.policy.shards import (
    Sharding,
    blast_radius,
    least_loaded,
    parse_shards,
    split_shard,
    tenant_shards,
)

TENANTS = ["acme", "globex", "initech", "ü:{x} y", "", "t" * 5000]


def test_pinned_assignments() -> None:
    """The rule itself is pinned: a change here moves every tenant of every sharded queue."""
    assert tenant_shards("imports", "acme", 8, 2) == [6, 1]
    assert tenant_shards("imports", "globex", 8, 2) == [0, 2]
    assert tenant_shards("imports", "ü:{x} y", 16, 3) == [6, 9, 0]


def test_the_same_in_another_process_with_another_hash_seed() -> None:
    """Computed in a fresh interpreter (another PYTHONHASHSEED, so ``hash()`` would differ):
    every process, producer or worker, and every restart gets the same shards."""
    here = {t: tenant_shards("imports", t, 8, 2) for t in TENANTS}
    code = (
        "import json, sys\n"
        "from fairq.policy.shards import tenant_shards\n"
        "tenants = json.loads(sys.stdin.read())\n"
        "print(json.dumps({t: tenant_shards('imports', t, 8, 2) for t in tenants}))\n"
    )
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code], input=json.dumps(TENANTS), env=env,
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert json.loads(done.stdout) == here


def test_shards_are_distinct_and_in_range() -> None:
    for tenant in TENANTS:
        for count, size in [(1, 1), (8, 2), (8, 8), (32, 4)]:
            got = tenant_shards("q", tenant, count, size)
            assert len(got) == size == len(set(got))
            assert all(0 <= i < count for i in got)


def test_tenants_spread_over_every_pair_of_shards() -> None:
    """4,000 tenants over the 28 pairs of 8 shards: every pair used, none over twice its share."""
    pairs = Counter(frozenset(tenant_shards("q", f"t{n}", 8, 2)) for n in range(4000))
    assert len(pairs) == math.comb(8, 2)
    assert max(pairs.values()) < 2 * 4000 / 28


def test_a_queue_of_its_own_draws_its_own_shards() -> None:
    a = [tenant_shards("imports", f"t{n}", 8, 2) for n in range(50)]
    b = [tenant_shards("exports", f"t{n}", 8, 2) for n in range(50)]
    assert a != b


def test_more_shards_keep_most_tenants_where_they_were() -> None:
    """Rendezvous hashing: from 8 to 9 shards a tenant's best shard changes only when the new
    one outscores it (about 1 in 9), not for most tenants as with modulo."""
    moved = sum(
        tenant_shards("q", f"t{n}", 8, 1) != tenant_shards("q", f"t{n}", 9, 1) for n in range(900)
    )
    assert moved < 200


def test_an_assignment_overrides_the_hash() -> None:
    sharding = Sharding(8, 2, {"bigco": [7], "pair": [3, 5, 3]})
    assert sharding.shards_of("imports", "bigco") == [7]
    assert sharding.queues_of("imports", "pair") == ["imports@3", "imports@5"]
    assert sharding.queues_of("imports", "acme") == ["imports@6", "imports@1"]


@pytest.mark.parametrize(
    ("count", "size", "assign", "message"),
    [
        (0, 1, {}, "shards must be a whole number of at least 1"),
        (-2, 1, {}, "shards must be a whole number of at least 1"),
        (2.5, 1, {}, "shards must be a whole number"),
        (True, 1, {}, "shards must be a whole number"),
        (4, 0, {}, "shard_size must be a whole number of at least 1"),
        (4, 5, {}, "shard_size=5 is more than shards=4"),
        (4, 2, {"big": [4]}, r"assign\['big'\] names shard 4, but the queue has shards 0 to 3"),
        (4, 2, {"big": [-1]}, "names shard -1"),
        (4, 2, {"big": []}, "must be a non-empty list"),
        (4, 2, {"big": "1"}, "must be a non-empty list"),
        (2000, 2, {}, "over the limit"),
    ],
)
def test_bad_settings_are_refused(count: int, size: int, assign: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Sharding(count, size, assign)  # type: ignore[arg-type]


def test_blast_radius() -> None:
    assert blast_radius(8, 2) == pytest.approx(1 / 28)
    assert blast_radius(16, 4) == pytest.approx(1 / 1820)
    # the hash deals it: of 28,000 tenants, about 1 in 28 share all of a flooder's two shards
    flooder = frozenset(tenant_shards("q", "flooder", 8, 2))
    same = sum(frozenset(tenant_shards("q", f"t{n}", 8, 2)) == flooder for n in range(28_000))
    assert same / 28_000 == pytest.approx(blast_radius(8, 2), rel=0.2)


def test_worker_shard_ranges() -> None:
    assert parse_shards("0-3", 8, "q") == [0, 1, 2, 3]
    assert parse_shards("1,4,7", 8, "q") == [1, 4, 7]
    assert parse_shards("0-1, 6, 1", 8, "q") == [0, 1, 6]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0-8", "queue 'q' has shards 0 to 7, not 8"),
        ("9", "not 9"),
        ("-1", "is not a shard number or range"),
        ("3-1", "runs backwards"),
        ("a", "is not a shard number or range"),
        ("", "is not a shard number or range"),
        ("1,,2", "is not a shard number or range"),
    ],
)
def test_bad_worker_shard_ranges(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_shards(spec, 8, "q")


def test_least_loaded() -> None:
    assert least_loaded([(1, 0), (0, 0)]) == 1  # 2 turns against 1
    assert least_loaded([(1, 0), (0, 1)]) == 1  # 2 against 2: fewer others
    assert least_loaded([(1, 0), (0, 2)]) == 0  # 2 against 3
    assert least_loaded([(1, 3), (1, 2)]) == 1  # the same others: the tenant's own jobs
    assert least_loaded([(0, 0), (0, 0)]) == 0  # then the first named


def test_shard_names() -> None:
    assert split_shard("imports@12") == ("imports", 12)
    assert split_shard("imports") is None
    assert split_shard("imports@012") is None
    assert check_queue_name("imports@3") == "imports@3"
    with pytest.raises(ConfigError, match="'@' is kept for the shards"):
        check_declared_name("imports@3")
    for bad in ("imports@", "@3", "a@b", "imports@3@4"):
        with pytest.raises(ConfigError, match="queue name"):
            check_queue_name(bad)
