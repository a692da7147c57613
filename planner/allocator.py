"""What PyTorch's CUDA caching allocator reserves for tensors that stay allocated (a model's weights).

An engine that sizes its KV pool from the device's free memory (SGLang: `torch.cuda.mem_get_info`
before and after loading) counts the segments the allocator took from CUDA, not the tensors' bytes.
The difference is the allocator's rounding, which depends only on the tensor sizes and their order:

- every request is rounded up to 512 bytes;
- requests of at most 1 MiB are carved from 2 MiB segments (the small pool);
- larger requests take the smallest free block of the large pool that holds them, or else a new
  segment: 20 MiB for a request under 10 MiB, otherwise the request rounded up to 2 MiB;
- a block is split only when what remains is over 1 MiB (large pool) or at least 512 bytes (small
  pool): a remainder of 1 MiB or less stays with the tensor, and a split-off remainder serves later
  requests no larger than it.

Constants and rules from c10/cuda/CUDACachingAllocator.cpp (kMinBlockSize, kSmallSize, kSmallBuffer,
kLargeBuffer, kMinLargeAlloc, kRoundLarge, round_size, get_allocation_size, should_split), with the
default settings: no max_split_size, no roundup_power2_divisions, no expandable segments.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable, Sequence

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20
SMALL_BUFFER = 2 << 20
LARGE_BUFFER = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20


def _round(size: int) -> int:
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def _segment(size: int) -> int:
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


def reserved_bytes(sizes: Iterable[int]) -> int:
    """Bytes of the segments the allocator holds after these allocations, made in this order and
    none freed (fresh process: nothing cached before)."""
    return reserved_bytes_of_runs([(tuple(sizes), 1)])


# Longest repeating pattern of layers looked for (DeepSeek-V3's MoE layers repeat every 2, Kimi K2's
# on one GPU every 5).
PERIODS = 6


def reserved_bytes_of_runs(runs: Sequence[tuple[tuple[int, ...], int]], *, shortcut: bool = True) -> int:
    """The same for runs of repeated allocations: (the sizes of one layer, how many such layers in a row).

    A run is simulated layer by layer until the last p layers (p up to PERIODS) left the free blocks as
    they found them, plus more of sizes that were there throughout (more at the start than they took). From
    then on every p layers make the same choices (best fit sees the same sizes at each request), so they
    reserve the same bytes and leave the same blocks over: whole periods are added at once, the rest
    simulated. shortcut=False simulates every layer (a parity test compares the two)."""
    requests = [_round(size) for sizes, _count in runs for size in sizes if size > 0]
    smallest_large = min((size for size in requests if size > SMALL_SIZE), default=0)
    free: dict[bool, list[int]] = {True: [], False: []}  # sizes of free blocks, per pool (small?)
    reserved = 0

    def allocate(sizes: tuple[int, ...], taken: Counter[int]) -> None:
        nonlocal reserved
        for requested in sizes:
            if requested <= 0:
                continue
            size = _round(requested)
            small = size <= SMALL_SIZE
            pool = free[small]
            index = bisect_left(pool, size)
            if index < len(pool):  # best fit: the smallest free block that holds it
                block = pool.pop(index)
                taken[block] += 1
            else:
                block = _segment(size)
                reserved += block
            rest = block - size
            # A large-pool remainder smaller than every large request is never used again.
            if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE and rest >= smallest_large):
                insort(pool, rest)

    def snapshot() -> tuple[int, tuple[tuple[int, ...], tuple[int, ...]]]:
        return reserved, (tuple(free[True]), tuple(free[False]))

    def added_blocks(
        then: tuple[int, tuple[tuple[int, ...], tuple[int, ...]]],
        now: tuple[int, tuple[tuple[int, ...], tuple[int, ...]]],
        takes: list[Counter[int]],
    ) -> list[Counter[int]] | None:
        """The blocks the last layers left over beyond what they found, if best fit will choose alike."""
        added = []
        for old, new in zip(then[1], now[1], strict=True):
            if new == old:
                added.append(Counter[int]())
                continue
            if len(new) < len(old):
                return None
            before, after = Counter(old), Counter(new)
            taken = sum(takes, Counter[int]())
            if before - after:  # a size with fewer blocks than before
                return None
            more = after - before
            # A size with more blocks now must not have run out on the way: then best fit saw it at
            # every request, as it will in the next layers (which only have more of it).
            if any(before[size] <= taken[size] for size in more):
                return None
            added.append(more)
        return added

    for sizes, count in runs:
        history = [snapshot()]
        takes: list[Counter[int]] = []
        done = 0
        while done < count:
            taken: Counter[int] = Counter()
            allocate(sizes, taken)
            done += 1
            takes.append(taken)
            history.append(snapshot())
            if not shortcut:
                continue
            for period in range(1, min(PERIODS, len(takes)) + 1):
                periods = (count - done) // period
                if not periods:
                    break
                then, now = history[-1 - period], history[-1]
                # Cheap first: a pattern that settled reserved as much in its previous period.
                if len(takes) < 2 * period or now[0] - then[0] != then[0] - history[-1 - 2 * period][0]:
                    continue
                added = added_blocks(then, now, takes[-period:])
                if added is None:
                    continue
                reserved += (now[0] - then[0]) * periods
                for small, extra in zip((True, False), added, strict=True):
                    more = [size for size, n in extra.items() for _ in range(n * periods)]
                    free[small] = sorted(free[small] + more)
                done += period * periods
                # Fewer than `period` layers are left: simulate them, looking for no period across the jump.
                history, takes = [snapshot()], []
                break
    return reserved
