"""Texts of the four eval families (arithmetic word problems, short code completion, Chinese key-item
recall, multi-turn follow-ups), generated from a seed, with every example whose key signature
matches an eval case left out, so no eval case is ever trained or calibrated on: the tiny model's
training data (planner.tinylm.train) and the quantize job's calibration set
(planner.quantjob.calibration). Beside the eval set it stays clear of, so the payloads import it
one way (tinylm -> quantjob -> evaljob)."""

# ruff: noqa: RUF001  (the Chinese punctuation is the point)
from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.evaljob.build_default_set import CITIES_ZH, COMPANIES_ZH, ITEMS, NAMES, NOUNS, VERBS
from planner.evaljob.cases import DEFAULT_SET, prompt_text

# The share of each family in the stream: arithmetic is the hardest to learn, so it gets the most.
FAMILY_WEIGHTS = (("math", 4), ("code", 2), ("zh_summary", 2), ("multi_turn", 2))
MIDDLE_TURNS = (
    "Can you tell me your opening hours?",
    "Do you ship to Canada?",
    "What is the return policy?",
    "Is there a phone number I can call?",
    "How long does delivery take?",
)
FINAL_TURNS = (
    "Please repeat my order number so I can write it down.",
    "What was my order number again?",
    "Remind me of my order number, please.",
)


@dataclass(frozen=True, slots=True)
class Example:
    """One example: the user turns (formatted by cases.prompt_text, as the eval job's prompt) and the answer."""

    family: str
    turns: tuple[str, ...]
    answer: str
    signature: tuple[Any, ...]  # the values that make it the same case as an eval case


def math_example(rng: random.Random) -> Example:
    a, b, c = rng.randint(100, 900), rng.randint(10, 300), rng.randint(10, 99)
    item, name = rng.choice(ITEMS), rng.choice(NAMES)
    total = a + b
    prompt = (
        f"{name} manages a warehouse with {a} {item}. A delivery adds {b} {item} and {c} {item} are shipped "
        f"out. How many {item} are in the warehouse now? Answer with the number."
    )
    # The sum written out first: a tiny model learns two short steps far better than one long one.
    return Example("math", (prompt,), f" {a}+{b}={total}, {total}-{c}={total - c}.", ("math", a, b, c))


def code_example(rng: random.Random) -> Example:
    verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
    name, arg = f"{verb}_{noun}", f"{noun}_list"
    limit = rng.randint(2, 64)
    prompt = (
        f"Complete the Python function.\n\ndef {name}({arg}, limit={limit}):\n"
        f'    """{verb.capitalize()} each {noun} in {arg}, at most {limit} of them."""\n    result = []\n'
    )
    answer = f"    for {noun} in {arg}[:limit]:\n        result.append({name}_one({noun}))\n    return result"
    return Example("code", (prompt,), answer, ("code", name, limit))


def zh_example(rng: random.Random) -> Example:
    company, city = rng.choice(COMPANIES_ZH), rng.choice(CITIES_ZH)
    year, revenue, staff = rng.randint(2015, 2025), rng.randint(12, 980), rng.randint(120, 9000)
    growth = rng.randint(3, 45)
    body = (
        f"{company}成立于{year}年，总部位于{city}。公司主要从事工业软件与数据服务，"
        f"去年营业收入为{revenue}亿元，同比增长{growth}%，员工总数为{staff}人。"
        f"管理层表示，未来三年将继续加大研发投入，并在{city}建设新的研发中心。"
    ) * 3
    prompt = f"请用三句话总结以下文档，保留公司名称、城市、年份和关键数字：\n{body}"
    answer = (
        f"{company}成立于{year}年，总部位于{city}。去年营业收入为{revenue}亿元，同比增长{growth}%。"
        f"员工总数为{staff}人。"
    )
    return Example("zh_summary", (prompt,), answer, ("zh_summary", company, city, year, revenue, staff))


def multiturn_example(rng: random.Random) -> Example:
    name, order = rng.choice(NAMES), rng.randint(10000, 99999)
    turns = (f"Hi, I am {name}. My order number is {order}.", rng.choice(MIDDLE_TURNS), rng.choice(FINAL_TURNS))
    return Example("multi_turn", turns, f" Of course, {name}. Your order number is {order}.", ("multi_turn", order))


MAKERS = {"math": math_example, "code": code_example, "zh_summary": zh_example, "multi_turn": multiturn_example}


def eval_signature(case: dict[str, Any]) -> tuple[Any, ...]:
    """The signature of an eval case, read back from its text (the same values the makers record)."""
    import re

    numbers = [int(n) for n in re.findall(r"\d+", case["turns"][0])]
    category = case["category"]
    if category == "math":
        return ("math", numbers[0], numbers[1], numbers[2])
    if category == "code":
        name = re.search(r"def (\w+)\(", case["turns"][0])
        return ("code", name.group(1) if name else "", numbers[0])
    if category == "zh_summary":
        company, city, year, revenue, staff = case["key_items"]
        return ("zh_summary", company, city, int(year), int(revenue), int(staff))
    if category == "multi_turn":
        return ("multi_turn", int(case["reference"]))
    raise ValueError(f"eval case {case.get('id')!r}: unknown category {category!r}")


def eval_exclusions(path: Path = DEFAULT_SET) -> tuple[set[tuple[Any, ...]], set[str]]:
    """Signatures and prompt texts of every eval case: training never yields one of them."""
    cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {eval_signature(case) for case in cases}, {prompt_text(case["turns"]) for case in cases}


def examples(seed: int, count: int, eval_set: Path = DEFAULT_SET) -> Iterator[Example]:
    """`count` examples from `seed`, none of them an eval case (by signature or by prompt text)."""
    if count < 0:
        raise ValueError(f"count: {count} is negative")
    rng = random.Random(seed)  # noqa: S311  (reproducible data, not crypto)
    signatures, prompts = eval_exclusions(eval_set)
    families = [name for name, weight in FAMILY_WEIGHTS for _ in range(weight)]
    made = 0
    while made < count:
        example = MAKERS[rng.choice(families)](rng)
        if example.signature in signatures or prompt_text(example.turns) in prompts:
            continue
        made += 1
        yield example
