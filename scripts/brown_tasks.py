#!/usr/bin/python3
"""Small evaluation task files made from the Brown corpus's test files, for the quick profile of
experiments/conversion_eval.toml (data/tasks/brown/, committed; ctest `brown_tasks` checks that this script still
makes exactly those files).

  brown_tasks.py BROWN_DIR OUT_DIR

The test files are the ones fwlab holds out for testing (the files ca01..cr09 sorted by name, every 20th starting
at index 19), so a model pretrained on Brown's train split has not seen them. Tags are stripped as fwlab reads the
corpus: the words of a sentence joined by single spaces.

- lambada.jsonl (LAMBADA's format, {"text"}): three consecutive sentences with the closing punctuation of the last
  removed; the target is the last sentence's last word, a word of at least four letters.
- cloze.jsonl (HellaSwag's format): a sentence as ctx_a, its true next sentence among four endings, the other three
  drawn from the whole test split; a model that reads the context picks the true one more often than 25%.

Deterministic: Python's random.Random(SEED) over the sentences in file order.
"""
import json
import os
import random
import sys

SEED = 20260425
DOCS = 200


def test_files(brown_dir):
    names = sorted(n for n in os.listdir(brown_dir) if len(n) == 4 and n[:2].isalpha() and n[2:].isdigit())
    return [os.path.join(brown_dir, n) for i, n in enumerate(names) if i % 20 == 19]


def sentences(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            words = [t[: t.rfind("/")] if "/" in t else t for t in line.split()]
            if words:
                out.append(words)
    return out


def lambada_docs(passages, rng):
    docs = []
    for p in rng.sample(passages, len(passages)):
        words = [w for s in p for w in s]
        while words and not words[-1].isalpha():
            words.pop()
        if len(words) >= 20 and len(words[-1]) >= 4 and words[-1].isalpha():
            docs.append({"text": " ".join(words)})
        if len(docs) == DOCS:
            break
    return docs


def cloze_docs(sents, rng):
    docs = []
    pairs = [(a, b) for a, b in zip(sents, sents[1:]) if 8 <= len(a) <= 40 and 6 <= len(b) <= 30]
    for a, b in rng.sample(pairs, DOCS):
        endings = [" ".join(b)]
        while len(endings) < 4:
            other = " ".join(rng.choice(sents))
            if other not in endings and 6 <= len(other.split()) <= 30:
                endings.append(other)
        gold = rng.randrange(4)
        endings[0], endings[gold] = endings[gold], endings[0]
        docs.append({"activity_label": "Brown", "ctx_a": " ".join(a), "ctx_b": "", "endings": endings, "label": gold})
    return docs


def main(brown_dir, out_dir):
    rng = random.Random(SEED)
    per_file = [sentences(p) for p in test_files(brown_dir)]
    sents = [s for f in per_file for s in f]
    passages = [f[i:i + 3] for f in per_file for i in range(0, len(f) - 2, 3)]
    os.makedirs(out_dir, exist_ok=True)
    for name, docs in (("lambada.jsonl", lambada_docs(passages, rng)), ("cloze.jsonl", cloze_docs(sents, rng))):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
