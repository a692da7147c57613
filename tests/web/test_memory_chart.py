"""The per-GPU memory chart: a bar per GPU (up to 16), each stacking weights, KV cache, activations
and reserve left to right at the plan's scale, with a named legend."""

from __future__ import annotations

from django.utils import translation

from governance.web.selectors import memory_chart
from governance.web.templatetags.web import memory_chart_svg

GIB = 1024**3
RESULT = {
    "memory_per_gpu": {
        "capacity": 141 * GIB,
        "total": 120 * GIB,
        "weights": 70 * GIB,
        "kv_cache": 40 * GIB,
        "activations": 6 * GIB,
        "overhead": 4 * GIB,
    },
    "parallel": {"gpus": 20},
}
GPU = {"key": "lab-x2", "name": "Lab accelerator X2", "total_memory_bytes": 2 * 143771 * 1024 * 1024}


def test_a_bar_per_gpu_each_stacking_the_four_parts() -> None:
    chart = memory_chart(RESULT)
    assert chart is not None
    assert chart.gpus == 20
    assert len(chart.bars) == 16
    scale = 480 / (141 * GIB)
    for index, bar in enumerate(chart.bars):
        assert bar["y"] == index * 28
        assert bar["label"] == f"GPU {index}"
        x = 56.0
        for part, size in zip(bar["parts"], (70, 40, 6, 4), strict=True):
            assert part["x"] == f"{x:.1f}"
            assert part["width"] == f"{size * GIB * scale:.1f}"
            x += size * GIB * scale
    with translation.override("en"):
        chart = memory_chart(RESULT)
        assert chart is not None
        assert [item["label"] for item in chart.legend] == ["Weights", "KV cache", "Activations", "Reserve"]
        assert [round(item["gib"]) for item in chart.legend] == [70, 40, 6, 4]
        svg = memory_chart_svg(chart)
    assert svg.count("<rect ") == 16 * 4
    assert memory_chart({"memory_per_gpu": {"capacity": 0}}) is None


def test_the_chart_obeys_the_pages_csp_and_labels_its_axes() -> None:
    """style-src 'self' blocks inline styles: the legend's colours come from classes in app.css,
    the same classes as the bars; the axes say what they measure."""
    from pathlib import Path

    from django.template.loader import render_to_string

    css = (Path(__file__).resolve().parents[2] / "static" / "css" / "app.css").read_text()
    with translation.override("en"):
        chart = memory_chart(RESULT)
        assert chart is not None
        svg = str(memory_chart_svg(chart))
        html = render_to_string(
            "web/partials/capacity.html",
            {"page": {"plan": {"status": "done", "fits": True, "result": RESULT}, "chart": chart}, "d": {"code": "x"}},
        )
    assert "style=" not in html
    with translation.override("en"):
        named = render_to_string(
            "web/partials/capacity.html",
            {
                "page": {
                    "plan": {"code": "named", "status": "done", "fits": True, "result": {**RESULT, "gpu": GPU}},
                    "chart": chart,
                },
                "d": {"code": "x"},
            },
        )
    # the GPU the plan was made for, a custom one included (serving_plan.gpu_spec)
    assert "Planned for Lab accelerator X2 (lab-x2, 280.8 GiB each)." in named
    assert "fill=" not in svg
    for part in ("weights", "kv_cache", "activations", "overhead"):
        name = part.replace("_", "-")
        assert f"part-{name}" in svg
        assert f'class="swatch part-{name}"' in html
        assert f".part-{name}" in css
    assert ">GiB per GPU<" in svg
    assert ">GPU<" in svg
    assert ">0<" in svg  # the axis starts at 0 GiB …
    assert ">141<" in svg  # … and ends at the capacity


def test_the_chart_draws_one_replica_and_says_so() -> None:
    """Issue 46: 32 GPUs in two replicas of 16 drew 16 bars captioned "Memory per GPU": one replica
    of 16 GPUs, of 32? The caption says what is drawn, in the reader's language."""
    two = {**RESULT, "parallel": {"tp": 8, "pp": 2, "dp": 2, "gpus": 32}}
    with translation.override("en"):
        chart = memory_chart(two)
        assert chart is not None
        assert len(chart.bars) == 16
        assert chart.caption.startswith(
            "Memory of each GPU of one replica of 16 GPUs, of 32 GPUs in 2 identical replicas"
        )
        assert "capacity 141.0 GiB each" in chart.caption
        # one replica of four GPUs in 4 replicas: four bars, not sixteen identical ones
        small = memory_chart({**RESULT, "parallel": {"tp": 4, "pp": 1, "dp": 4, "gpus": 16}})
        assert small is not None
        assert len(small.bars) == 4
        assert "one replica of 4 GPUs, of 16 GPUs in 4 identical replicas" in small.caption
        # one replica larger than the chart: the first 16 drawn, and it says so
        whole = memory_chart(RESULT)
        assert whole is not None
        assert "the deployment's 20 GPUs (the first 16 drawn" in whole.caption
        single = memory_chart({**RESULT, "parallel": {"gpus": 1}})
        assert single is not None
        assert "the deployment's 1 GPU;" in single.caption
    with translation.override("zh-hans"):
        chart = memory_chart(two)
        assert chart is not None
        assert "副本" in chart.caption
