"""Generate the default eval set (deterministic): python -m planner.evaljob.build_default_set

Four categories of 100 cases, written by us (no downloads): math reasoning (numeric answers),
code completion (identifiers), Chinese long-document summarization (key facts and numbers),
multi-turn consistency (an early fact used later; a contradicting value is a failure).
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "data" / "default-v1.jsonl"
NAMES = ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Jun"]
ITEMS = ["boxes", "crates", "pallets", "drums", "parcels", "bottles", "cables", "sensors"]
CITIES_ZH = ["杭州", "深圳", "成都", "南京", "武汉", "西安", "苏州", "青岛"]
COMPANIES_ZH = ["星河科技", "云帆数据", "蓝海智能", "天工材料", "远景能源", "华章医疗"]
VERBS = ["parse", "merge", "score", "filter", "render", "encode", "resolve", "validate"]
NOUNS = ["invoice", "ledger", "token", "record", "matrix", "payload", "schedule", "config"]


def math_case(rng: random.Random, index: int) -> dict[str, Any]:
    a, b, c = rng.randint(100, 900), rng.randint(10, 300), rng.randint(10, 99)
    item, name = rng.choice(ITEMS), rng.choice(NAMES)
    answer = a + b - c
    prompt = (
        f"{name} manages a warehouse with {a} {item}. A delivery adds {b} {item} and {c} {item} are shipped "
        f"out. How many {item} are in the warehouse now? Answer with the number."
    )
    return {
        "id": f"math-{index:03d}",
        "category": "math",
        "turns": [prompt],
        "reference": str(answer),
        "key_items": [str(answer), str(a), str(b), str(c)],
    }


def code_case(rng: random.Random, index: int) -> dict[str, Any]:
    verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
    name, arg = f"{verb}_{noun}", f"{noun}_list"
    limit = rng.randint(2, 64)
    prompt = (
        f"Complete the Python function.\n\ndef {name}({arg}, limit={limit}):\n"
        f'    """{verb.capitalize()} each {noun} in {arg}, at most {limit} of them."""\n    result = []\n'
    )
    return {
        "id": f"code-{index:03d}",
        "category": "code",
        "turns": [prompt],
        "reference": None,
        "key_items": [name, arg, "result", "limit"],
    }


def zh_case(rng: random.Random, index: int) -> dict[str, Any]:
    company, city = rng.choice(COMPANIES_ZH), rng.choice(CITIES_ZH)
    year, revenue, staff = rng.randint(2015, 2025), rng.randint(12, 980), rng.randint(120, 9000)
    growth = rng.randint(3, 45)
    body = (
        f"{company}成立于{year}年，总部位于{city}。公司主要从事工业软件与数据服务，"
        f"去年营业收入为{revenue}亿元，同比增长{growth}%，员工总数为{staff}人。"
        f"管理层表示，未来三年将继续加大研发投入，并在{city}建设新的研发中心。"
    ) * 3
    prompt = f"请用三句话总结以下文档，保留公司名称、城市、年份和关键数字：\n{body}"
    return {
        "id": f"zh-{index:03d}",
        "category": "zh_summary",
        "turns": [prompt],
        "reference": None,
        "key_items": [company, city, str(year), str(revenue), str(staff)],
    }


def multiturn_case(rng: random.Random, index: int) -> dict[str, Any]:
    name, order = rng.choice(NAMES), rng.randint(10000, 99999)
    wrong = order + rng.choice([-7, 3, 11, 100])
    turns = [
        f"Hi, I am {name}. My order number is {order}.",
        "Can you tell me your opening hours?",
        "Please repeat my order number so I can write it down.",
    ]
    return {
        "id": f"turns-{index:03d}",
        "category": "multi_turn",
        "turns": turns,
        "reference": str(order),
        "key_items": [str(order), name],
        "contradictions": [str(wrong)],
    }


def build(out: Path = OUT) -> str:
    rng = random.Random(20261129)
    cases = []
    for maker in (math_case, code_case, zh_case, multiturn_case):
        cases += [maker(rng, i) for i in range(100)]
    text = "".join(json.dumps(case, ensure_ascii=False, sort_keys=True) + "\n" for case in cases)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode()).hexdigest()


if __name__ == "__main__":
    print(f"{OUT.name} sha256 {build()}")
