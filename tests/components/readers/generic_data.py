"""Small hand-made data sets in the generic formats, for the end-to-end and README tests: NER
sentences as JSON lines of character spans, and question pairs as a TSV."""
from __future__ import annotations

import json
from pathlib import Path

PEOPLE = ["张伟", "王芳", "李娜", "刘洋", "陈静", "杨帆"]
PLACES = ["北京", "上海", "广州", "深圳", "杭州", "成都"]
TEMPLATES = ["{p}在{l}工作", "{p}昨天去了{l}", "{l}的{p}很忙", "我和{p}住在{l}"]


def ner_records(n: int = 24) -> list[dict]:
    """``n`` sentences naming a person (PER) and a place (LOC), with exclusive character offsets and
    the mention text, as a user's JSON-lines file would give them."""
    records = []
    for i in range(n):
        person, place, template = PEOPLE[i % 6], PLACES[(i * 5 + i // 6) % 6], TEMPLATES[i % 4]
        text = template.format(p=person, l=place)
        spans = []
        for label, mention in (("PER", person), ("LOC", place)):
            start = text.index(mention)
            spans.append({"start": start, "end": start + len(mention), "label": label, "text": mention})
        records.append({"text": text, "spans": sorted(spans, key=lambda s: s["start"])})
    return records


QUESTIONS = [
    ("花呗怎么还款", "花呗如何还钱"), ("借呗额度怎么提高", "怎样提升借呗额度"), ("如何修改密码", "密码怎么改"),
    ("余额宝收益多少", "余额宝利息是多少"), ("怎么注销账户", "账户如何注销"), ("信用卡逾期怎么办", "信用卡过期未还怎么处理"),
    ("转账多久到账", "转账到账要多长时间"), ("怎么开通花呗", "花呗如何开通"), ("为什么不能登录", "登录不了是什么原因"),
    ("如何绑定银行卡", "银行卡怎么绑定"),
]


def pair_rows() -> list[tuple[str, str, str]]:
    """20 question pairs, 10 paraphrases (label 1) and 10 unrelated (label 0)."""
    same = [(a, b, "1") for a, b in QUESTIONS]
    different = [(b, QUESTIONS[(i + 3) % len(QUESTIONS)][0], "0") for i, (_, b) in enumerate(QUESTIONS)]
    return [row for pair in zip(same, different) for row in pair]


def write_ner(path: Path, records: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return str(path)


def write_pairs(path: Path, rows: list[tuple[str, str, str]]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("sentence1\tsentence2\tlabel\n" + "".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)
