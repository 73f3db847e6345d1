#!/usr/bin/env python3
"""Independent reference implementation of corpus BLEU (standard library only).

Used by the C++ tests as an independent check. Written from the published
definitions only:

  * Papineni, Roukos, Ward, Zhu (2002), "BLEU: a Method for Automatic
    Evaluation of Machine Translation" -- modified (clipped) n-gram precision,
    corpus-level sums of clipped matches and totals, brevity penalty
    BP = 1 if c > r else exp(1 - r/c), BLEU = BP * exp(sum_n w_n log p_n),
    uniform weights w_n = 1/4, N = 4.
  * sacreBLEU 2.x defaults (mjpost/sacrebleu: sacrebleu/metrics/bleu.py
    `BLEU.compute_bleu`, sacrebleu/tokenizers/tokenizer_13a.py,
    sacrebleu/tokenizers/tokenizer_re.py, sacrebleu/metrics/base.py
    `Signature.format`, sacrebleu/sacrebleu.py CLI reading of files).
  * fairseq's tokenized BLEU (facebookresearch/fairseq: fairseq/scoring/bleu.py
    `Scorer`, fairseq/clib/libbleu/libbleu.cpp), i.e. what `fairseq-generate
    --remove-bpe` reports as "BLEU4 = ...".

Command line (the C++ tests depend on it):

  bleu_ref.py sacre HYP_FILE REF_FILE
  bleu_ref.py tok   HYP_FILE REF_FILE [--unk STR]
      One segment per line (UTF-8). Both files must have the same number of
      lines, else exit status 2 with a message on stderr. Prints one line of
      JSON: {"bleu", "precisions", "counts", "totals", "bp", "sys_len",
      "ref_len"} plus "signature" for `sacre`. bleu, precisions in percent.
      `--unk STR` (tok only, optional, default: none) names a token that in
      the reference never matches (fairseq maps reference <unk> to -999).
  bleu_ref.py tokenize13a
      Reads lines from stdin, prints each line tokenized with 13a.
  bleu_ref.py selftest
      Hand-computed checks; prints "ok" and exits 0.
"""

import json
import math
import re
import sys
from collections import Counter

MAX_ORDER = 4  # BLEU-4: Papineni et al. use N = 4; sacreBLEU MAX_NGRAM_ORDER = 4.

# sacreBLEU prints `version:<sacrebleu.__version__>` as the last field of the
# signature (metrics/base.py: Signature.format keeps 'version' at the end).
# The field order for BLEU (nrefs, then case, eff, tok, smooth, then version)
# comes from Signature.__init__ + BLEUSignature.__init__; real sacreBLEU
# 2.2.1 / 2.3.1 / 2.4.2 / 2.4.3 / 2.6.0 outputs all have exactly this layout,
# e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.3".
# We pin version 2.4.0 (a real 2.x release); BLEU values do not depend on it.
SACREBLEU_VERSION = "2.4.0"
SACRE_SIGNATURE = (
    "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" + SACREBLEU_VERSION
)


# ---------------------------------------------------------------------------
# sacreBLEU tokenizer "13a" (equivalent of mteval-v13a.pl's tokenization)
# Source: sacrebleu/tokenizers/tokenizer_13a.py (Tokenizer13a.__call__) and
# sacrebleu/tokenizers/tokenizer_re.py (TokenizerRegexp).
# ---------------------------------------------------------------------------

# The four regex rules, applied in this order, each as a single left-to-right
# non-overlapping re.sub pass over the whole line (Python `re` semantics).
_RULES_13A = [
    # Split off ASCII punctuation/symbols. Character class ranges:
    #   { - ~  (0x7B-0x7E)   [ - `  (0x5B-0x60)   space - &  (0x20-0x26)
    #   ( - +  (0x28-0x2B)   : - @  (0x3A-0x40)   /
    # i.e. everything printable-ASCII except letters, digits, ' , - . (and
    # the space itself, which is in the class but harmless).
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
    # Tokenize period and comma unless preceded by a digit.
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    # Tokenize period and comma unless followed by a digit.
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    # Tokenize dash when preceded by a digit.
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
]


def tokenize_13a(line):
    """Return the 13a-tokenized form of `line` as a single space-joined str."""
    # Language-independent part (tokenizer_13a.py), plain substring
    # replacements, in this exact order. Because they are sequential,
    # "&amp;lt;" becomes "&lt;" and then "<"; "&amp;quot;" only becomes
    # "&quot;" (the &quot; rule already ran).
    line = line.replace("<skipped>", "")
    line = line.replace("-\n", "")
    line = line.replace("\n", " ")
    line = line.replace("&quot;", '"')
    line = line.replace("&amp;", "&")
    line = line.replace("&lt;", "<")
    line = line.replace("&gt;", ">")
    # Pad with one space on each side so the rules can see line boundaries.
    line = " " + line + " "
    for pattern, repl in _RULES_13A:
        line = pattern.sub(repl, line)
    # "no leading or trailing spaces, single space within words":
    # sacreBLEU uses Python's str.split() (Unicode whitespace) here.
    return " ".join(line.split())


# ---------------------------------------------------------------------------
# N-gram statistics (Papineni et al. 2002, section 2.1: modified n-gram
# precision; corpus level: sum clipped counts and totals over all segments).
# ---------------------------------------------------------------------------


def ngram_counts(tokens, max_order=MAX_ORDER):
    """Counter of all n-grams (as tuples) of order 1..max_order."""
    counts = Counter()
    for n in range(1, max_order + 1):
        for i in range(len(tokens) - n + 1):
            counts[tuple(tokens[i:i + n])] += 1
    return counts


def corpus_stats(hyp_tokens, ref_tokens, max_order=MAX_ORDER):
    """Sum, over segments, of lengths, clipped matches and totals per order.

    hyp_tokens, ref_tokens: equally long lists of token lists (one reference
    per segment). A hypothesis n-gram's count is clipped by its count in the
    reference of the SAME segment (Papineni et al.; sacreBLEU
    _compute_segment_statistics; fairseq bleu_addngram).
    Reference tokens equal to None never match (used for fairseq's <unk>).
    """
    sys_len = ref_len = 0
    matches = [0] * max_order
    totals = [0] * max_order
    for hyp, ref in zip(hyp_tokens, ref_tokens):
        sys_len += len(hyp)
        ref_len += len(ref)  # one reference: its length is the "closest" one
        hyp_ngrams = ngram_counts(hyp, max_order)
        ref_ngrams = ngram_counts(ref, max_order)
        for ngram, count in hyp_ngrams.items():
            n = len(ngram)
            totals[n - 1] += count
            if None in ngram:  # cannot happen for hypotheses; defensive
                continue
            matches[n - 1] += min(count, ref_ngrams.get(ngram, 0))
    return sys_len, ref_len, matches, totals


# ---------------------------------------------------------------------------
# sacreBLEU corpus BLEU with its defaults:
#   case-sensitive (case:mixed), 1 reference, effective order off,
#   tokenizer 13a, smoothing "exp".
# Source: sacrebleu/metrics/bleu.py BLEU.compute_bleu (2.x):
#   * BP: if sys_len < ref_len: exp(1 - ref_len/sys_len) if sys_len > 0
#     else 0.0; otherwise 1.0.
#   * Early stop (sacreBLEU issue #141): if no n-gram of ANY order matched,
#     score 0.0 and ALL precisions reported as 0.0 (no smoothing applied).
#   * Loop n = 1..4: if total_n == 0 -> `break`: this order and all higher
#     ones keep precision 0.0. Then the final score uses my_log(0.0) =
#     -9999999999 for them, so exp(...) underflows to exactly 0.0: BLEU 0.
#     (Corpus totals are non-increasing in n, so once total_n is 0 all higher
#     totals are 0 as well.)
#   * if matches_n == 0 (exp smoothing, "NIST smoothing / method 3"):
#     smooth_mteval *= 2 (starting from 1), p_n = 100 / (smooth_mteval *
#     total_n); i.e. the k-th zero-match order gets 100 / (2^k * total_n).
#   * else p_n = 100 * matches_n / total_n.
#   * score = bp * exp(sum(log p_n) / 4)   (p_n in percent, so score is too).
# CLI reading (sacrebleu/sacrebleu.py): every line is `line.rstrip()`-ed;
# BLEU._preprocess_segment then tokenizes `sent.rstrip()`.
# ---------------------------------------------------------------------------


def sacre_bleu_from_stats(sys_len, ref_len, matches, totals):
    order = len(matches)
    if sys_len < ref_len:
        bp = math.exp(1.0 - ref_len / sys_len) if sys_len > 0 else 0.0
    else:
        bp = 1.0
    precisions = [0.0] * order
    if not any(matches):
        score = 0.0
    else:
        smooth_mteval = 1.0
        for n in range(1, order + 1):
            if totals[n - 1] == 0:
                break
            if matches[n - 1] == 0:
                smooth_mteval *= 2.0
                precisions[n - 1] = 100.0 / (smooth_mteval * totals[n - 1])
            else:
                precisions[n - 1] = 100.0 * matches[n - 1] / totals[n - 1]
        if any(p == 0.0 for p in precisions):
            # sacreBLEU: my_log(0) = -9999999999 -> exp(-2.5e9) == 0.0
            score = 0.0
        else:
            score = bp * math.exp(sum(math.log(p) for p in precisions) / order)
    return {
        "bleu": float(score),
        "precisions": [float(p) for p in precisions],
        "counts": list(matches),
        "totals": list(totals),
        "bp": float(bp),
        "sys_len": sys_len,
        "ref_len": ref_len,
        "signature": SACRE_SIGNATURE,
    }


def sacre_bleu(hyps, refs):
    """hyps, refs: lists of raw (detokenized) segment strings."""
    hyp_tokens = [tokenize_13a(h.rstrip()).split() for h in hyps]
    ref_tokens = [tokenize_13a(r.rstrip()).split() for r in refs]
    return sacre_bleu_from_stats(*corpus_stats(hyp_tokens, ref_tokens))


# ---------------------------------------------------------------------------
# Tokenized BLEU as fairseq reports it (fairseq/scoring/bleu.py Scorer +
# fairseq/clib/libbleu/libbleu.cpp):
#   * tokens: whitespace-split of the already tokenized (BPE-removed) text;
#   * clipped counts per segment, summed over the corpus
#     (bleu_addngram: hypothesis n-gram multiset, each reference n-gram
#     consumes one matching hypothesis n-gram => sum_g min(c_hyp, c_ref));
#   * precision p_n = matches_n / totals_n (0 if totals_n == 0);
#   * no smoothing: any p_n == 0 gives log = -inf, so BLEU = 0;
#   * BP = min(1, exp(1 - ref_len / sys_len));
#   * BLEU = BP * exp(sum(log p_n) / 4) * 100.
#   * Scorer.add replaces reference tokens equal to the unk index with -999,
#     so a reference <unk> (and any n-gram containing it) never matches.
# Deliberate differences from fairseq (documented, not replicated):
#   * sys_len == 0: fairseq's brevity() divides by zero; here BP = 0.0 (or
#     1.0 if ref_len is also 0, as sacreBLEU does) and BLEU = 0.
#   * fairseq encodes lines with an appended EOS and trims trailing EOS/pad
#     in bleu_rtrim, whose loop stops at index 0: an EMPTY line therefore
#     counts as one token (the EOS) there. Here an empty line has 0 tokens.
# ---------------------------------------------------------------------------


def tok_bleu_from_stats(sys_len, ref_len, matches, totals):
    order = len(matches)
    precisions = [m / t if t > 0 else 0.0 for m, t in zip(matches, totals)]
    if sys_len > 0:
        bp = min(1.0, math.exp(1.0 - ref_len / sys_len))
    else:
        bp = 0.0 if ref_len > 0 else 1.0
    if sys_len == 0 or any(p == 0.0 for p in precisions):
        score = 0.0
    else:
        score = bp * math.exp(sum(math.log(p) for p in precisions) / order) * 100.0
    return {
        "bleu": float(score),
        "precisions": [100.0 * p for p in precisions],
        "counts": list(matches),
        "totals": list(totals),
        "bp": float(bp),
        "sys_len": sys_len,
        "ref_len": ref_len,
    }


def tok_bleu(hyps, refs, unk=None):
    """hyps, refs: lists of tokenized segment strings (whitespace-separated)."""
    hyp_tokens = [h.split() for h in hyps]
    ref_tokens = []
    for r in refs:
        toks = r.split()
        if unk is not None:
            toks = [None if t == unk else t for t in toks]
        ref_tokens.append(toks)
    return tok_bleu_from_stats(*corpus_stats(hyp_tokens, ref_tokens))


# ---------------------------------------------------------------------------
# Self test: hand-computed expectations.
# ---------------------------------------------------------------------------


def _close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def _check(result, bleu=None, counts=None, totals=None, bp=None,
           sys_len=None, ref_len=None, precisions=None, label=""):
    if bleu is not None:
        assert _close(result["bleu"], bleu), (label, "bleu", result["bleu"], bleu)
    if counts is not None:
        assert result["counts"] == counts, (label, "counts", result["counts"], counts)
    if totals is not None:
        assert result["totals"] == totals, (label, "totals", result["totals"], totals)
    if bp is not None:
        assert _close(result["bp"], bp), (label, "bp", result["bp"], bp)
    if sys_len is not None:
        assert result["sys_len"] == sys_len, (label, "sys_len", result["sys_len"])
    if ref_len is not None:
        assert result["ref_len"] == ref_len, (label, "ref_len", result["ref_len"])
    if precisions is not None:
        assert len(result["precisions"]) == len(precisions), label
        for got, want in zip(result["precisions"], precisions):
            assert _close(got, want), (label, "precisions", result["precisions"], precisions)


def _selftest_tokenizer():
    cases = [
        # punctuation: ',' split after a non-digit; '!' is in the symbol class
        ("Hello, world!", "Hello , world !"),
        # '$' split; "3.5" and "1,000" kept (digit on both sides);
        # final '.' split (followed by the padding space)
        ("It costs $3.5 or 1,000.", "It costs $ 3.5 or 1,000 ."),
        # apostrophe is NOT in the symbol class
        ("It's John's.", "It's John's ."),
        # '-' split only when preceded by a digit
        ("pages 10-20 and well-known", "pages 10 - 20 and well-known"),
        ("a-3 -5 2-x", "a-3 -5 2 - x"),
        # one pass, non-overlapping: "1--2" -> "1 - " + "-2"
        ("1--2", "1 - -2"),
        # entity unescaping, then '&', '"', '<', '>' are split as symbols
        ("AT&amp;T", "AT & T"),
        ("&quot;Hi&quot;", '" Hi "'),
        ("&lt;b&gt;", "< b >"),
        # sequential replacement: &amp;lt; -> &lt; -> <
        ("x &amp;lt; y", "x < y"),
        # &quot; runs before &amp;, so &amp;quot; stays as &quot; (then split
        # at '&' and ';', both in the symbol class)
        ("&amp;quot;", "& quot ;"),
        # "<skipped>" removed before anything else
        ("a <skipped> b", "a b"),
        # '.' preceded by a non-digit splits even if followed by a digit
        (".5 x.5", ". 5 x . 5"),
        # '.' after a digit and before a non-digit splits
        ("5. 5,x", "5 . 5 , x"),
        # non-digit before ',' splits even if a digit follows
        ("x,5", "x , 5"),
        ("1.2.3", "1.2.3"),
        ("U.S.A.", "U . S . A ."),
        ("a..", "a . ."),
        ("...", ". . ."),
        # non-ASCII letters and curly quotes are not symbols
        ("naïve café.", "naïve café ."),
        ("\u201cHi\u201d", "\u201cHi\u201d"),
        # whitespace collapsed and stripped; tabs are whitespace
        ("  a\t\tb  ", "a b"),
        # brackets, slash, colon, semicolon, question mark, '@', '#', '%'
        ("(a/b): c; d? e@f #1 50%", "( a / b ) : c ; d ? e @ f # 1 50 %"),
        ("", ""),
    ]
    for raw, want in cases:
        got = tokenize_13a(raw)
        assert got == want, ("tokenize13a", raw, got, want)
    # "-\n" is removed and other "\n" become spaces (only reachable through
    # the function, as the CLI splits lines at "\n").
    assert tokenize_13a("hyphen-\nated\nline") == "hyphenated line"


def _selftest_bleu():
    both = (("sacre", sacre_bleu), ("tok", tok_bleu))

    # 1. Perfect match: 6 tokens, counts = totals = [6,5,4,3], BP 1, BLEU 100.
    for name, fn in both:
        r = fn(["the cat sat on the mat"], ["the cat sat on the mat"])
        _check(r, bleu=100.0, counts=[6, 5, 4, 3], totals=[6, 5, 4, 3], bp=1.0,
               sys_len=6, ref_len=6, precisions=[100.0] * 4, label=name + " perfect")
    # With punctuation (sacre tokenizes "mat." -> "mat ."): 7 tokens.
    r = sacre_bleu(["The cat sat on the mat."], ["The cat sat on the mat."])
    _check(r, bleu=100.0, counts=[7, 6, 5, 4], totals=[7, 6, 5, 4], label="sacre perfect punct")
    assert r["signature"] == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.0"

    # 2. Empty hypothesis line inside a corpus: it adds only to ref_len.
    #    sys_len 6, ref_len 6+2 = 8, all precisions 100,
    #    BP = exp(1 - 8/6) = exp(-1/3) -> BLEU = 100 * exp(-1/3) ~= 71.653131.
    for name, fn in both:
        r = fn(["the cat sat on the mat", ""], ["the cat sat on the mat", "a dog"])
        _check(r, bleu=100.0 * math.exp(-1.0 / 3.0), counts=[6, 5, 4, 3],
               totals=[6, 5, 4, 3], bp=math.exp(-1.0 / 3.0), sys_len=6, ref_len=8,
               label=name + " empty line")
    #    Empty hypothesis line where nothing else matches n=4 -> BLEU 0.
    for name, fn in both:
        r = fn(["", "a b c"], ["x y", "a b"])
        _check(r, bleu=0.0, sys_len=3, ref_len=4, label=name + " empty line 0")

    # 3. All-empty hypothesis corpus: sys_len 0, BP 0, BLEU 0, no crash.
    for name, fn in both:
        r = fn(["", ""], ["a b", "c"])
        _check(r, bleu=0.0, counts=[0] * 4, totals=[0] * 4, bp=0.0, sys_len=0,
               ref_len=3, precisions=[0.0] * 4, label=name + " all empty")
    #    Both sides empty: BP 1 (sys_len < ref_len is false), BLEU 0.
    for name, fn in both:
        r = fn([""], [""])
        _check(r, bleu=0.0, bp=1.0, sys_len=0, ref_len=0, label=name + " both empty")
    #    Empty corpus (no lines at all).
    for name, fn in both:
        _check(fn([], []), bleu=0.0, sys_len=0, ref_len=0, label=name + " no lines")

    # 4. Hypothesis longer than the reference: BP = 1.
    #    hyp "the cat sat on the mat today" (7) vs ref (6):
    #    matches/totals 6/7, 5/6, 4/5, 3/4 -> product 3/7,
    #    BLEU = 100 * (3/7)^(1/4) ~= 80.910671.
    for name, fn in both:
        r = fn(["the cat sat on the mat today"], ["the cat sat on the mat"])
        _check(r, bleu=100.0 * (3.0 / 7.0) ** 0.25, counts=[6, 5, 4, 3],
               totals=[7, 6, 5, 4], bp=1.0, sys_len=7, ref_len=6,
               label=name + " long hyp")

    # 5. Short hypothesis: "the cat sat on the" (5) vs 6-token ref.
    #    All precisions 100 (5/5, 4/4, 3/3, 2/2), BP = exp(1 - 6/5) = exp(-0.2),
    #    BLEU = 100 * exp(-0.2) ~= 81.873075.
    for name, fn in both:
        r = fn(["the cat sat on the"], ["the cat sat on the mat"])
        _check(r, bleu=100.0 * math.exp(-0.2), counts=[5, 4, 3, 2],
               totals=[5, 4, 3, 2], bp=math.exp(-0.2), sys_len=5, ref_len=6,
               label=name + " short hyp")

    # 6. Zero 4-gram matches.
    #    hyp "the cat sat down on the mat" (7) vs "the cat sat on the mat" (6):
    #    1-grams 6/7 (all but "down"), 2-grams 4/6 (the cat, cat sat, on the,
    #    the mat), 3-grams 2/5 (the cat sat, on the mat), 4-grams 0/4. BP = 1.
    #    tok: no smoothing -> 0.
    #    sacre (exp smoothing, first zero order: k=1): p4 = 100/(2*4) = 12.5;
    #    p1 = 600/7, p2 = 200/3, p3 = 40;
    #    BLEU = (600/7 * 200/3 * 40 * 12.5)^(1/4) = (20000000/7)^(1/4) ~= 41.113.
    hyp, ref = ["the cat sat down on the mat"], ["the cat sat on the mat"]
    r = tok_bleu(hyp, ref)
    _check(r, bleu=0.0, counts=[6, 4, 2, 0], totals=[7, 6, 5, 4], bp=1.0,
           precisions=[600.0 / 7, 400.0 / 6, 40.0, 0.0], label="tok zero 4-gram")
    r = sacre_bleu(hyp, ref)
    _check(r, bleu=(20000000.0 / 7.0) ** 0.25, counts=[6, 4, 2, 0],
           totals=[7, 6, 5, 4], bp=1.0,
           precisions=[600.0 / 7, 200.0 / 3, 40.0, 12.5], label="sacre zero 4-gram")

    #    Two zero-match orders (k = 1 then 2): hyp "a b c d e f" vs
    #    ref "a b z d e z": 1-grams 4/6, 2-grams 2/5 (a b, d e), 3-grams 0/4,
    #    4-grams 0/3, BP = 1 (6 = 6).
    #    sacre: p3 = 100/(2*4) = 12.5, p4 = 100/(4*3) = 25/3;
    #    BLEU = (200/3 * 40 * 12.5 * 25/3)^(1/4) = (2500000/9)^(1/4) ~= 22.958.
    r = sacre_bleu(["a b c d e f"], ["a b z d e z"])
    _check(r, bleu=(2500000.0 / 9.0) ** 0.25, counts=[4, 2, 0, 0],
           totals=[6, 5, 4, 3], bp=1.0,
           precisions=[200.0 / 3, 40.0, 12.5, 25.0 / 3], label="sacre two zero orders")

    # 7. Clipping: "the the the the" vs "the cat": "the" clipped to 1 -> 1/4;
    #    2-grams 0/3, 3-grams 0/2, 4-grams 0/1; BP = 1 (4 > 2).
    #    tok: 0. sacre: p1 = 25, p2 = 100/(2*3) = 50/3, p3 = 100/(4*2) = 12.5,
    #    p4 = 100/(8*1) = 12.5; BLEU = (25 * 50/3 * 12.5 * 12.5)^(1/4)
    #    = (390625/6)^(1/4) ~= 15.9733.
    hyp, ref = ["the the the the"], ["the cat"]
    _check(tok_bleu(hyp, ref), bleu=0.0, counts=[1, 0, 0, 0], totals=[4, 3, 2, 1],
           bp=1.0, precisions=[25.0, 0.0, 0.0, 0.0], label="tok clip")
    _check(sacre_bleu(hyp, ref), bleu=(390625.0 / 6.0) ** 0.25,
           counts=[1, 0, 0, 0], totals=[4, 3, 2, 1], bp=1.0,
           precisions=[25.0, 50.0 / 3, 12.5, 12.5], label="sacre clip")

    #    Clipping is per segment, not over the pooled corpus:
    #    seg1 "the the" vs "the cat": the -> min(2,1) = 1; seg2 "cat" vs
    #    "the the": 0. Pooled counting would give 2. Totals [3,1,0,0].
    #    sacre: total_3 == 0 -> loop breaks, p3 = p4 = 0 -> BLEU 0 (sacreBLEU
    #    floors log(0) to -9999999999). p1 = 100/3, p2 = 100/(2*1) = 50.
    #    BP = exp(1 - 4/3).
    hyp, ref = ["the the", "cat"], ["the cat", "the the"]
    _check(tok_bleu(hyp, ref), bleu=0.0, counts=[1, 0, 0, 0], totals=[3, 1, 0, 0],
           bp=math.exp(1.0 - 4.0 / 3.0), label="tok per-seg clip")
    _check(sacre_bleu(hyp, ref), bleu=0.0, counts=[1, 0, 0, 0], totals=[3, 1, 0, 0],
           bp=math.exp(1.0 - 4.0 / 3.0), precisions=[100.0 / 3, 50.0, 0.0, 0.0],
           label="sacre per-seg clip / zero total")

    # 8. No match at all: sacreBLEU's early stop reports precisions all 0.0.
    r = sacre_bleu(["x y z w"], ["a b c d"])
    _check(r, bleu=0.0, counts=[0] * 4, totals=[4, 3, 2, 1], bp=1.0,
           precisions=[0.0] * 4, label="sacre no match")

    # 9. Case-sensitive sacre: "The" != "the".
    #    "The cat sat on the mat" vs "the cat sat on the mat": 1-grams 5/6,
    #    2-grams 4/5, 3-grams 3/4, 4-grams 2/3 -> product 1/3,
    #    BLEU = 100 * (1/3)^(1/4) ~= 75.983569.
    r = sacre_bleu(["The cat sat on the mat"], ["the cat sat on the mat"])
    _check(r, bleu=100.0 * (1.0 / 3.0) ** 0.25, counts=[5, 4, 3, 2],
           totals=[6, 5, 4, 3], label="sacre case")

    # 10. sacre vs tok on the same raw text: 13a splits "mat." into 2 tokens.
    #    hyp "the cat sat on the mat." vs ref "the cat sat on the mat":
    #    tok: "mat." != "mat": 5/6, 4/5, 3/4, 2/3 -> 100 * (1/3)^(1/4), BP 1.
    #    sacre: hyp 7 tokens: 6/7, 5/6, 4/5, 3/4 -> 100 * (3/7)^(1/4), BP 1.
    hyp, ref = ["the cat sat on the mat."], ["the cat sat on the mat"]
    _check(tok_bleu(hyp, ref), bleu=100.0 * (1.0 / 3.0) ** 0.25, label="tok raw punct")
    _check(sacre_bleu(hyp, ref), bleu=100.0 * (3.0 / 7.0) ** 0.25, label="sacre raw punct")

    # 11. fairseq-style unknown token in the reference never matches.
    #    "a b c d e <unk>" vs same, unk="<unk>": 5/6, 4/5, 3/4, 2/3 ->
    #    100 * (1/3)^(1/4); without unk handling: 100.
    hyp, ref = ["a b c d e <unk>"], ["a b c d e <unk>"]
    _check(tok_bleu(hyp, ref, unk="<unk>"), bleu=100.0 * (1.0 / 3.0) ** 0.25,
           counts=[5, 4, 3, 2], totals=[6, 5, 4, 3], label="tok unk")
    _check(tok_bleu(hyp, ref), bleu=100.0, label="tok no unk")

    # 12. Corpus-level pooling (not an average of sentence scores):
    #    seg1 perfect 4 tokens (4/4, 3/3, 2/2, 1/1), seg2 "p q" vs "p r"
    #    (1/2, 0/1, 0/0, 0/0) -> counts [5,3,2,1], totals [6,4,2,1], BP 1,
    #    BLEU = 100 * (5/6 * 3/4 * 1 * 1)^(1/4) = 100 * (5/8)^(1/4) ~= 88.9140.
    for name, fn in both:
        r = fn(["w x y z", "p q"], ["w x y z", "p r"])
        _check(r, bleu=100.0 * (5.0 / 8.0) ** 0.25, counts=[5, 3, 2, 1],
               totals=[6, 4, 2, 1], bp=1.0, sys_len=6, ref_len=6,
               label=name + " pooling")


def selftest():
    _selftest_tokenizer()
    _selftest_bleu()
    print("ok")
    return 0


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

USAGE = (
    "usage: bleu_ref.py sacre HYP_FILE REF_FILE\n"
    "       bleu_ref.py tok HYP_FILE REF_FILE [--unk STR]\n"
    "       bleu_ref.py tokenize13a < input\n"
    "       bleu_ref.py selftest\n"
)


def _split_lines(text):
    """Split on "\\n" only (not on \\r, \\x0b, \\x1c, \\u2028, ... as
    str.splitlines would); a final "\\n" does not start an extra line.
    sacreBLEU opens files with newline="\\n" for the same reason."""
    if text == "":
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _read_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    return _split_lines(data.decode("utf-8"))


def _fail(msg):
    sys.stderr.write("bleu_ref.py: " + msg + "\n")
    return 2


def main(argv):
    if len(argv) < 1:
        sys.stderr.write(USAGE)
        return 2
    cmd = argv[0]
    if cmd == "selftest" and len(argv) == 1:
        return selftest()
    if cmd == "tokenize13a" and len(argv) == 1:
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as e:
            return _fail("stdin is not valid UTF-8: %s" % e)
        out = "".join(tokenize_13a(line) + "\n" for line in _split_lines(text))
        sys.stdout.buffer.write(out.encode("utf-8"))
        sys.stdout.flush()
        return 0
    if cmd in ("sacre", "tok"):
        unk = None
        rest = argv[1:]
        if cmd == "tok" and len(rest) == 4 and rest[2] == "--unk":
            unk = rest[3]
            rest = rest[:2]
        if len(rest) != 2:
            sys.stderr.write(USAGE)
            return 2
        hyp_path, ref_path = rest
        try:
            hyps = _read_lines(hyp_path)
            refs = _read_lines(ref_path)
        except OSError as e:
            return _fail("cannot read input: %s" % e)
        except UnicodeDecodeError as e:
            return _fail("input is not valid UTF-8: %s" % e)
        if len(hyps) != len(refs):
            return _fail("line count mismatch: %s has %d lines, %s has %d lines"
                         % (hyp_path, len(hyps), ref_path, len(refs)))
        if cmd == "sacre":
            # sacreBLEU's CLI rstrip()s every line it reads.
            result = sacre_bleu([h.rstrip() for h in hyps], [r.rstrip() for r in refs])
        else:
            result = tok_bleu(hyps, refs, unk=unk)
        print(json.dumps(result))
        return 0
    sys.stderr.write(USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
