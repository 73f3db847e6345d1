#!/usr/bin/python3
"""Independent, standard-library-only reference encoder for Hugging Face
``tokenizer.json`` files (byte-level BPE as shipped by Llama 3, Qwen2 and
SmolLM/GPT-2).  It exists to cross-check another implementation, so every
behaviour below was written from the huggingface/tokenizers Rust sources
(models/bpe/{model,word,serialization}.rs, pre_tokenizers/{split,byte_level}.rs,
tokenizer/{added_vocabulary,normalizer,pattern,pre_tokenizer}.rs,
processors/{template,sequence}.rs) and transformers' fast-tokenizer loader,
not from any other port.

Usage
  hf_tokenizer.py make DIR --style llama3|qwen2|gpt2 [--vocab-size N]
                  [--corpus FILE] [--merges-format strings|pairs]
      Train a small byte-level BPE on a corpus (default: built-in multilingual
      text) and write DIR/tokenizer.json + DIR/tokenizer_config.json in that
      model family's real layout.
  hf_tokenizer.py encode DIR [--no-special-tokens] [--ignore-config]
      stdin: one JSON string per line (empty lines skipped);
      stdout: one JSON list of ids per line.
  hf_tokenizer.py decode DIR [--skip-special-tokens]
      stdin: one JSON list of ids per line; stdout: one JSON string per line.
  hf_tokenizer.py selftest
      Prints "selftest: N checks passed"; exits 1 on any failure.

Pipeline (tokenizers' TokenizerImpl::encode_single_sequence + post_process):
  1. added tokens are split out (non-normalized ones on the raw text, then the
     normalizer runs on the remaining pieces, then normalized ones), each by a
     leftmost-longest scan honouring single_word / lstrip / rstrip;
  2. the pre-tokenizer (Sequence / Split / ByteLevel) splits each remaining
     piece; empty pieces are dropped;
  3. the BPE model turns each piece into ids (ignore_merges, merges by rank,
     byte_fallback, unk_token / fuse_unk, continuing_subword_prefix,
     end_of_word_suffix);
  4. the post-processor (TemplateProcessing "single" / ByteLevel / Sequence)
     adds special tokens when add_special_tokens is true.

Regex patterns (Split "Regex" and ByteLevel's GPT-2 regex) are written for
Oniguruma (Ruby syntax, UTF-8).  Python's re lacks \\p{..}, so
translate_pattern() rewrites every class into explicit code point ranges
built from unicodedata (whole code space, built once and cached):
  supported: \\p{X}, \\pX, \\P{X}, \\p{^X} for general categories (L Lu Ll Lt
    Lm Lo LC M Mn Mc Me N Nd Nl No, P*, S*, Z*, C*, long names such as
    Letter / Decimal_Number) and Any, ASCII, White_Space, Space, Digit, Word,
    XDigit; \\s \\S \\d \\D \\w \\W \\h \\H with Oniguruma's Unicode meaning
    (\\s = White_Space, so U+001C..U+001F are NOT spaces, unlike Python's \\s);
    character classes with ranges, negation and the escapes above; \\r \\n \\t
    \\f \\v \\a \\e \\xHH \\x{H..} \\uHHHH; escaped punctuation; groups (...)
    (?:...) (?=...) (?!...) (?<=...) (?<!...) (?>...), named groups (made
    non-capturing), (?#...) comments; scoped flags (?i:...) (?-i:...)
    (?m:...) (Ruby 'm' = dot-all, mapped to Python 's'); flags without a
    scope only at the very start; quantifiers * + ? {n} {n,} {n,m} {,m}
    (e.g. \\p{N}{1,3}), lazy '?' and possessive ?+ *+ ++; '.' (not \\n);
    '^' / '$' as Ruby line anchors; \\A \\z \\Z; an unpaired '{' as a literal.
  rejected with PatternError (never silently mistranslated): scripts, blocks
    and other properties (\\p{Han}, \\p{Alpha}...), \\b \\B \\G \\K \\R \\X \\N
    \\O \\y \\Y \\k \\g \\c \\C \\M \\o, back-references and octal escapes,
    nested classes / POSIX brackets [[:alpha:]], class intersection &&, the x
    (extended) flag, mid-pattern flags without a scope, and {n}? / {..}+
    (Ruby reads these as (?:x{n})? and a repeated interval, Python as lazy /
    possessive).
  Caveats: category data is Python 3.11's Unicode 14.0 (tokenizers' onig may
  use a newer Unicode, so characters assigned later can classify
  differently); Alphabetic (inside \\w) is approximated as L|Nl|circled
  letters, which only matters outside \\p{M}; case-insensitive matching is
  Python's simple case folding (U+017F matches s, U+212A matches k, as in
  onig) without multi-character folds; boundaries after empty regex matches
  follow Python's finditer (the shipped patterns never match empty).

Ambiguities resolved (and how)
  * Added-token ids: tokenizers re-adds the "added_tokens" list on load, taking
    the id from the model vocab (or an earlier added token) when the content
    is already there, otherwise model_vocab_size, +1, ... in file order.  We do
    the same and warn on stderr when the file's "id" disagrees (as tokenizers
    does).
  * add_bos_token / add_eos_token (tokenizer_config.json): when EITHER key is
    present, the post-processor is replaced by TemplateProcessing
    "[bos:0] $A:0 [eos:0]" built from the config's bos_token / eos_token (the
    missing key counts as false; a null token disables its flag).  This is what
    transformers v5's TokenizersBackend and v4's LlamaTokenizerFast /
    GemmaTokenizerFast update_post_processor() do.  When neither key is present
    the tokenizer.json post_processor decides alone (Llama 3 has no such key
    and gets BOS from its TemplateProcessing; Qwen2 / GPT-2 get none).  Class-
    specific defaults (v4 LlamaTokenizerFast defaulting add_bos_token=True when
    the key is absent) are NOT modelled.  --ignore-config skips the config.
  * Duplicate merges: the later line wins (tokenizers collects them into a map).
  * A merge token missing from the vocab is an error, as in tokenizers.
  * A character not in the vocab with no byte_fallback match and no unk_token
    is dropped silently (BPE::merge_word behaviour); byte_fallback tokens are
    emitted before a still-pending unk, exactly as merge_word orders them.
  * ByteLevel pre-tokenizer add_prefix_space prepends ' ' to EVERY piece that
    reaches it (tokenizers applies it per split); absent fields take the
    ByteLevel Default (all true).
  * dropout other than null/0 is rejected (non-deterministic); truncation and
    padding in tokenizer.json are ignored (transformers resets them per call).
  * decode() is tokenizers' decode (ByteLevel decoder, lossy UTF-8); the
    transformers-level clean_up_tokenization_spaces is not applied.
  * Strings with lone surrogates are rejected (Rust strings cannot hold them).
"""
import argparse
import bisect
import collections
import functools
import heapq
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import unicodedata

# --------------------------------------------------------------------------
# GPT-2 byte <-> unicode table (pre_tokenizers/byte_level.rs bytes_char)
# --------------------------------------------------------------------------


def bytes_to_unicode():
    """Printable bytes map to themselves, the rest to 256+n in byte order."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD))
          + list(range(0xAE, 0x100)))
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]  # in GPT-2 vocab order


BYTE_ORDER = bytes_to_unicode()
BYTE_TO_CHAR = {b: c for b, c in BYTE_ORDER}
CHAR_TO_BYTE = {c: b for b, c in BYTE_ORDER}


def byte_level_map(s):
    """UTF-8 bytes of s, each replaced by its table character."""
    return "".join(BYTE_TO_CHAR[b] for b in s.encode("utf-8"))

# --------------------------------------------------------------------------
# Unicode character sets as sorted (lo, hi) code point ranges
# --------------------------------------------------------------------------


MAX_CP = 0x10FFFF
# PropList.txt White_Space: what Oniguruma's Unicode \s matches (Python's \s
# would also match U+001C..U+001F, which are not White_Space).
WHITE_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0),
               (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
               (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)]
# Other_Alphabetic characters outside category M (circled letters), for \w.
_OTHER_ALPHA_NON_M = [(0x24B6, 0x24E9), (0x1F130, 0x1F149),
                      (0x1F150, 0x1F169), (0x1F170, 0x1F189)]
_JOIN_CONTROL = [(0x200C, 0x200D)]

HEX_DIGITS = [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)]
_GC_GROUPS = {
    "L": ("Lu", "Ll", "Lt", "Lm", "Lo"), "LC": ("Lu", "Ll", "Lt"),
    "M": ("Mn", "Mc", "Me"), "N": ("Nd", "Nl", "No"),
    "P": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "S": ("Sm", "Sc", "Sk", "So"), "Z": ("Zs", "Zl", "Zp"),
    "C": ("Cc", "Cf", "Cs", "Co", "Cn"),
}
_GC_LONG = {
    "letter": "L", "casedletter": "LC", "uppercaseletter": "Lu",
    "lowercaseletter": "Ll", "titlecaseletter": "Lt", "modifierletter": "Lm",
    "otherletter": "Lo", "mark": "M", "combiningmark": "M",
    "nonspacingmark": "Mn", "spacingmark": "Mc", "enclosingmark": "Me",
    "number": "N", "decimalnumber": "Nd", "letternumber": "Nl",
    "othernumber": "No", "punctuation": "P", "connectorpunctuation": "Pc",
    "dashpunctuation": "Pd", "openpunctuation": "Ps", "closepunctuation": "Pe",
    "initialpunctuation": "Pi", "finalpunctuation": "Pf",
    "otherpunctuation": "Po", "symbol": "S", "mathsymbol": "Sm",
    "currencysymbol": "Sc", "modifiersymbol": "Sk", "othersymbol": "So",
    "separator": "Z", "spaceseparator": "Zs", "lineseparator": "Zl",
    "paragraphseparator": "Zp", "other": "C", "control": "Cc", "format": "Cf",
    "surrogate": "Cs", "privateuse": "Co", "unassigned": "Cn", "l&": "LC",
}


@functools.lru_cache(maxsize=None)
def _category_ranges():
    """General category -> ranges over the whole code space (built once)."""
    out = collections.defaultdict(list)
    cat_of = unicodedata.category
    start, prev = 0, cat_of("\0")
    for cp in range(1, MAX_CP + 1):
        cat = cat_of(chr(cp))
        if cat != prev:
            out[prev].append((start, cp - 1))
            start, prev = cp, cat
    out[prev].append((start, MAX_CP))
    return dict(out)


def normalize_ranges(ranges):
    """Sort and merge overlapping / adjacent ranges."""
    merged = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def complement_ranges(ranges):
    out, nxt = [], 0
    for lo, hi in normalize_ranges(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CP:
        out.append((nxt, MAX_CP))
    return out


def category_set(*cats):
    table = _category_ranges()
    ranges = []
    for cat in cats:
        for sub in _GC_GROUPS.get(cat, (cat,)):
            ranges.extend(table.get(sub, []))
    return normalize_ranges(ranges)


@functools.lru_cache(maxsize=None)
def word_set():
    """Oniguruma's Unicode \\w / \\p{Word}: Alphabetic|M|Nd|Pc, with
    Alphabetic approximated as L|Nl|circled letters (make_unicode_property_data
    add_posix_props; the other Other_Alphabetic characters are marks)."""
    return normalize_ranges(category_set("L", "M", "Nd", "Nl", "Pc")
                            + _OTHER_ALPHA_NON_M)


@functools.lru_cache(maxsize=None)
def rust_word_set():
    """Rust regex's \\w (UTS#18 word = onig's plus Join_Control); used for
    added tokens' single_word test."""
    return normalize_ranges(word_set() + _JOIN_CONTROL)


class RangeSet:
    """Fast membership test for a range list."""

    def __init__(self, ranges):
        self.ranges = normalize_ranges(ranges)
        self.los = [lo for lo, _ in self.ranges]

    def __contains__(self, ch):
        cp = ord(ch)
        k = bisect.bisect_right(self.los, cp) - 1
        return k >= 0 and cp <= self.ranges[k][1]


@functools.lru_cache(maxsize=None)
def is_ws_set():
    return RangeSet(WHITE_SPACE)


@functools.lru_cache(maxsize=None)
def is_word_set():
    return RangeSet(rust_word_set())

# --------------------------------------------------------------------------
# Oniguruma pattern -> Python re translation
# --------------------------------------------------------------------------


class PatternError(ValueError):
    """A regex construct this translator does not support."""


def property_ranges(name):
    """\\p{name} as ranges; raises PatternError for unknown properties."""
    key = name.replace("_", "").replace(" ", "").lower()  # onig's rule
    short = {k.lower(): k for k in list(_GC_GROUPS) + [
        c for g in _GC_GROUPS.values() for c in g]}
    if key in short:
        return category_set(short[key])
    if key in _GC_LONG:
        return category_set(_GC_LONG[key])
    special = {"any": [(0, MAX_CP)], "ascii": [(0, 0x7F)],
               "whitespace": WHITE_SPACE, "space": WHITE_SPACE}
    if key in special:
        return special[key]
    if key == "digit":
        return category_set("Nd")
    if key == "word":
        return word_set()
    if key == "xdigit":
        return HEX_DIGITS
    raise PatternError("unsupported Unicode property \\p{%s} (only general "
                       "categories, Any, ASCII, White_Space, Digit, Word)" % name)


def _shorthand_ranges(letter):
    """\\s \\d \\w \\h (and upper-case negations), Oniguruma Unicode."""
    kind = letter.lower()
    if kind == "s":
        base = WHITE_SPACE
    elif kind == "d":
        base = category_set("Nd")
    elif kind == "w":
        base = word_set()
    else:
        base = HEX_DIGITS
    return complement_ranges(base) if letter.isupper() else base


_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v",
                   "a": "\a", "e": "\x1b"}


def _read_hex(pat, i, count):
    digits = pat[i:i + count]
    if len(digits) != count or not all(c in "0123456789abcdefABCDEF"
                                       for c in digits):
        raise PatternError("bad hex escape at %d in %r" % (i, pat))
    return int(digits, 16)


def _parse_char_escape(pat, i):
    """pat[i] == '\\' and the escape denotes one character -> (cp, next)."""
    c = pat[i + 1]
    if c in _SIMPLE_ESCAPES:
        return ord(_SIMPLE_ESCAPES[c]), i + 2
    if c == "x" and pat[i + 2:i + 3] == "{":
        end = pat.index("}", i + 3)
        return int(pat[i + 3:end], 16), end + 1
    if c == "x":
        return _read_hex(pat, i + 2, 2), i + 4
    if c == "u":
        return _read_hex(pat, i + 2, 4), i + 6
    if not c.isalnum():
        return ord(c), i + 2
    return None, i


def _parse_property(pat, i):
    """pat[i:] starts with \\p or \\P -> (ranges, next index)."""
    negate = pat[i + 1] == "P"
    if pat[i + 2:i + 3] == "{":
        end = pat.find("}", i + 3)
        if end < 0:
            raise PatternError("unterminated \\p{ in %r" % pat)
        name, nxt = pat[i + 3:end], end + 1
        if name.startswith("^"):
            negate, name = not negate, name[1:]
    else:
        name, nxt = pat[i + 2:i + 3], i + 3
    ranges = property_ranges(name)
    return (complement_ranges(ranges) if negate else ranges), nxt


def _parse_class_atom(pat, i):
    """One item inside [...] -> (single cp or None, ranges or None, next)."""
    c = pat[i]
    if c != "\\":
        return ord(c), None, i + 1
    if i + 1 >= len(pat):
        raise PatternError("trailing backslash in %r" % pat)
    e = pat[i + 1]
    if e in "pP":
        ranges, nxt = _parse_property(pat, i)
        return None, ranges, nxt
    if e in "sSdDwWhH":
        return None, _shorthand_ranges(e), i + 2
    if e == "b":  # inside a class Oniguruma's \b is backspace
        return 0x08, None, i + 2
    cp, nxt = _parse_char_escape(pat, i)
    if cp is None:
        raise PatternError("unsupported escape \\%s in class in %r" % (e, pat))
    return cp, None, nxt


def _parse_class(pat, i):
    """pat[i] == '[' -> (normalized ranges, next index)."""
    i += 1
    negate = pat[i:i + 1] == "^"
    i += negate
    items, first = [], True
    while True:
        if i >= len(pat):
            raise PatternError("unterminated character class in %r" % pat)
        c = pat[i]
        if c == "]" and not first:
            i += 1
            break
        if c == "[":
            raise PatternError("nested classes / POSIX brackets are not "
                               "supported: %r" % pat)
        if pat.startswith("&&", i):
            raise PatternError("class intersection && is not supported: %r"
                               % pat)
        cp, ranges, i = _parse_class_atom(pat, i)
        first = False
        if ranges is not None:
            items.extend(ranges)
            continue
        if pat[i:i + 1] == "-" and pat[i + 1:i + 2] not in ("]", ""):
            hi, hranges, i = _parse_class_atom(pat, i + 1)
            if hranges is not None or hi < cp:
                raise PatternError("bad class range in %r" % pat)
            items.append((cp, hi))
        else:
            items.append((cp, cp))
    ranges = normalize_ranges(items)
    return (complement_ranges(ranges) if negate else ranges), i


def _esc_cp(cp):
    return "\\u%04x" % cp if cp <= 0xFFFF else "\\U%08x" % cp


def emit_class(ranges):
    """Ranges -> a Python character class (always positive, explicit)."""
    if not ranges:
        return "(?!)"
    parts = [_esc_cp(lo) if lo == hi else _esc_cp(lo) + "-" + _esc_cp(hi)
             for lo, hi in ranges]
    return "[" + "".join(parts) + "]"


def _emit_literal(cp):
    ch = chr(cp)
    if ch.isascii() and ch.isalnum():
        return ch
    if 0x20 < cp < 0x7F:
        return re.escape(ch)
    return _esc_cp(cp)


_UNSUPPORTED_ESCAPES = set("bBGKRXNOyYkgcCMo0123456789")


def _translate_escape(pat, i):
    """Escape outside a class -> (python text, next index)."""
    if i + 1 >= len(pat):
        raise PatternError("trailing backslash in %r" % pat)
    e = pat[i + 1]
    if e in "pP":
        ranges, nxt = _parse_property(pat, i)
        return emit_class(ranges), nxt
    if e in "sSdDwWhH":
        return emit_class(_shorthand_ranges(e)), i + 2
    anchors = {"A": r"\A", "z": r"\Z", "Z": r"(?=\n?\Z)"}
    if e in anchors:
        return anchors[e], i + 2
    if e in _UNSUPPORTED_ESCAPES:
        raise PatternError("unsupported escape \\%s in %r" % (e, pat))
    cp, nxt = _parse_char_escape(pat, i)
    if cp is None:
        raise PatternError("unsupported escape \\%s in %r" % (e, pat))
    return _emit_literal(cp), nxt


def _translate_flags(flags, pat):
    """Oniguruma (Ruby syntax) inline flags -> Python flags."""
    out = ""
    for f in flags:
        if f == "i" or f == "-":
            out += f
        elif f == "m":  # Ruby's m is dot-all
            out += "s"
        else:
            raise PatternError("unsupported inline flag %r in %r" % (f, pat))
    return out


def _translate_group_open(pat, i, at_start):
    """pat[i] == '(' -> (python text, next index)."""
    if not pat.startswith("(?", i):
        return "(", i + 1
    rest = pat[i + 2:]
    for head in (":", "=", "!", ">", "<=", "<!"):
        if rest.startswith(head):
            return "(?" + head, i + 2 + len(head)
    if rest.startswith("#"):
        end = pat.index(")", i)
        return "", end + 1
    m = re.match(r"P?<([A-Za-z_]\w*)>", rest)
    if m:
        return "(?:", i + 2 + m.end()
    m = re.match(r"([A-Za-z-]+)([:)])", rest)
    if not m:
        raise PatternError("unsupported group syntax at %d in %r" % (i, pat))
    flags = _translate_flags(m.group(1), pat)
    if m.group(2) == ")" and (not at_start or "-" in flags):
        raise PatternError("flags without a scope are only supported at the "
                           "start of the pattern: %r" % pat)
    return "(?" + flags + m.group(2), i + 2 + m.end()


_QUANT_RE = re.compile(r"\{(\d*)(,?)(\d*)\}")


def _translate_interval(pat, i):
    """{n} {n,} {n,m} {,m}; an unpaired '{' is a literal (Ruby syntax)."""
    m = _QUANT_RE.match(pat, i)
    if not m or not (m.group(1) or m.group(3)):
        return r"\{", i + 1
    after = pat[m.end():m.end() + 1]
    # Ruby syntax: {n}? means (?:x{n})? and {..}+ is not possessive; Python
    # reads both differently, so refuse rather than mistranslate.
    if after == "+" or (after == "?" and not m.group(2)):
        raise PatternError("%r%s has a Ruby-specific meaning; unsupported"
                           % (m.group(0), after))
    return m.group(0), m.end()


def translate_pattern(pat):
    """Translate an Oniguruma pattern (as in tokenizer.json) to Python re."""
    out, i = [], 0
    while i < len(pat):
        c = pat[i]
        if c == "\\":
            text, i = _translate_escape(pat, i)
        elif c == "[":
            ranges, i = _parse_class(pat, i)
            text = emit_class(ranges)
        elif c == "(":
            text, i = _translate_group_open(pat, i, not out)
        elif c == "^":
            text, i = "(?m:^)", i + 1
        elif c == "$":
            text, i = "(?m:$)", i + 1
        elif c == "{":
            text, i = _translate_interval(pat, i)
        elif c in ".|)*+?":
            text, i = c, i + 1
        else:
            text, i = _emit_literal(ord(c)), i + 1
        out.append(text)
    return "".join(out)


@functools.lru_cache(maxsize=None)
def compile_pattern(pat):
    try:
        return re.compile(translate_pattern(pat))
    except re.error as exc:
        raise PatternError("translated pattern for %r does not compile: %s"
                           % (pat, exc)) from exc

# --------------------------------------------------------------------------
# Normalizers (normalizers/{unicode,utils}.rs)
# --------------------------------------------------------------------------


def build_normalizer(spec):
    """JSON normalizer -> function str -> str (None means identity)."""
    if spec is None:
        return None
    kind = spec.get("type")
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return functools.partial(unicodedata.normalize, kind)
    if kind == "Lowercase":
        return str.lower  # Rust to_lowercase == Unicode full lowercase
    if kind == "Sequence":
        parts = [build_normalizer(n) for n in spec["normalizers"]]
        parts = [p for p in parts if p is not None]
        return lambda s: functools.reduce(lambda acc, f: f(acc), parts, s)
    raise ValueError("unsupported normalizer type %r" % kind)

# --------------------------------------------------------------------------
# Pre-tokenizers (pre_tokenizers/{split,byte_level,sequence}.rs)
# --------------------------------------------------------------------------


GPT2_PATTERN = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"
                r"|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
                  r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                  r"|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
                 r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def find_matches(regex, s):
    """pattern.rs find_matches: contiguous [(start, end, is_match)]."""
    if not s:
        return [(0, 0, False)]
    out, prev = [], 0
    for m in regex.finditer(s):
        if prev != m.start():
            out.append((prev, m.start(), False))
        out.append((m.start(), m.end(), True))
        prev = m.end()
    if prev != len(s):
        out.append((prev, len(s), False))
    return out


def _fold_merge(matches, forward):
    """MergedWithPrevious (forward) / MergedWithNext (backward) folding."""
    seq = matches if forward else list(reversed(matches))
    acc, prev_match = [], False
    for start, end, is_match in seq:
        if is_match and not prev_match and acc:
            lo, hi, _ = acc[-1]
            acc[-1] = (lo, end, False) if forward else (start, hi, False)
        else:
            acc.append((start, end, False))
        prev_match = is_match
    return acc if forward else list(reversed(acc))


def _contiguous(matches):
    acc, prev_match = [], False
    for start, end, is_match in matches:
        if is_match == prev_match and acc:
            acc[-1] = (acc[-1][0], end, False)
        else:
            acc.append((start, end, False))
        prev_match = is_match
    return acc


def split_by_behavior(matches, behavior):
    """normalizer.rs NormalizedString::split -> [(start, end, removed)]."""
    if behavior == "Isolated":
        return [(a, b, False) for a, b, _ in matches]
    if behavior == "Removed":
        return matches
    if behavior == "Contiguous":
        return _contiguous(matches)
    if behavior == "MergedWithPrevious":
        return _fold_merge(matches, True)
    if behavior == "MergedWithNext":
        return _fold_merge(matches, False)
    raise ValueError("unknown Split behavior %r" % behavior)


def regex_split(regex, s, behavior, invert=False):
    matches = find_matches(regex, s)
    if invert:  # pattern.rs Invert flips the is_match flags
        matches = [(a, b, not m) for a, b, m in matches]
    return [s[a:b] for a, b, removed in split_by_behavior(matches, behavior)
            if not removed and b > a]


def _split_pretokenizer(spec):
    pattern = spec["pattern"]
    if "Regex" in pattern:
        regex = compile_pattern(pattern["Regex"])
    else:  # SplitPattern::String is matched literally (regex::escape)
        regex = re.compile(re.escape(pattern["String"]))
    behavior, invert = spec["behavior"], bool(spec.get("invert", False))
    return lambda pieces: [p for s in pieces
                           for p in regex_split(regex, s, behavior, invert)]


def _byte_level_pretokenizer(spec):
    add_prefix = spec.get("add_prefix_space", True)
    use_regex = spec.get("use_regex", True)
    regex = compile_pattern(GPT2_PATTERN) if use_regex else None

    def run(pieces):
        out = []
        for s in pieces:
            if add_prefix and not s.startswith(" "):
                s = " " + s  # applied per split, as byte_level.rs does
            parts = regex_split(regex, s, "Isolated") if use_regex else [s]
            out.extend(byte_level_map(p) for p in parts if p)
        return out
    return run


def build_pre_tokenizer(spec):
    """JSON pre_tokenizer -> function list[str] -> list[str]."""
    if spec is None:
        return lambda pieces: [p for p in pieces if p]
    kind = spec.get("type")
    if kind == "Split":
        return _split_pretokenizer(spec)
    if kind == "ByteLevel":
        return _byte_level_pretokenizer(spec)
    if kind == "Sequence":
        steps = [build_pre_tokenizer(p) for p in spec["pretokenizers"]]
        return lambda pieces: functools.reduce(lambda acc, f: f(acc),
                                               steps, pieces)
    raise ValueError("unsupported pre_tokenizer type %r" % kind)

# --------------------------------------------------------------------------
# BPE model (models/bpe/{model,word,serialization}.rs)
# --------------------------------------------------------------------------


def parse_merges(raw):
    """Merges as "a b" strings (legacy) or [a, b] pairs -> list of tuples."""
    if all(isinstance(m, str) for m in raw):
        lines = [m for m in raw if not m.startswith("#version")]
        out = []
        for rank, line in enumerate(lines):
            parts = line.split(" ")
            if len(parts) != 2:
                raise ValueError("bad merge %d: %r" % (rank + 1, line))
            out.append((parts[0], parts[1]))
        return out
    if all(isinstance(m, (list, tuple)) and len(m) == 2 for m in raw):
        return [(m[0], m[1]) for m in raw]
    raise ValueError("merges must be all strings or all [a, b] pairs")


class BPEModel:
    def __init__(self, spec):
        if spec.get("type", "BPE") != "BPE":
            raise ValueError("only BPE models are supported, got %r"
                             % spec.get("type"))
        if spec.get("dropout") not in (None, 0, 0.0):
            raise ValueError("BPE dropout is non-deterministic; unsupported")
        self.vocab = dict(spec["vocab"])
        self.vocab_r = {i: t for t, i in self.vocab.items()}
        self.unk_token = spec.get("unk_token")
        self.prefix = spec.get("continuing_subword_prefix")
        self.suffix = spec.get("end_of_word_suffix")
        self.fuse_unk = bool(spec.get("fuse_unk", False))
        self.byte_fallback = bool(spec.get("byte_fallback", False))
        self.ignore_merges = bool(spec.get("ignore_merges", False))
        self.merges = self._merge_map(parse_merges(spec["merges"]))

    def _id(self, token):
        if token not in self.vocab:
            raise ValueError("merge token %r is not in the vocab" % token)
        return self.vocab[token]

    def _merge_map(self, merges):
        """(id_a, id_b) -> (rank, new_id); later duplicates overwrite."""
        plen = len(self.prefix) if self.prefix else 0
        table = {}
        for rank, (a, b) in enumerate(merges):
            new_id = self._id(a + b[plen:])
            table[(self._id(a), self._id(b))] = (rank, new_id)
        return table

    def _symbol_text(self, ch, first, last):
        if not first and self.prefix:
            ch = self.prefix + ch
        if last and self.suffix:
            ch = ch + self.suffix
        return ch

    def _byte_fallback_ids(self, text):
        ids = [self.vocab.get("<0x%02X>" % b) for b in text.encode("utf-8")]
        return None if any(i is None for i in ids) else ids

    def initial_ids(self, seq):
        """merge_word's first loop: chars -> ids with unk / byte fallback."""
        ids, unk = [], None
        for k, ch in enumerate(seq):
            text = self._symbol_text(ch, k == 0, k == len(seq) - 1)
            if text in self.vocab:
                if unk is not None:
                    ids.append(unk)
                    unk = None
                ids.append(self.vocab[text])
                continue
            fallback = self._byte_fallback_ids(text) if self.byte_fallback \
                else None
            if fallback is not None:
                ids.extend(fallback)  # pending unk stays pending (as in Rust)
                continue
            if self.unk_token is not None:
                if self.unk_token not in self.vocab:
                    raise ValueError("unk_token %r not in vocab"
                                     % self.unk_token)
                if unk is not None and not self.fuse_unk:
                    ids.append(unk)
                unk = self.vocab[self.unk_token]
            # no unk_token: the character is dropped silently
        if unk is not None:
            ids.append(unk)
        return ids

    def merge_heap(self, ids):
        """word.rs merge_all: priority queue on (rank, position)."""
        c = list(ids)
        nxt = list(range(1, len(c))) + [-1]
        prv = list(range(-1, len(c) - 1))
        alive = [True] * len(c)
        heap = [(self.merges[(c[k], c[k + 1])][0], k,
                 self.merges[(c[k], c[k + 1])][1])
                for k in range(len(c) - 1) if (c[k], c[k + 1]) in self.merges]
        heapq.heapify(heap)
        while heap:
            _, pos, new_id = heapq.heappop(heap)
            if not alive[pos] or nxt[pos] == -1:
                continue
            right = nxt[pos]
            cur = self.merges.get((c[pos], c[right]))
            if cur is None or cur[1] != new_id:  # expired queue entry
                continue
            c[pos], alive[right], nxt[pos] = new_id, False, nxt[right]
            if nxt[pos] != -1:
                prv[nxt[pos]] = pos
            self._push_neighbours(heap, c, prv, nxt, pos)
        return [c[k] for k in range(len(c)) if alive[k]]

    def _push_neighbours(self, heap, c, prv, nxt, pos):
        if prv[pos] >= 0 and (c[prv[pos]], c[pos]) in self.merges:
            rank, new_id = self.merges[(c[prv[pos]], c[pos])]
            heapq.heappush(heap, (rank, prv[pos], new_id))
        if nxt[pos] != -1 and (c[pos], c[nxt[pos]]) in self.merges:
            rank, new_id = self.merges[(c[pos], c[nxt[pos]])]
            heapq.heappush(heap, (rank, pos, new_id))

    def merge_naive(self, ids):
        """Textbook BPE (lowest rank, leftmost first); used as a cross-check."""
        ids = list(ids)
        while True:
            best = None
            for k in range(len(ids) - 1):
                m = self.merges.get((ids[k], ids[k + 1]))
                if m is not None and (best is None or m[0] < best[0]):
                    best = (m[0], k, m[1])
            if best is None:
                return ids
            ids[best[1]:best[1] + 2] = [best[2]]

    def tokenize(self, seq):
        """BPE::tokenize for one pre-tokenized piece."""
        if not seq:
            return []
        if self.ignore_merges and seq in self.vocab:
            return [self.vocab[seq]]
        return self.merge_heap(self.initial_ids(seq))

# --------------------------------------------------------------------------
# Added vocabulary (tokenizer/added_vocabulary.rs)
# --------------------------------------------------------------------------


class AddedVocab:
    def __init__(self, tokens, model, normalizer):
        self.by_id, self.by_content, self.display = {}, {}, {}
        self.special = set()
        next_id = len(model.vocab)  # model.get_vocab_size()
        for tok in tokens:
            content = tok["content"]
            if not content:
                continue
            new_id = self.by_content.get(content, model.vocab.get(content))
            if new_id is None:
                new_id, next_id = next_id, next_id + 1
            if "id" in tok and tok["id"] != new_id:
                print("warning: added token %r has id %d in the file but "
                      "%d when loaded" % (content, tok["id"], new_id),
                      file=sys.stderr)
            self._store(tok, content, new_id, normalizer)
        self.raw_index = self._index(normalized=False)
        self.norm_index = self._index(normalized=True)

    def _store(self, tok, content, new_id, normalizer):
        info = {"content": content,
                "single_word": bool(tok.get("single_word", False)),
                "lstrip": bool(tok.get("lstrip", False)),
                "rstrip": bool(tok.get("rstrip", False)),
                "normalized": bool(tok.get("normalized", True)),
                "special": bool(tok.get("special", False))}
        pattern = content
        if info["normalized"] and normalizer is not None:
            pattern = normalizer(content)  # normalized_cache
        info["pattern"] = pattern
        self.by_id[new_id] = info
        self.by_content[content] = new_id
        self.display[new_id] = pattern
        if info["special"]:
            self.special.add(content)

    def _index(self, normalized):
        """first char -> [(pattern, id)] longest first (leftmost-longest)."""
        index = collections.defaultdict(list)
        for tid, info in self.by_id.items():
            if info["normalized"] == normalized:
                index[info["pattern"][0]].append((info["pattern"], tid))
        for lst in index.values():
            lst.sort(key=lambda pt: -len(pt[0]))
        return index

    @staticmethod
    def _longest_at(index, s, i):
        for pattern, tid in index.get(s[i], ()):
            if s.startswith(pattern, i):
                return pattern, tid
        return None

    def _raw_matches(self, index, s):
        """Non-overlapping leftmost-longest matches (Aho-Corasick order)."""
        i = 0
        while i < len(s):
            hit = self._longest_at(index, s, i)
            if hit is None:
                i += 1
                continue
            yield i, i + len(hit[0]), hit[1]
            i += len(hit[0])

    def _accept(self, info, s, start, stop):
        """single_word check, then lstrip / rstrip widening."""
        if info["single_word"]:
            words = is_word_set()
            if start > 0 and s[start - 1] in words:
                return None
            if stop < len(s) and s[stop] in words:
                return None
        ws = is_ws_set()
        if info["lstrip"]:
            while start > 0 and s[start - 1] in ws:
                start -= 1
        if info["rstrip"]:
            while stop < len(s) and s[stop] in ws:
                stop += 1
        return start, stop

    def find_matches(self, index, s):
        """added_vocabulary.rs find_matches -> [(piece, id or None)]."""
        out, offset = [], 0
        for start, stop, tid in self._raw_matches(index, s):
            span = self._accept(self.by_id[tid], s, start, stop)
            if span is None:
                continue
            start, stop = max(span[0], offset), span[1]
            if offset < start:
                out.append((s[offset:start], None))
            out.append((s[start:stop], tid))
            offset = stop
        if offset < len(s):
            out.append((s[offset:], None))
        return out

    def extract_and_normalize(self, text, normalizer):
        """Split raw tokens, normalize the rest, split normalized tokens."""
        pieces = self._split_all([(text, None)], self.raw_index)
        if normalizer is not None:
            pieces = [(normalizer(p) if t is None else p, t) for p, t in pieces]
        return self._split_all(pieces, self.norm_index)

    def _split_all(self, pieces, index):
        out = []
        for piece, tid in pieces:
            if tid is not None:
                out.append((piece, tid))
            else:
                out.extend(x for x in self.find_matches(index, piece) if x[0])
        return out

# --------------------------------------------------------------------------
# Post-processors (processors/{template,sequence,byte_level}.rs)
# --------------------------------------------------------------------------


def _template_processor(spec):
    single = spec["single"]  # JSON: a list of {"SpecialToken"|"Sequence": ..}
    specials = spec.get("special_tokens", {})
    for piece in single:
        if "SpecialToken" in piece and piece["SpecialToken"]["id"] not in specials:
            raise ValueError("template token %r missing from special_tokens"
                             % piece["SpecialToken"]["id"])

    def run(ids, add_special_tokens):
        out = []
        for piece in single:
            if "Sequence" in piece:
                out.extend(ids)  # only single sequences are encoded here
            elif add_special_tokens:
                out.extend(specials[piece["SpecialToken"]["id"]]["ids"])
        return out
    return run


def build_post_processor(spec):
    """JSON post_processor -> function (ids, add_special_tokens) -> ids."""
    if spec is None:
        return lambda ids, add: list(ids)
    kind = spec.get("type")
    if kind == "TemplateProcessing":
        return _template_processor(spec)
    if kind == "ByteLevel":  # only trims offsets; ids unchanged
        return lambda ids, add: list(ids)
    if kind == "Sequence":
        steps = [build_post_processor(p) for p in spec["processors"]]
        return lambda ids, add: functools.reduce(
            lambda acc, f: f(acc, add), steps, ids)
    raise ValueError("unsupported post_processor type %r" % kind)

# --------------------------------------------------------------------------
# Decoders (decoders/byte_level.rs, decoders/sequence.rs)
# --------------------------------------------------------------------------


def byte_level_decode_chain(tokens):
    """Token chars -> bytes (whole token as UTF-8 if any char is unmapped)."""
    buf = bytearray()
    for tok in tokens:
        if all(ch in CHAR_TO_BYTE for ch in tok):
            buf.extend(CHAR_TO_BYTE[ch] for ch in tok)
        else:
            buf.extend(tok.encode("utf-8"))
    return [buf.decode("utf-8", errors="replace")]


def run_decoder(spec, tokens):
    if spec is None:
        return [" ".join(tokens)]
    kind = spec.get("type")
    if kind == "ByteLevel":
        return byte_level_decode_chain(tokens)
    if kind == "Sequence":
        for sub in spec["decoders"]:
            tokens = run_decoder(sub, tokens)
        return tokens
    raise ValueError("unsupported decoder type %r" % kind)

# --------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------


def _token_text(value):
    """tokenizer_config token entry: a string, {"content": ...} or null."""
    if isinstance(value, dict):
        return value.get("content")
    return value


class Tokenizer:
    def __init__(self, tj, config=None):
        if tj.get("version", "1.0") != "1.0":
            raise ValueError("unknown tokenizer version %r" % tj["version"])
        self.normalizer = build_normalizer(tj.get("normalizer"))
        self.pre_tokenizer = build_pre_tokenizer(tj.get("pre_tokenizer"))
        self.model = BPEModel(tj["model"])
        self.added = AddedVocab(tj.get("added_tokens") or [], self.model,
                                self.normalizer)
        self.post = build_post_processor(tj.get("post_processor"))
        self.decoder = tj.get("decoder")
        if config:
            self._apply_config(config)

    @classmethod
    def from_dir(cls, path, use_config=True):
        with open(os.path.join(path, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        cfg_path = os.path.join(path, "tokenizer_config.json")
        config = None
        if use_config and os.path.exists(cfg_path):
            with open(cfg_path, encoding="utf-8") as f:
                config = json.load(f)
        return cls(tj, config)

    def _apply_config(self, cfg):
        """add_bos_token / add_eos_token rebuild the template (see top)."""
        if "add_bos_token" not in cfg and "add_eos_token" not in cfg:
            return
        ids = {}
        for which in ("bos", "eos"):
            want = bool(cfg.get("add_%s_token" % which, False))
            text = _token_text(cfg.get("%s_token" % which))
            if want and text is not None:
                tid = self.token_to_id(text)
                if tid is None:
                    raise ValueError("%s_token %r is not in the vocabulary"
                                     % (which, text))
                ids[which] = [tid]
        bos, eos = ids.get("bos", []), ids.get("eos", [])
        self.post = lambda seq, add: (bos + list(seq) + eos) if add \
            else list(seq)

    def token_to_id(self, token):
        if token in self.added.by_content:
            return self.added.by_content[token]
        return self.model.vocab.get(token)

    def id_to_token(self, tid):
        if tid in self.added.display:
            return self.added.display[tid]
        return self.model.vocab_r.get(tid)

    def pieces(self, text):
        """[(model-level piece or added-token text, added id or None)]."""
        if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            raise ValueError("lone surrogates cannot be encoded")
        out = []
        for piece, tid in self.added.extract_and_normalize(text,
                                                           self.normalizer):
            if tid is not None:
                out.append((piece, tid))
            else:
                out.extend((p, None) for p in self.pre_tokenizer([piece]))
        return out

    def encode(self, text, add_special_tokens=True):
        ids = []
        for piece, tid in self.pieces(text):
            ids.extend([tid] if tid is not None else self.model.tokenize(piece))
        return self.post(ids, add_special_tokens)

    def decode(self, ids, skip_special_tokens=False):
        tokens = []
        for tid in ids:
            tok = self.id_to_token(tid)
            if tok is None:
                continue
            if skip_special_tokens and tok in self.added.special:
                continue
            tokens.append(tok)
        return "".join(run_decoder(self.decoder, tokens))

# --------------------------------------------------------------------------
# Trainer and `make`
# --------------------------------------------------------------------------


BUILTIN_CORPUS = """\
The quick brown fox jumps over the lazy dog. The dog didn't care; it's lazy.
I'm sure you're right, and we've seen that they'll say she'd agree.
I'M SURE YOU'RE RIGHT, AND WE'VE SEEN THAT THEY'LL SAY SHE'D AGREE.
It's 2024-06-01 and the total is 1234567 (or 1,234,567.89) for 42 items.
Call 555-0100 at 09:30, room 101, floor 7; ZIP 90210; pi is 3.14159265.
    def encode(self, text):
        return [ord(c) for c in text]  # four spaces, then eight spaces

\tTabs\tand\ttrailing spaces   
Line one\nLine two\r\nLine three

Le cafe est tres bon, n'est-ce pas ? Oui, c'est l'ete a Paris.
Le café est très bon, n'est-ce pas ? Où est la bibliothèque ? À bientôt !
Der Fußgänger überquert die Straße. Größe, Übung, Äpfel und Öl.
El niño comió piñas en España; ¿qué tal? ¡Muy bien, señor!
Привет, мир! Как дела? Это тестовый текст на русском языке.
Καλημέρα κόσμε! Η γλώσσα είναι ελληνική. Ωμέγα και άλφα.
你好，世界！今天天气很好。我们一起学习中文吧。中文分词很有趣。
日本語のテキストです。ひらがなとカタカナと漢字。東京は大きい。
안녕하세요, 세계! 한국어 텍스트입니다. 서울은 아름답다.
مرحبا بالعالم! هذا نص عربي للاختبار.
नमस्ते दुनिया! यह हिंदी का पाठ है।
Emoji: 😀 😃 👍🏽 🇫🇷 👨‍👩‍👧 ❤️ 🎉🎉🎉 and more 😀😀.
Combining: e\u0301 a\u0308 n\u0303 vs é ä ñ; zero\u200bwidth; no\u00a0break.
The the the THE The. hello hello HELLO Hello world world WORLD World!!!
numbers 0 1 12 123 1234 12345 123456 1234567 12345678 0000 9999 100%
"quoted" 'single' (paren) [bracket] {brace} <angle> a+b=c; x*y/z; #tag @user
https://example.com/path?query=value&other=1 user@example.org
A tokenizer splits text into pieces, and the pieces are merged into tokens.
The merges are learned from the most frequent pairs of symbols in the text.
When the text is encoded, the merges are applied in the order they were learned.
Numbers such as 2023, 2024 and 2025 are split into groups before merging.
We're testing contractions: isn't, aren't, wasn't, weren't, I'd, you'll, they've.
WE'RE TESTING CONTRACTIONS: ISN'T, AREN'T, WASN'T, WEREN'T, I'D, YOU'LL, THEY'VE.
Les jetons sont appris à partir du texte ; les fusions sont appliquées dans l'ordre.
Die Tokenisierung teilt den Text in Stücke, und die Stücke werden zusammengeführt.
这是一个测试。这是另一个测试。测试文本包含中文字符。
Это ещё один тест. Это текст для проверки токенизатора.
"""


def _style_pre_tokenizer(style):
    """The pre_tokenizer JSON each family ships."""
    if style == "gpt2":
        return {"type": "ByteLevel", "add_prefix_space": False,
                "trim_offsets": True, "use_regex": True}
    pattern = LLAMA3_PATTERN if style == "llama3" else QWEN2_PATTERN
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False,
         "trim_offsets": style == "llama3", "use_regex": False}]}


def _pair_counts(words):
    counts = collections.Counter()
    where = collections.defaultdict(set)
    for idx, (syms, freq) in enumerate(words):
        for pair in zip(syms, syms[1:]):
            counts[pair] += freq
            where[pair].add(idx)
    return counts, where


def _apply_merge(syms, pair, new):
    out, k = [], 0
    while k < len(syms):
        if k + 1 < len(syms) and (syms[k], syms[k + 1]) == pair:
            out.append(new)
            k += 2
        else:
            out.append(syms[k])
            k += 1
    return out


def _update_word(words, counts, where, idx, pair, new):
    syms, freq = words[idx]
    for p in zip(syms, syms[1:]):
        counts[p] -= freq
    merged = _apply_merge(syms, pair, new)
    for p in zip(merged, merged[1:]):
        counts[p] += freq
        where[p].add(idx)
    words[idx] = (merged, freq)


def train_bpe(pieces, n_merges, min_frequency=2):
    """Greedy byte-level BPE: most frequent pair, ties by smallest pair."""
    words = [(list(w), c) for w, c in collections.Counter(pieces).items()]
    counts, where = _pair_counts(words)
    merges = []
    while len(merges) < n_merges:
        live = [(-c, p) for p, c in counts.items() if c >= min_frequency]
        if not live:
            break
        pair = min(live)[1]
        new = pair[0] + pair[1]
        merges.append(pair)
        for idx in sorted(where.pop(pair, ())):
            _update_word(words, counts, where, idx, pair, new)
        counts.pop(pair, None)
    return merges


def _specials(style):
    return {"llama3": ["<|begin_of_text|>", "<|end_of_text|>",
                       "<|reserved_special_token_0|>",
                       "<|reserved_special_token_1|>",
                       "<|reserved_special_token_2|>",
                       "<|reserved_special_token_3|>",
                       "<|start_header_id|>", "<|end_header_id|>",
                       "<|reserved_special_token_4|>", "<|eot_id|>"],
            "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            "gpt2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]}[style]


def _build_vocab(style, merges):
    """Ordered vocab: [specials (gpt2/SmolLM)] bytes, then merge results."""
    tokens = list(_specials(style)) if style == "gpt2" else []
    tokens += [c for _, c in BYTE_ORDER]
    seen = set(tokens)
    for a, b in merges:
        if a + b not in seen:
            seen.add(a + b)
            tokens.append(a + b)
    return {t: i for i, t in enumerate(tokens)}


def _added_token_entry(tid, content):
    return {"id": tid, "content": content, "single_word": False,
            "lstrip": False, "rstrip": False, "normalized": False,
            "special": True}


def _post_processor(style, bos_id):
    if style == "qwen2":
        return {"type": "ByteLevel", "add_prefix_space": False,
                "trim_offsets": False, "use_regex": False}
    byte_level = {"type": "ByteLevel", "add_prefix_space": True,
                  "trim_offsets": False, "use_regex": True}
    if style == "gpt2":
        return byte_level
    bos = "<|begin_of_text|>"
    template = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": bos, "type_id": 1}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }
    return {"type": "Sequence", "processors": [byte_level, template]}


def _model_json(style, vocab, merges, merges_format):
    merges_out = ([list(m) for m in merges] if merges_format == "pairs"
                  else ["%s %s" % m for m in merges])
    empty = "" if style == "qwen2" else None  # Qwen2 ships "" here
    return {"type": "BPE", "dropout": None, "unk_token": None,
            "continuing_subword_prefix": empty, "end_of_word_suffix": empty,
            "fuse_unk": False, "byte_fallback": False,
            "ignore_merges": style == "llama3",
            "vocab": vocab, "merges": merges_out}


def _decoder_json(style):
    flag = style != "qwen2"
    return {"type": "ByteLevel", "add_prefix_space": flag,
            "trim_offsets": flag, "use_regex": flag}


def _config_json(style, added):
    decoder = {str(e["id"]): {k: e[k] for k in e if k != "id"} for e in added}
    common = {"added_tokens_decoder": decoder,
              "clean_up_tokenization_spaces": style == "llama3"}
    if style == "llama3":
        common.update(bos_token="<|begin_of_text|>",
                      eos_token="<|end_of_text|>",
                      model_input_names=["input_ids", "attention_mask"],
                      model_max_length=131072,
                      tokenizer_class="PreTrainedTokenizerFast")
    elif style == "qwen2":
        common.update(add_prefix_space=False, bos_token=None,
                      eos_token="<|endoftext|>", errors="replace",
                      model_max_length=32768, pad_token="<|endoftext|>",
                      split_special_tokens=False,
                      tokenizer_class="Qwen2Tokenizer", unk_token=None)
    else:
        common.update(add_prefix_space=False, bos_token="<|endoftext|>",
                      eos_token="<|endoftext|>", model_max_length=2048,
                      tokenizer_class="GPT2Tokenizer",
                      unk_token="<|endoftext|>")
    return common


def build_tokenizer_files(style, corpus, vocab_size, merges_format="strings"):
    """Train and assemble (tokenizer.json dict, tokenizer_config.json dict)."""
    pre = build_pre_tokenizer(_style_pre_tokenizer(style))
    norm = build_normalizer({"type": "NFC"} if style == "qwen2" else None)
    # the whole text at once, so pieces such as "\n\n" are seen too
    pieces = pre([norm(corpus) if norm else corpus])
    base = 256 + (len(_specials(style)) if style == "gpt2" else 0)
    merges = train_bpe(pieces, max(0, vocab_size - base))
    vocab = _build_vocab(style, merges)
    if style == "gpt2":
        added = [_added_token_entry(vocab[s], s) for s in _specials(style)]
    else:
        added = [_added_token_entry(len(vocab) + k, s)
                 for k, s in enumerate(_specials(style))]
    bos_id = added[0]["id"]
    tj = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": added,
          "normalizer": {"type": "NFC"} if style == "qwen2" else None,
          "pre_tokenizer": _style_pre_tokenizer(style),
          "post_processor": _post_processor(style, bos_id),
          "decoder": _decoder_json(style),
          "model": _model_json(style, vocab, merges, merges_format)}
    return tj, _config_json(style, added)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)
        f.write("\n")


def make_dir(directory, style, vocab_size=1000, corpus=None,
             merges_format="strings"):
    os.makedirs(directory, exist_ok=True)
    tj, cfg = build_tokenizer_files(style, corpus or BUILTIN_CORPUS,
                                    vocab_size, merges_format)
    write_json(os.path.join(directory, "tokenizer.json"), tj)
    write_json(os.path.join(directory, "tokenizer_config.json"), cfg)
    return tj, cfg

# --------------------------------------------------------------------------
# Self test
# --------------------------------------------------------------------------


class Checker:
    def __init__(self):
        self.passed, self.failures = 0, []

    def eq(self, name, got, want):
        if got == want:
            self.passed += 1
        else:
            self.failures.append("%s: got %r, want %r" % (name, got, want))

    def true(self, name, cond, detail=""):
        self.eq(name + (" " + detail if detail else ""), bool(cond), True)

    def raises(self, name, exc_type, fn):
        try:
            fn()
        except exc_type:
            self.passed += 1
            return
        except Exception as exc:  # wrong exception type
            self.failures.append("%s: raised %r" % (name, exc))
            return
        self.failures.append("%s: did not raise %s" % (name, exc_type.__name__))


def _split_with(pattern, text):
    return regex_split(compile_pattern(pattern), text, "Isolated")


def check_byte_table(ck):
    ck.eq("byte table size", len(set(BYTE_TO_CHAR.values())), 256)
    ck.eq("byte '!' maps to itself", BYTE_TO_CHAR[ord("!")], "!")
    ck.eq("byte 0x20 -> U+0120", BYTE_TO_CHAR[0x20], "\u0120")   # 256+32
    ck.eq("byte 0x0A -> U+010A", BYTE_TO_CHAR[0x0A], "\u010a")   # 256+10
    ck.eq("byte 0x00 -> U+0100", BYTE_TO_CHAR[0x00], "\u0100")
    ck.eq("byte 0x7F -> U+0121", BYTE_TO_CHAR[0x7F], "\u0121")   # 256+33
    ck.eq("byte 0xAD -> U+0143", BYTE_TO_CHAR[0xAD], "\u0143")   # last one
    ck.eq("GPT-2 vocab order starts with '!'", BYTE_ORDER[0][1], "!")
    ck.eq("GPT-2 vocab id 188 is byte 0", BYTE_ORDER[188][0], 0)


def check_unicode_classes(ck):
    letters = RangeSet(property_ranges("L"))
    for ch in "Aé中ßΩж":
        ck.true("\\p{L} contains %r" % ch, ch in letters)
    for ch in "1_ \u0301!":
        ck.true("\\p{L} excludes %r" % ch, ch not in letters)
    ck.true("\\p{N} contains '٣'", "٣" in RangeSet(property_ranges("N")))
    ck.true("\\p{Lu} excludes 'a'", "a" not in RangeSet(property_ranges("Lu")))
    ws = is_ws_set()
    ck.true("\\s excludes U+001C", "\x1c" not in ws)
    ck.true("\\s contains U+0085 and U+3000", "\x85" in ws and "\u3000" in ws)
    ck.true("\\s excludes U+200B", "\u200b" not in ws)


def check_pattern_splits(ck):
    cases = [
        (LLAMA3_PATTERN, "Hello world", ["Hello", " world"]),
        (LLAMA3_PATTERN, "I'm 12345 OK", ["I", "'m", " ", "123", "45", " OK"]),
        (GPT2_PATTERN, "I'm 12345 OK", ["I", "'m", " 12345", " OK"]),
        (QWEN2_PATTERN, "I'm 2024", ["I", "'m", " ", "2", "0", "2", "4"]),
        (LLAMA3_PATTERN, "DON'T", ["DON", "'T"]),            # (?i:...)
        (GPT2_PATTERN, "DON'T", ["DON", "'", "T"]),          # case-sensitive
        (LLAMA3_PATTERN, "Hello\n\nworld", ["Hello", "\n\n", "world"]),
        (LLAMA3_PATTERN, "a  b", ["a", " ", " b"]),          # \s+(?!\S)
        (LLAMA3_PATTERN, "hi  ", ["hi", "  "]),
        (LLAMA3_PATTERN, "ok!!\n", ["ok", "!!\n"]),          # [\r\n]*
        (LLAMA3_PATTERN, "naïve café", ["naïve", " café"]),
        (LLAMA3_PATTERN, "e\u0301", ["e", "\u0301"]),        # Mn is not L
        (LLAMA3_PATTERN, "你好世界", ["你好世界"]),
        (LLAMA3_PATTERN, "1234567", ["123", "456", "7"]),
        (GPT2_PATTERN, "1234567", ["1234567"]),
        (GPT2_PATTERN, "\x1c!", ["\x1c!"]),                  # U+001C not \s
        (LLAMA3_PATTERN, "\tx", ["\tx"]),                    # [^\r\n..]?
        (LLAMA3_PATTERN, "a\r\n\r\nb", ["a", "\r\n\r\n", "b"]),
    ]
    for pattern, text, want in cases:
        ck.eq("split %r" % text, _split_with(pattern, text), want)
    ck.eq("(?i) long s", _split_with(LLAMA3_PATTERN, "x'\u017f"),
          ["x", "'\u017f"])


def check_pattern_errors(ck):
    for bad in [r"\p{Han}+", r"\bword", r"(a)\1", r"[[:alpha:]]",
                r"[a-z&&[^aeiou]]", r"a(?x) b", r"\p{Greek}", r"a{2}?",
                r"a{1,3}+", r"\p{Alpha}"]:
        ck.raises("reject %r" % bad, PatternError,
                  lambda b=bad: compile_pattern(b))
    ck.eq("named group ok", _split_with(r"(?<w>\p{L}+)", "ab cd"),
          ["ab", " ", "cd"])
    ck.eq("\\P{L} in class", _split_with(r"[\P{L}]+", "ab12cd"),
          ["ab", "12", "cd"])
    ck.eq("\\x{..} escape", _split_with(r"\x{4e2d}", "a中b"), ["a", "中", "b"])
    ck.eq("^ is a line anchor", _split_with(r"^x", "x\nx"),
          ["x", "\n", "x"])
    ck.eq("lazy interval", _split_with(r"a{1,3}?", "aaa"), ["a", "a", "a"])
    ck.eq("\\h class", _split_with(r"\h+", "beef!"), ["beef", "!"])
    ck.eq("unpaired brace literal", _split_with(r"x{", "ax{b"),
          ["a", "x{", "b"])
    ck.eq("\\w excludes ZWJ", _split_with(r"\w+", "a\u200db_1²"),
          ["a", "\u200d", "b_1", "²"])


def _tiny_json(merges_as_pairs=False, extra_added=(), ignore_merges=False):
    """Hand-written byte-level tokenizer with exactly 10 merges.

    vocab: h0 e1 l2 o3 Ġ4 w5 r6 d7 !8 | merges (rank: pair -> new id)
      r0 l l -> ll 9      r1 h e -> he 10      r2 he ll -> hell 11
      r3 hell o -> hello 12   r4 Ġ w -> Ġw 13   r5 o r -> or 14
      r6 Ġw or -> Ġwor 15  r7 Ġwor l -> Ġworl 16  r8 Ġworl d -> Ġworld 17
      r9 l o -> lo 18
    added: <|eot|> 19 (special), <s> 20 (special, BOS by template)
    """
    base = ["h", "e", "l", "o", "Ġ", "w", "r", "d", "!"]
    merges = [("l", "l"), ("h", "e"), ("he", "ll"), ("hell", "o"),
              ("Ġ", "w"), ("o", "r"), ("Ġw", "or"), ("Ġwor", "l"),
              ("Ġworl", "d"), ("l", "o")]
    vocab = {t: i for i, t in enumerate(base + [a + b for a, b in merges])}
    added = [_added_token_entry(19, "<|eot|>"), _added_token_entry(20, "<s>")]
    added += list(extra_added)
    return {
        "version": "1.0", "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                          "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [
                               {"SpecialToken": {"id": "<s>", "type_id": 0}},
                               {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [20],
                                                      "tokens": ["<s>"]}}},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "ignore_merges": ignore_merges,
                  "merges": ([list(m) for m in merges] if merges_as_pairs
                             else ["%s %s" % m for m in merges])},
    }


def _load_via_file(tj, config=None):
    with tempfile.TemporaryDirectory() as d:
        write_json(os.path.join(d, "tokenizer.json"), tj)
        if config is not None:
            write_json(os.path.join(d, "tokenizer_config.json"), config)
        return Tokenizer.from_dir(d)


def check_tiny_hand_computed(ck):
    tok = _load_via_file(_tiny_json())
    # "hello": h e l l o -(r0)-> h e ll o -(r1)-> he ll o -(r2)-> hell o
    #          -(r3)-> hello = 12.  " world" -> Ġworld via r4,r5,r6,r7,r8 = 17.
    ck.eq("tiny hello world!", tok.encode("hello world!"), [20, 12, 17, 8])
    ck.eq("tiny no specials", tok.encode("hello world!", False), [12, 17, 8])
    # l o l: only (l,o) r9 applies -> lo l
    ck.eq("tiny lol", tok.encode("lol", False), [18, 2])
    # l l o: (l,l) r0 beats (l,o) r9 -> ll o
    ck.eq("tiny llo (rank order)", tok.encode("llo", False), [9, 3])
    # l l l: two r0 candidates, leftmost wins -> ll l
    ck.eq("tiny lll (leftmost tie)", tok.encode("lll", False), [9, 2])
    ck.eq("tiny special inside", tok.encode("hello<|eot|>hello", False),
          [12, 19, 12])
    # " hello" is one GPT-2 piece "Ġhello": no (Ġ,h) merge -> Ġ hello
    ck.eq("tiny leading space", tok.encode(" hello", False), [4, 12])
    # "hello  world": pieces hello / " " / " world"
    ck.eq("tiny two spaces", tok.encode("hello  world", False), [12, 4, 17])
    # 'x' is not in the vocab, no unk_token: dropped; h e -> he 10
    ck.eq("tiny unknown dropped", tok.encode("hex", False), [10])
    ck.eq("tiny empty with BOS", tok.encode(""), [20])
    ck.eq("tiny decode", tok.decode([20, 12, 17, 8]), "<s>hello world!")
    ck.eq("tiny decode skip special", tok.decode([20, 12, 19], True), "hello")
    pairs = _load_via_file(_tiny_json(merges_as_pairs=True))
    ck.eq("tiny pairs == strings", pairs.encode("hello world! lol llo"),
          tok.encode("hello world! lol llo"))


def check_tiny_added_tokens(ck):
    extra = [
        dict(_added_token_entry(21, "[M]"), special=False, lstrip=True,
             rstrip=True),
        dict(_added_token_entry(22, "wor"), special=False, single_word=True),
        _added_token_entry(23, "<t>"), _added_token_entry(24, "<t><t>"),
    ]
    tok = _load_via_file(_tiny_json(extra_added=extra))
    # [M] swallows the spaces around it; "world" then has no Ġ:
    # w o r l d -(r5)-> w or l d = [5, 14, 2, 7]
    ck.eq("lstrip/rstrip", tok.encode("hello [M] world", False),
          [12, 21, 5, 14, 2, 7])
    ck.eq("single_word alone", tok.encode("wor", False), [22])
    ck.eq("single_word inside word", tok.encode("world", False), [5, 14, 2, 7])
    ck.eq("single_word between spaces", tok.encode(" wor ", False),
          [4, 22, 4])
    ck.eq("leftmost-longest", tok.encode("<t><t><t>", False), [24, 23])
    ck.eq("added ids", [tok.token_to_id(t) for t in ("[M]", "<t><t>")],
          [21, 24])


def _mini_json(vocab, merges, normalizer=None, added=(), **model_opts):
    model = {"type": "BPE", "vocab": vocab, "merges": merges}
    model.update(model_opts)
    return {"version": "1.0", "added_tokens": list(added),
            "normalizer": normalizer, "pre_tokenizer": None,
            "post_processor": None, "decoder": None, "model": model}


def check_model_options(ck):
    abc = {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5}
    merges = ["a b", "b c", "a bc"]
    # merges: (a,b) r0 first -> ab c, no (ab,c) merge -> [3, 2]
    ck.eq("ignore_merges off", Tokenizer(_mini_json(abc, merges)).encode("abc"),
          [3, 2])
    # ignore_merges: "abc" is in the vocab -> returned directly
    ck.eq("ignore_merges on", Tokenizer(_mini_json(
        abc, merges, ignore_merges=True)).encode("abc"), [5])
    bf = {"<unk>": 0, "<0x61>": 1, "b": 2}
    tok = Tokenizer(_mini_json(bf, [], unk_token="<unk>", byte_fallback=True))
    ck.eq("byte_fallback + unk", tok.encode("abc"), [1, 2, 0])
    ck.eq("unk not fused", tok.encode("cc"), [0, 0])
    fused = Tokenizer(_mini_json(bf, [], unk_token="<unk>", fuse_unk=True))
    ck.eq("unk fused", fused.encode("cc"), [0])
    eow = {"a": 0, "b</w>": 1, "ab</w>": 2, "b": 3}
    tok = Tokenizer(_mini_json(eow, [["a", "b</w>"]], end_of_word_suffix="</w>"))
    ck.eq("end_of_word_suffix", tok.encode("ab"), [2])
    csp = {"a": 0, "##b": 1, "##c": 2, "ab": 3, "abc": 4}
    tok = Tokenizer(_mini_json(csp, ["a ##b", "ab ##c"],
                               continuing_subword_prefix="##"))
    ck.eq("continuing_subword_prefix", tok.encode("abc"), [4])
    ck.raises("merge out of vocab", ValueError,
              lambda: Tokenizer(_mini_json({"a": 0}, ["a b"])))


def check_normalized_added_token(ck):
    vocab = {"e": 0, "x": 1}
    e_acute = dict(_added_token_entry(2, "\u00e9"), normalized=True,
                   special=False)
    nfc = Tokenizer(_mini_json(vocab, [], {"type": "NFC"}, [e_acute]))
    # "e" + U+0301 is NFC-normalized to U+00E9 and then matches the token
    ck.eq("normalized added token", nfc.encode("xe\u0301x"), [1, 2, 1])
    raw = Tokenizer(_mini_json(vocab, [], None, [e_acute]))
    # no normalizer: U+0301 is unknown (dropped), "e" stays
    ck.eq("no normalizer", raw.encode("xe\u0301x"), [1, 0, 1])


ROUND_TRIP = [
    "", " ", "  ", "\n", "\n\n\n", "\t", "\t\tindented", "a\r\nb",
    "Hello, world!", "I'm", "I'M", "you're", "YOU'RE", "we've", "WE'VE",
    "they'll", "THEY'LL", "she'd", "SHE'D", "it's", "IT'S", "don't", "Don'T",
    "1", "12", "123", "1234", "12345", "123456", "1234567", "3.14159",
    "1,000,000", "x=42;", "你好，世界", "日本語のテキスト", "한국어 텍스트",
    "😀👍🏽🇫🇷", "👨‍👩‍👧", "café naïve Ωμέγα", "e\u0301 a\u0308 n\u0303",
    "Straße", "Привет мир", "مرحبا", "नमस्ते", "   leading", "trailing   ",
    "mixed \t \n whitespace \r\n end", "\u00a0nbsp", "\x00\x01\x1c control",
    "zero\u200bwidth", "tabs\tand\nnewlines\n\n  indented",
    "    def f(x):\n        return x\n",
]


def _random_strings(count, seed=1234):
    pool = ("abcXYZ '’\"-.,!?0123456789 \t\n\r éüñßçÅΩжд中文日本한😀👍🏽🇫🇷"
            "\u0301\u0308\u200d\u00a0\x1c\x85\u3000'sS'tT'LL")
    rng = random.Random(seed)
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40)))
            for _ in range(count)]


def _round_trip_checks(ck, style, tok, strings):
    norm = tok.normalizer or (lambda s: s)
    bad = [s for s in strings if tok.decode(tok.encode(s, False)) != norm(s)]
    ck.eq("%s round trip (%d strings)" % (style, len(strings)), bad[:3], [])
    mismatch = [p for s in strings for p, t in tok.pieces(s) if t is None and
                tok.model.merge_naive(tok.model.initial_ids(p)) !=
                tok.model.merge_heap(tok.model.initial_ids(p))]
    ck.eq("%s heap merge == naive merge" % style, mismatch[:3], [])
    n_vocab = len(tok.model.vocab) + len(tok.added.by_id)
    out_of_range = [s for s in strings
                    if any(not 0 <= i < n_vocab for i in tok.encode(s))]
    ck.eq("%s ids in range" % style, out_of_range[:3], [])


def _digit_boundaries(tok, text):
    ids = tok.encode(text, False)
    pos, cuts = 0, []
    for i in ids:
        pos += len(tok.decode([i]))
        cuts.append(pos)
    return ids, cuts


def _style_specific_checks(ck, style, tok):
    ids, cuts = _digit_boundaries(tok, "1234567")
    if style == "llama3":
        ck.true("llama3 digits grouped by 3", {3, 6, 7} <= set(cuts),
                str(cuts))
    elif style == "qwen2":
        ck.eq("qwen2 digits single", cuts, [1, 2, 3, 4, 5, 6, 7])
        ck.eq("qwen2 NFC", tok.encode("e\u0301"), tok.encode("\u00e9"))
    else:
        ck.eq("gpt2 digits one piece", [p for p, _ in tok.pieces("1234567")],
              ["1234567"])
    if style == "llama3":
        ck.true("llama3 no NFC", tok.encode("e\u0301") != tok.encode("\u00e9"))


def _special_token_checks(ck, style, tok):
    for content in _specials(style):
        tid = tok.token_to_id(content)
        ck.eq("%s %s is one id" % (style, content),
              tok.encode(content, False), [tid])
        ck.eq("%s %s inside text" % (style, content),
              tok.encode("a" + content + "b", False),
              tok.encode("a", False) + [tid] + tok.encode("b", False))


def _bos_checks(ck, style, tok):
    body = tok.encode("Hello world", False)
    with_special = tok.encode("Hello world")
    if style == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        ck.eq("llama3 BOS from template", with_special, [bos] + body)
        ck.eq("llama3 empty string -> [BOS]", tok.encode(""), [bos])
    else:
        ck.eq("%s no BOS" % style, with_special, body)


def _config_bos_checks(ck, style, tj, cfg):
    body = Tokenizer(tj).encode("Hi there", False)
    if style == "llama3":
        bos = Tokenizer(tj).token_to_id("<|begin_of_text|>")
        eos = Tokenizer(tj).token_to_id("<|end_of_text|>")
        off = Tokenizer(tj, dict(cfg, add_bos_token=False))
        ck.eq("llama3 add_bos_token=false", off.encode("Hi there"), body)
        both = Tokenizer(tj, dict(cfg, add_bos_token=True, add_eos_token=True))
        ck.eq("llama3 add_bos+add_eos", both.encode("Hi there"),
              [bos] + body + [eos])
    elif style == "qwen2":
        on_null = Tokenizer(tj, dict(cfg, add_bos_token=True))
        ck.eq("qwen2 add_bos_token with bos null", on_null.encode("Hi there"),
              body)
        eot = Tokenizer(tj).token_to_id("<|endoftext|>")
        on = Tokenizer(tj, dict(cfg, add_bos_token=True,
                                bos_token="<|endoftext|>"))
        ck.eq("qwen2 add_bos_token with bos set", on.encode("Hi there"),
              [eot] + body)


def check_trained_style(ck, style, workdir):
    d = os.path.join(workdir, style)
    tj, cfg = make_dir(d, style, vocab_size=700)
    tok = Tokenizer.from_dir(d)
    model = tok.model
    ck.true("%s learned merges" % style, len(model.merges) > 100,
            str(len(model.merges)))
    ck.true("%s all bytes in vocab" % style,
            all(c in model.vocab for _, c in BYTE_ORDER))
    ck.eq("%s vocab ids contiguous" % style, sorted(model.vocab.values()),
          list(range(len(model.vocab))))
    _round_trip_checks(ck, style, tok, ROUND_TRIP + _random_strings(150))
    corpus_ids = tok.encode(BUILTIN_CORPUS, False)
    ck.eq("%s corpus round trip" % style, tok.decode(corpus_ids),
          tok.normalizer(BUILTIN_CORPUS) if tok.normalizer else BUILTIN_CORPUS)
    ck.true("%s compresses corpus" % style,
            len(corpus_ids) < 0.6 * len(BUILTIN_CORPUS.encode("utf-8")))
    _style_specific_checks(ck, style, tok)
    _special_token_checks(ck, style, tok)
    _bos_checks(ck, style, tok)
    _config_bos_checks(ck, style, tj, cfg)
    other = build_tokenizer_files(style, BUILTIN_CORPUS, 700, "pairs")[0]
    ck.eq("%s pairs format same ids" % style,
          Tokenizer(other, cfg).encode(BUILTIN_CORPUS), tok.encode(BUILTIN_CORPUS))


def check_cli(ck, workdir):
    d = os.path.join(workdir, "cli")
    script = os.path.abspath(__file__)
    subprocess.run([sys.executable, script, "make", d, "--style", "llama3",
                    "--vocab-size", "400"], check=True, capture_output=True)
    lines = ["Hello world", "a<|eot_id|>b", "1234567"]
    stdin = "".join(json.dumps(s) + "\n" for s in lines)
    res = subprocess.run([sys.executable, script, "encode", d], input=stdin,
                         capture_output=True, text=True, check=True)
    got = [json.loads(line) for line in res.stdout.splitlines()]
    tok = Tokenizer.from_dir(d)
    ck.eq("CLI encode", got, [tok.encode(s) for s in lines])
    res = subprocess.run([sys.executable, script, "decode", d],
                         input=res.stdout, capture_output=True, text=True,
                         check=True)
    ck.eq("CLI decode", [json.loads(x) for x in res.stdout.splitlines()],
          ["<|begin_of_text|>" + s for s in lines])


def selftest():
    ck = Checker()
    check_byte_table(ck)
    check_unicode_classes(ck)
    check_pattern_splits(ck)
    check_pattern_errors(ck)
    check_tiny_hand_computed(ck)
    check_tiny_added_tokens(ck)
    check_model_options(ck)
    check_normalized_added_token(ck)
    with tempfile.TemporaryDirectory() as workdir:
        for style in ("llama3", "qwen2", "gpt2"):
            check_trained_style(ck, style, workdir)
        check_cli(ck, workdir)
    for failure in ck.failures:
        print("FAIL", failure)
    if ck.failures:
        print("selftest: %d checks passed, %d FAILED"
              % (ck.passed, len(ck.failures)))
        return 1
    print("selftest: %d checks passed" % ck.passed)
    return 0

# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def _json_lines(stream):
    for line in stream:
        if line.strip():
            yield json.loads(line)


def cmd_make(args):
    corpus = None
    if args.corpus:
        with open(args.corpus, encoding="utf-8") as f:
            corpus = f.read()
    tj, _ = make_dir(args.dir, args.style, args.vocab_size, corpus,
                     args.merges_format)
    n_vocab = len(tj["model"]["vocab"])
    print("wrote %s: %d vocab, %d merges, %d added tokens%s"
          % (args.dir, n_vocab, len(tj["model"]["merges"]),
             len(tj["added_tokens"]),
             " (corpus has no more pairs seen twice)"
             if n_vocab < args.vocab_size else ""), file=sys.stderr)
    return 0


def cmd_encode(args):
    tok = Tokenizer.from_dir(args.dir, use_config=not args.ignore_config)
    for text in _json_lines(sys.stdin):
        if not isinstance(text, str):
            raise SystemExit("encode expects JSON strings, got %r" % (text,))
        print(json.dumps(tok.encode(text, not args.no_special_tokens)))
    return 0


def cmd_decode(args):
    tok = Tokenizer.from_dir(args.dir)
    for ids in _json_lines(sys.stdin):
        print(json.dumps(tok.decode(ids, args.skip_special_tokens),
                         ensure_ascii=False))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make", help="train and write a tokenizer directory")
    p.add_argument("dir")
    p.add_argument("--style", choices=["llama3", "qwen2", "gpt2"],
                   required=True)
    p.add_argument("--vocab-size", type=int, default=1000,
                   help="model vocab size (bytes + merges [+ gpt2 specials])")
    p.add_argument("--corpus", help="UTF-8 training text")
    p.add_argument("--merges-format", choices=["strings", "pairs"],
                   default="strings")
    p.set_defaults(fn=cmd_make)
    p = sub.add_parser("encode", help="JSON strings on stdin -> id lists")
    p.add_argument("dir")
    p.add_argument("--no-special-tokens", action="store_true")
    p.add_argument("--ignore-config", action="store_true")
    p.set_defaults(fn=cmd_encode)
    p = sub.add_parser("decode", help="id lists on stdin -> JSON strings")
    p.add_argument("dir")
    p.add_argument("--skip-special-tokens", action="store_true")
    p.set_defaults(fn=cmd_decode)
    p = sub.add_parser("selftest", help="run the built-in checks")
    p.set_defaults(fn=lambda a: selftest())
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
