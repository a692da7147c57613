"""Timing on the calibration device: per launch inside one CUDA graph (engines decode under CUDA
graphs), eager with events where capture fails, wall clock on a CPU test run."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

# "cuda" on a GPU node; "cpu" only when the spec asks for it (tests run the same code on a CPU).
DEVICE = "cuda"
Launches = Sequence[Callable[[], Any]]


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def median_s(events: list[tuple[Any, Any]]) -> float:
    sync()
    return float(statistics.median(start.elapsed_time(end) for start, end in events)) / 1e3


def time_launches(launches: Sequence[Callable[[], Any]], reps: int = 10) -> tuple[float, str]:
    """Seconds per launch, replaying all launches captured in one CUDA graph (engines decode under
    CUDA graphs); eager with events where capture fails."""
    for launch in launches:
        launch()
    sync()
    if DEVICE == "cpu":
        samples = []
        for _ in range(reps):
            began = time.perf_counter()
            for launch in launches:
                launch()
            samples.append(time.perf_counter() - began)
        return statistics.median(samples) / len(launches), "cpu"
    mode = "cuda_graph"
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for launch in launches:
                launch()
        replay: Callable[[], Any] = graph.replay
    except RuntimeError:
        mode = "eager"

        def replay() -> None:
            for launch in launches:
                launch()

    replay()
    events = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        replay()
        end.record()
        events.append((start, end))
    return median_s(events) / len(launches), mode
