#!/usr/bin/env python3
"""A German -> English parallel corpus from the example lines of Debian's dict-freedict-deu-eng (the Ding
dictionary): under its entries, lines of the form

      "German phrase or sentence"  - English translation

Every distinct (German, English) pair is kept once, in the dictionary's order. The split is fixed by the German
side alone (SHA-256 of its UTF-8 bytes, modulo 1000: below 30 test, below 60 valid, the rest train), so a German
line with several translations never straddles two splits and the split does not move when the dictionary's
edition adds or drops other lines. Writes train/valid/test .de and .en, one segment a line, line-aligned.

Usage: freedict_corpus.py [DICT_DZ] OUT_DIR
"""
import gzip
import hashlib
import os
import re
import sys

EXAMPLE = re.compile(r'^\s+"(.+)"  - (.+)$')


def pairs(path):
    seen = set()
    with gzip.open(path, "rt", encoding="utf-8") as f:  # dictzip is gzip with a random-access index
        for line in f:
            m = EXAMPLE.match(line.rstrip("\n"))
            if not m:
                continue
            de, en = (" ".join(s.split()) for s in m.groups())
            if de and en and (de, en) not in seen:
                seen.add((de, en))
                yield de, en


def split_of(de):
    bucket = int(hashlib.sha256(de.encode("utf-8")).hexdigest()[:8], 16) % 1000
    return "test" if bucket < 30 else "valid" if bucket < 60 else "train"


def main():
    args = sys.argv[1:]
    if len(args) not in (1, 2):
        sys.exit(__doc__)
    path = args[0] if len(args) == 2 else "/usr/share/dictd/freedict-deu-eng.dict.dz"
    out = args[-1]
    os.makedirs(out, exist_ok=True)
    files = {(s, lang): open(os.path.join(out, f"{s}.{lang}.tmp"), "w", encoding="utf-8")
             for s in ("train", "valid", "test") for lang in ("de", "en")}
    counts = {"train": 0, "valid": 0, "test": 0}
    for de, en in pairs(path):
        s = split_of(de)
        files[(s, "de")].write(de + "\n")
        files[(s, "en")].write(en + "\n")
        counts[s] += 1
    for (s, lang), f in files.items():  # complete files appear at once: an interrupted run leaves none
        f.close()
        os.replace(f.name, os.path.join(out, f"{s}.{lang}"))
    print(f"freedict_corpus: {out}: " + ", ".join(f"{s} {n} pairs" for s, n in counts.items()))


if __name__ == "__main__":
    main()
