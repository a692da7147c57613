"""Each serving engine is whole in one place (planner/engines, issue 44): these check what every
engine module must give, and that the lists of engines elsewhere are read from the registry."""

from __future__ import annotations

import dataclasses

import pytest

from planner.engines import DEFAULT_VERSION, ENGINES, KNOWN_RELEASES, SERVING_ENGINES, engine_profile, serving_engine
from planner.engines.base import MODEL, ServingEngine, fill
from planner.memory import Layout
from planner.serving import Launch, serving_argv
from planner.specs import model, precision

ENGINE_IDS = [engine.name for engine in SERVING_ENGINES]


def test_names_and_aliases_are_unique_and_resolve() -> None:
    spellings = [s for engine in SERVING_ENGINES for s in (engine.name, *engine.aliases)]
    assert len(spellings) == len(set(spellings))
    for engine in SERVING_ENGINES:
        for spelling in (engine.name, *engine.aliases):
            assert serving_engine(spelling) is engine
    assert serving_engine("trtllm").name == "tensorrt_llm"
    with pytest.raises(ValueError, match=r"^engine: "):
        serving_engine("lmdeploy")


@pytest.mark.parametrize("engine", SERVING_ENGINES, ids=ENGINE_IDS)
def test_each_engine_is_planned_by_a_profile_it_names(engine: ServingEngine) -> None:
    assert engine.display_name
    assert engine.display_name != engine.name.title()
    if engine.profile_key is None:  # a stand-in, stated
        assert engine.planned_as in ENGINES
        assert engine.stand_in_note
        return
    assert engine.profile_key in ENGINES
    assert engine.releases is not None
    assert engine.default_version
    profile = engine_profile(engine.profile_key)
    assert profile.name == engine.profile_key
    assert profile.version == DEFAULT_VERSION[engine.profile_key]
    assert profile.provenance  # every profile says where its reserves come from
    oldest, newest = KNOWN_RELEASES[engine.profile_key]
    with pytest.raises(ValueError, match=r"^engine_version: "):
        engine_profile(engine.profile_key, f"{newest[0]}.{newest[1] + 1}")
    assert engine_profile(engine.profile_key, f"{oldest[0]}.{oldest[1]}").name == engine.profile_key


def _launch(key: str, *, online: bool) -> Launch:
    spec = model("llama-3.1-8b")
    if not online:  # an FP8 checkpoint: nothing to quantize at load
        spec = dataclasses.replace(spec, checkpoint_precision="fp8")
    return Launch("org/m", spec, precision(key), Layout(tp=2, pp=1, ep=1, dp=1), 8192, 0.9, "bf16", 16, 1, 4096)


@pytest.mark.parametrize("engine", [e for e in SERVING_ENGINES if e.plan_argv], ids=lambda e: e.name)
def test_a_plan_argv_has_one_model_slot_and_its_online_quantization_flag_only_when_asked(
    engine: ServingEngine,
) -> None:
    online = serving_argv(_launch("fp8", online=True))[engine.name]
    offline = serving_argv(_launch("fp8", online=False))[engine.name]
    assert online.count(MODEL) == offline.count(MODEL) == 1
    assert "org/m" not in fill(online, model=MODEL)
    flag = engine.online_quantization_flag
    if flag is not None:
        assert online[online.index(flag) : online.index(flag) + 2] == [flag, "fp8"]
        assert flag not in offline
    else:
        assert online == offline
