"""Where everything lives: key names, and the Cluster slot each one hashes to.

Global keys (one each per prefix, never on a Redis Cluster's hot path): ``{prefix}:queues``
(the queues seen, for reads across queues) and ``{prefix}:types`` (published job types). The
directory (job id -> queue, which routes an id to its queue and keeps ids unique) is one hash,
``{prefix}:dir``, on a single Redis, written by enqueue.lua in the same call as the job; on a
Cluster it is split into ``DIRECTORY_BUCKETS`` hashes ``{prefix}:dir:{<bucket>}`` by a hash of
the id, written by the caller before the job (directory.py says why and what that gives). The
enqueue order is a counter per queue (``seq`` in meta), raised to a floor the caller sends
(enqueue.lua), so no counter is shared by queues.

Per queue, ``{prefix}:{<queue>}:<part>`` for each part in ``QUEUE_PARTS``: the hash tag
``{<queue>}`` puts all of a queue's keys in one Cluster slot. Queue names are limited to
``[A-Za-z0-9_.-]`` (``fairq.policy.queues``), so they cannot hold a brace and end the tag
early. Tenants never appear in key names: a queue interns each tenant as a number (``tids``
and ``tnames`` hashes), and every per-tenant structure is a hash field or zset member of a
per-queue key, so a script never has to build a key name. _lib.lua documents each part.
The one per-(job name, tenant) key, a throttle window, hex-encodes both (``window_key``),
and so do the keys of a tenant's slots (``slot_keys``) and a unique key (``unique_key``); the
one per-caller key, a call's remembered reply, names a random caller id (``reply_key``).
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass, field

from fairq.errors import ConfigError
from fairq.policy import histogram
from fairq.policy.queues import check_queue_name
from fairq.policy.shards import split_shard

DEFAULT_PREFIX = "fairq"

#: The per-queue keys, in the order a script receives them (QUEUE_KEYS in _lib.lua).
QUEUE_PARTS: tuple[str, ...] = (
    "meta",
    "tenants",
    "tids",
    "tnames",
    "eligible",
    "ready",
    "readyat",
    "scheduled",
    "running",
    "dead",
    "done",
    "jobs",
    "bodies",
    "errors",
    "backlog",
    "wake",
    "limited",
    "tats",
    "progress",
    "results",
    "expiring",
    "costs",
)

#: The Redis type of every key fairq writes, for the check against a clashing prefix.
PART_TYPES: dict[str, str] = {
    "meta": "hash",
    "tenants": "hash",
    "tids": "hash",
    "tnames": "hash",
    "eligible": "zset",
    "ready": "zset",
    "readyat": "zset",
    "scheduled": "zset",
    "running": "zset",
    "dead": "zset",
    "done": "zset",
    "jobs": "hash",
    "bodies": "hash",
    "errors": "hash",
    "backlog": "set",
    "wake": "list",
    "limited": "zset",
    "tats": "zset",
    "progress": "hash",
    "results": "hash",
    "expiring": "zset",
    "costs": "hash",
}

#: Throttle windows are per (job name, tenant) lists, not part of a queue's key block:
#: ``{prefix}:{<home queue>}:win:<hex name>:<hex tenant>`` (see ``Layout.window_key``).
WINDOW_PART = "win"
#: Tenant slots (fairq/policy/slots.py) are per (queue, tenant) pairs of keys, kept only while
#: the tenant holds a slot there: ``{prefix}:{<queue>}:slots:<hex tenant>``, a zset of nonce ->
#: deadline, and ``…:slotinfo:<hex tenant>``, a hash of nonce -> "lease:holder" (see
#: ``Layout.slot_keys``; both expire with their last deadline).
SLOTS_PART = "slots"
SLOT_INFO_PART = "slotinfo"
#: ``…:waiting:<hex tenant>``, a zset of the parked jobs' places -> when first parked (those a
#: release may wake), and ``…:waiters:<hex tenant>``, a hash of place -> "since:park text"
#: (every parked job, woken or not; see fairq/policy/slots.py).
WAITING_PART = "waiting"
WAITERS_PART = "waiters"
#: A queue's figures (fairq/figures.py) of one time slot: ``{prefix}:{<queue>}:fig:<slot>``,
#: a hash of tid:kind bucket -> count, the last key of each key block a script takes (the
#: slot of the call's ``now``), expiring FIGURES_TTL seconds after its last write: a slot is
#: written during its SLOT seconds and read for WINDOW seconds from its start.
FIGURES_PART = "fig"
FIGURES_TTL = int(histogram.WINDOW + histogram.SLOT)
#: A unique key (fairq/policy/unique.py, _lib_unique.lua): ``{prefix}:{<queue>}:uniq:<hex
#: tenant>:<hex key>``, a string naming the job that holds it, expiring with its window.
UNIQUE_PART = "uniq"
#: A caller's last reply from each queue's slot, for its re-sending (``register_once`` in
#: _lib.lua): ``{prefix}:{<queue>}:reply:<caller id>``, a string that expires.
REPLY_PART = "reply"

#: The version of the stored record layout, kept in each queue's meta (the Lua library gets it
#: in its header, see scripts.py):
#: 2 was the binary records, 3 adds padded eligible and running members (skip lists, not
#: listpacks). Data of another layout is refused, never misread. Within a layout, a newer
#: fairq adds only what a record without it reads as before (a job's flags and its name while
#: running, the learned costs: records.py), so an upgrade in place keeps the jobs.
LAYOUT = "3"

#: Per-queue widths of the fixed-width numbers in members (TIDW, SEQW in _lib.lua).
TID_WIDTH = 10
SEQ_WIDTH = 16

#: How many hashes a Cluster's directory is split into (``Layout.directory_key``): enough to
#: spread it over every master, few enough that each is a compact hash.
DIRECTORY_BUCKETS = 1024


def check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not prefix:
        raise ConfigError(f"key prefix must be a non-empty string, got {prefix!r}")
    if "{" in prefix or "}" in prefix:
        raise ConfigError(
            f"key prefix {prefix!r} must not contain '{{' or '}}': fairq puts each queue's "
            "name in a hash tag, and a brace in the prefix would take its place"
        )
    return prefix


@dataclass(frozen=True)
class Layout:
    """Key names under one prefix; ``cluster``: the directory split for a Redis Cluster."""

    prefix: str = DEFAULT_PREFIX
    cluster: bool = False
    _blocks: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)
    _groups: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def directory(self) -> str:
        """A single Redis's directory (on a Cluster: ``directory_key``)."""
        return f"{self.prefix}:dir"

    def directory_key(self, job_id: str) -> str:
        """The hash that holds ``job_id``'s queue: a function of the id alone, so an id is
        found (and kept unique) without knowing its queue."""
        if not self.cluster:
            return self.directory
        bucket = binascii.crc_hqx(job_id.encode("utf-8", "surrogatepass"), 0) % DIRECTORY_BUCKETS
        return f"{self.prefix}:dir:{{{bucket}}}"

    @property
    def queues(self) -> str:
        return f"{self.prefix}:queues"

    @property
    def types(self) -> str:
        return f"{self.prefix}:types"

    def global_types(self) -> dict[str, str]:
        found = {self.queues: "set", self.types: "hash"}
        return found if self.cluster else {self.directory: "hash", **found}

    def group(self, queue: str) -> int:
        """Which calls may share a script with ``queue``'s: on a Cluster, its hash slot (a
        script may touch one slot only); on a single Redis, every queue's (0)."""
        if not self.cluster:
            return 0
        found = self._groups.get(queue)
        if found is None:
            found = self._groups[queue] = key_slot(self.queue_key(queue, "meta"))
        return found

    def queue_key(self, queue: str, part: str) -> str:
        """A shard ``<queue>@<n>`` keeps its queue's hash tag (``{prefix}:{<queue>}@<n>:…``):
        all shards of a queue share one Cluster slot, so one enqueue.lua call can choose
        among a tenant's shards atomically."""
        shard = split_shard(check_queue_name(queue))
        if shard is not None:
            return f"{self.prefix}:{{{shard[0]}}}@{shard[1]}:{part}"
        return f"{self.prefix}:{{{queue}}}:{part}"

    def queue_keys(self, queue: str) -> list[str]:
        """The block of keys a script takes for one queue, in ``QUEUE_PARTS`` order."""
        found = self._blocks.get(queue)
        if found is None:
            found = self._blocks[queue] = [self.queue_key(queue, part) for part in QUEUE_PARTS]
        return found

    def figures_key(self, queue: str, slot: int) -> str:
        return f"{self.queue_key(queue, FIGURES_PART)}:{slot}"

    def block(self, queue: str, now: float) -> list[str]:
        """The keys a script takes for one queue at ``now``: its ``queue_keys``, then the
        figures key of the slot of ``now``."""
        return [*self.queue_keys(queue), self.figures_key(queue, histogram.slot_of(now))]

    def window_key(self, home: str, name: str, tenant: str) -> str:
        """The throttle window of (job name, tenant), in its home queue's slot.

        Name and tenant are hex-encoded (UTF-8): injective, so two pairs never share a key,
        and free of braces and of the tenant's own text.
        """
        encoded = f"{name.encode().hex()}:{tenant.encode().hex()}"
        return f"{self.queue_key(home, WINDOW_PART)}:{encoded}"

    def slot_keys(self, queue: str, tenant: str) -> tuple[str, str, str, str]:
        """The slots a tenant holds in a queue (zset), their leases and holders (hash), its
        wakeable parked jobs (zset) and every parked job (hash), in the queue's Cluster slot;
        the tenant hex-encoded as in ``window_key``."""
        encoded = tenant.encode().hex()
        return (
            f"{self.queue_key(queue, SLOTS_PART)}:{encoded}",
            f"{self.queue_key(queue, SLOT_INFO_PART)}:{encoded}",
            f"{self.queue_key(queue, WAITING_PART)}:{encoded}",
            f"{self.queue_key(queue, WAITERS_PART)}:{encoded}",
        )

    def unique_key(self, queue: str, tenant: str, key: str) -> str:
        """A unique key of (queue as enqueued, tenant), in the queue's Cluster slot; tenant
        and key hex-encoded as in ``window_key``."""
        encoded = f"{tenant.encode().hex()}:{key.encode().hex()}"
        return f"{self.queue_key(queue, UNIQUE_PART)}:{encoded}"

    def reply_key(self, queue: str, caller: str) -> str:
        return f"{self.queue_key(queue, REPLY_PART)}:{caller}"

    def queue_types(self, queue: str) -> dict[str, str]:
        return {self.queue_key(queue, part): PART_TYPES[part] for part in QUEUE_PARTS}


def key_slot(key: str | bytes) -> int:
    """The Redis Cluster slot of a key (CRC16/XMODEM of its hash tag, mod 16384)."""
    data = key.encode() if isinstance(key, str) else key
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1 : end]
    return binascii.crc_hqx(data, 0) % 16384
