#!/usr/bin/python3
"""Independent, standard-library-only reference encoder for Hugging Face
``tokenizer.json`` files: byte-level BPE as shipped by Llama 3, Qwen2 and
SmolLM/GPT-2, and SentencePiece-style BPE with byte fallback as shipped by
Llama 2, TinyLlama, Mistral and Gemma.  It exists to cross-check another
implementation, so every behaviour below was written from the
huggingface/tokenizers Rust sources (models/bpe/{model,word,serialization}.rs,
pre_tokenizers/{split,byte_level,metaspace,sequence}.rs,
normalizers/{unicode,utils,prepend,replace}.rs,
decoders/{byte_level,byte_fallback,fuse,strip,sequence}.rs,
tokenizer/{added_vocabulary,normalizer,pattern,pre_tokenizer,mod}.rs,
processors/{template,sequence}.rs) and transformers' fast-tokenizer loader and
convert_slow_tokenizer.LlamaConverter, not from any other port.

Usage
  hf_tokenizer.py make DIR --style llama3|qwen2|gpt2|llama2|mistral
                  [--vocab-size N] [--corpus FILE]
                  [--merges-format strings|pairs] [--metaspace-decoder]
      Train a small BPE on a corpus (default: built-in multilingual text) and
      write DIR/tokenizer.json + DIR/tokenizer_config.json in that model
      family's real layout.  llama3/qwen2/gpt2: byte-level BPE (default vocab
      1000).  llama2/mistral: SentencePiece-style BPE (default vocab 400):
      <unk>=0 <s>=1 </s>=2, <0x00>..<0xFF> = 3..258, merge results, then the
      corpus's most frequent characters (control characters and rare ones are
      left to byte fallback); BPE byte_fallback + fuse_unk, unk "<unk>",
      TemplateProcessing "<s> $A", config add_bos_token true / add_eos_token
      false / tokenizer_class LlamaTokenizer.
        llama2 = the legacy layout (Llama 2, TinyLlama, Mistral v0.1):
          normalizer Sequence[Prepend "▁", Replace " " -> "▁"], no
          pre-tokenizer;
        mistral = the non-legacy layout (what LlamaConverter writes with
          legacy=false, as newer Mistral files have): no normalizer,
          pre-tokenizer Metaspace(▁, prepend_scheme "first", split false).
        Both get the decoder LlamaConverter writes, Sequence[Replace ▁ -> " ",
        ByteFallback, Fuse, Strip(" ", 1, 0)]; --metaspace-decoder (mistral
        only) writes decoder Metaspace(▁, "first", split false) instead, which
        leaves byte-fallback tokens as "<0xC3>" text.
  hf_tokenizer.py encode DIR [--no-special-tokens] [--ignore-config]
      stdin: one JSON string per line (empty lines skipped);
      stdout: one JSON list of ids per line.
  hf_tokenizer.py decode DIR [--skip-special-tokens]
      stdin: one JSON list of ids per line; stdout: one JSON string per line.
  hf_tokenizer.py selftest
      Prints "selftest: N checks passed"; exits 1 on any failure.

Pipeline (tokenizers' TokenizerImpl::encode_single_sequence + post_process):
  1. added tokens are split out (non-normalized ones on the raw text, then the
     normalizer runs on each remaining piece separately, then normalized ones),
     each by a leftmost-longest scan honouring single_word / lstrip / rstrip;
  2. the pre-tokenizer splits each remaining piece; empty pieces are dropped;
  3. the BPE model turns each piece into ids (ignore_merges, merges by rank,
     byte_fallback, unk_token / fuse_unk, continuing_subword_prefix,
     end_of_word_suffix);
  4. the post-processor adds special tokens when add_special_tokens is true.
  decode: ids -> token strings (added tokens by their normalized form, as
  simple_id_to_token; specials dropped with --skip-special-tokens), then the
  decoder's decode_chain, joined with "".

Supported pieces (anything else is refused with ValueError, never guessed):
  normalizer   NFC NFD NFKC NFKD Lowercase Prepend Replace Sequence null.
               Replace: {"String": s} literal; {"Regex": r} through the
               pattern translator below (PatternError for unsupported syntax,
               and at encode time if the regex matches the empty string);
               an empty String pattern is refused.
  pre_tokenizer Split ByteLevel Metaspace Sequence null.
  model        BPE (dropout null/0).
  post_processor TemplateProcessing (single) ByteLevel Sequence null.
  decoder      ByteLevel Metaspace Replace ByteFallback Fuse Strip Sequence;
               null joins the tokens with " " (Tokenizer::decode).
  Not supported (refused): normalizers Precompiled Strip StripAccents
  BertNormalizer Nmt ByteLevel; pre-tokenizers Whitespace WhitespaceSplit
  Punctuation Digits BertPreTokenizer UnicodeScripts CharDelimiterSplit
  FixedLength; models WordPiece WordLevel Unigram; decoders WordPiece
  BPEDecoder CTC; post-processors BertProcessing RobertaProcessing.

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

SentencePiece-style files (all from the Rust sources named; see the code)
  * Metaspace (pre_tokenizers/metaspace.rs pre_tokenize): only U+0020 becomes
    the replacement (tabs/newlines stay); the replacement is prepended only
    when the piece does not already start with it, so " Hey" and "Hey" both
    give "▁Hey" (whereas the legacy Prepend normalizer gives "▁▁Hey");
    "always" prepends to EVERY piece left after added tokens are split out,
    "first" only to a piece whose normalized.offsets_original().0 == 0, i.e.
    the piece that begins the input: text after an added token -- also after
    one at the very start, "<s>Hello" -- gets no "▁"; split=true cuts before
    every "▁" (MergedWithNext: "▁Hey▁▁▁you" -> ▁Hey ▁ ▁ ▁you).  The
    offset-0 test is tracked through slices (see "z" in the pre-tokenizer
    section); after a normalizer, the first characters normalizer(text[0])
    yields count as offset 0 (exact for Prepend, single-char Replace,
    NFC/NFD/NFKC/NFKD and Lowercase; a multi-character Replace match at the
    start would align to its last character in tokenizers -- not modelled).
  * Metaspace JSON as metaspace.rs's Deserialize: `replacement` is required
    (no default); prepend_scheme defaults to "always"; add_prefix_space=true
    changes nothing; add_prefix_space=false is accepted only with
    prepend_scheme "never" (tokenizers >= 0.19 refuses {"add_prefix_space":
    false} alone, so do we); split defaults to true.
  * Legacy Llama 2 normalizer Sequence[Prepend ▁, Replace " " -> ▁] runs on
    each piece between added tokens, so every such piece starts with ▁
    ("a<s>b" -> ▁a <s> ▁b) and leading spaces are kept (" a" -> ▁▁a); Prepend
    leaves an empty string empty.
  * Decoders: Metaspace turns the replacement into ' ' except in the FIRST
    token passed to it (a special token included), where every replacement is
    dropped unless prepend_scheme is "never"; ByteFallback decodes each run of
    <0xXX> tokens as UTF-8 and, if invalid, yields one U+FFFD PER BYTE TOKEN
    (a token is a byte token iff it is 6 bytes "<0x..>" and u8::from_str_radix
    accepts the middle, so "<0x+A>" is byte 10); Strip removes up to start /
    stop copies of its char from each token (after Fuse: once from the text);
    cases where strip.rs would panic raise ValueError.  So decode(encode(s))
    is s for the llama2 layout, but loses one leading space with mistral's
    ("  x" -> " x": no ▁ was prepended, Strip still removes one), and with
    specials kept "<s>" stops Strip ("<s> Hello").
  * transformers v5 (as of the sources read) instantiates tokenizer_class
    LlamaTokenizer as a class whose __init__ rebuilds normalizer /
    pre-tokenizer / decoder itself (Metaspace with prepend_scheme from
    legacy / add_prefix_space, the Sequence decoder), and its
    convert_to_native_format then takes only vocab and merges from
    tokenizer.json, so for a legacy file it can encode differently.  That is NOT modelled: this file follows
    tokenizer.json as tokenizers' Tokenizer::from_file, PreTrainedTokenizerFast
    and v4 LlamaTokenizerFast do; the config's legacy / add_prefix_space keys
    are ignored.
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
# Normalizers (normalizers/{unicode,utils,prepend,replace}.rs)
# --------------------------------------------------------------------------


def replace_function(spec, where="Replace"):
    """normalizers/replace.rs Replace (also the Replace decoder): every
    leftmost non-overlapping match of the pattern becomes `content`.

    {"String": s} is matched literally (Replace::new escapes it); {"Regex": r}
    goes through translate_pattern (PatternError on unsupported syntax).  A
    pattern that matches the empty string is refused: onig's and Python's
    iteration over empty matches differ, and no shipped file has one."""
    pattern, content = spec.get("pattern"), spec.get("content")
    if not isinstance(pattern, dict) or not isinstance(content, str):
        raise ValueError("%s needs pattern {String|Regex} and content: %r"
                         % (where, spec))
    if "String" in pattern:
        literal = pattern["String"]
        if not literal:
            raise ValueError("%s with an empty String pattern is not "
                             "supported (it matches between every char)"
                             % where)
        return lambda s: s.replace(literal, content)
    if "Regex" not in pattern:
        raise ValueError("%s pattern must be String or Regex: %r"
                         % (where, pattern))
    regex = compile_pattern(pattern["Regex"])

    def run(s):
        out, prev = [], 0
        for m in regex.finditer(s):
            if m.start() == m.end():
                raise PatternError("%s regex %r matched the empty string; "
                                   "unsupported" % (where, pattern["Regex"]))
            out.append(s[prev:m.start()])
            out.append(content)
            prev = m.end()
        out.append(s[prev:])
        return "".join(out)
    return run


def _prepend_normalizer(spec):
    """normalizers/prepend.rs: prepend unless the string is empty."""
    text = spec["prepend"]
    return lambda s: text + s if s else s


def build_normalizer(spec):
    """JSON normalizer -> function str -> str (None means identity)."""
    if spec is None:
        return None
    kind = spec.get("type")
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return functools.partial(unicodedata.normalize, kind)
    if kind == "Lowercase":
        return str.lower  # Rust to_lowercase == Unicode full lowercase
    if kind == "Prepend":
        return _prepend_normalizer(spec)
    if kind == "Replace":
        return replace_function(spec)
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


def regex_spans(regex, s, behavior, invert=False):
    """Kept, non-empty (start, end) char spans of a regex split."""
    matches = find_matches(regex, s)
    if invert:  # pattern.rs Invert flips the is_match flags
        matches = [(a, b, not m) for a, b, m in matches]
    return [(a, b) for a, b, removed in split_by_behavior(matches, behavior)
            if not removed and b > a]


def regex_split(regex, s, behavior, invert=False):
    return [s[a:b] for a, b in regex_spans(regex, s, behavior, invert)]


# Pieces travel through the pre-tokenizers as (text, z) pairs.  z counts the
# leading characters of text whose NormalizedString alignment points at
# original offset 0 (tokenizers' normalizer.rs slice() sets original_shift
# from the first character's alignment).  So offsets_original().0 == 0 --
# what Metaspace's prepend_scheme "first" tests -- holds exactly when z > 0,
# and a sub-slice starting at character a has z' = max(0, z - a).  Prepended
# characters share the first character's alignment (NormalizedString::
# prepend), so prepending n characters to a piece with z > 0 adds n.


def _slice_spans(text, z, spans):
    """PreTokenizedString::split: slices of one piece, empty ones dropped."""
    return [(text[a:b], max(0, z - a)) for a, b in spans if b > a]


def _split_pretokenizer(spec):
    pattern = spec["pattern"]
    if "Regex" in pattern:
        regex = compile_pattern(pattern["Regex"])
    else:  # SplitPattern::String is matched literally (regex::escape)
        regex = re.compile(re.escape(pattern["String"]))
    behavior, invert = spec["behavior"], bool(spec.get("invert", False))
    return lambda pieces: [
        p for s, z in pieces
        for p in _slice_spans(s, z, regex_spans(regex, s, behavior, invert))]


def _byte_level_pretokenizer(spec):
    add_prefix = spec.get("add_prefix_space", True)
    use_regex = spec.get("use_regex", True)
    regex = compile_pattern(GPT2_PATTERN) if use_regex else None

    def run(pieces):
        out = []
        for s, z in pieces:
            if add_prefix and not s.startswith(" "):
                s = " " + s  # applied per split, as byte_level.rs does
                z = z + 1 if z else 0
            spans = (regex_spans(regex, s, "Isolated") if use_regex
                     else [(0, len(s))])
            for part, zp in _slice_spans(s, z, spans):
                # each character becomes its bytes, all aligned to it
                out.append((byte_level_map(part),
                            len(byte_level_map(part[:zp]))))
        return out
    return run


PREPEND_SCHEMES = ("always", "first", "never")


def metaspace_settings(spec):
    """Metaspace JSON -> (replacement, prepend_scheme, split), checked as
    pre_tokenizers/metaspace.rs's Deserialize does: `replacement` is required
    (a missing one is serde's "missing field `replacement`"); prepend_scheme
    defaults to "always"; the legacy add_prefix_space=true changes nothing,
    add_prefix_space=false requires prepend_scheme "never" (so a legacy
    {"add_prefix_space": false} without prepend_scheme is refused, exactly as
    tokenizers >= 0.19 refuses it); split defaults to true."""
    if "replacement" not in spec:
        raise ValueError("Metaspace without `replacement` (tokenizers: "
                         "missing field `replacement`)")
    rep = spec["replacement"]
    if not isinstance(rep, str) or len(rep) != 1:
        raise ValueError("Metaspace replacement must be one character: %r"
                         % (rep,))
    scheme = spec.get("prepend_scheme", "always")
    if scheme not in PREPEND_SCHEMES:
        raise ValueError("unknown Metaspace prepend_scheme %r" % (scheme,))
    if spec.get("add_prefix_space") is False and scheme != "never":
        raise ValueError("Metaspace add_prefix_space=false does not match "
                         "prepend_scheme %r (tokenizers refuses this file; an "
                         "absent prepend_scheme means \"always\")" % scheme)
    split = spec.get("split")
    return rep, scheme, True if split is None else bool(split)


def _char_matches(ch, s):
    """pattern.rs `impl Pattern for Fn(char) -> bool`: each occurrence of ch
    is its own match; the gaps between are non-matches."""
    out, last = [], 0
    for i, c in enumerate(s):
        if c == ch:
            if last < i:
                out.append((last, i, False))
            out.append((i, i + 1, True))
            last = i + 1
    if last < len(s):
        out.append((last, len(s), False))
    return out


def _metaspace_pretokenizer(spec):
    """pre_tokenizers/metaspace.rs PreTokenizer::pre_tokenize, per piece:
      1. every ' ' (U+0020 only; tabs and newlines stay) becomes the
         replacement;
      2. the replacement is prepended when the piece does not already start
         with it, and the scheme is "always", or "first" and the piece starts
         at original offset 0 (normalized.offsets_original().0 == 0, i.e.
         z > 0 here).  Added tokens are split out before the pre-tokenizer
         runs, so with "first" the text after an added token -- even one at
         the very start, as in "<s>Hello" -- gets no prefix;
      3. with split=true the piece is cut so that every replacement starts a
         new piece (split(replacement, MergedWithNext)): "▁Hey▁▁▁you" ->
         "▁Hey", "▁", "▁", "▁you".
    Because of step 2's starts_with test, " Hey" and "Hey" both become
    "▁Hey" (no double prefix), unlike the legacy Prepend normalizer."""
    rep, scheme, split = metaspace_settings(spec)

    def run(pieces):
        out = []
        for s, z in pieces:
            s = s.replace(" ", rep)
            if not s.startswith(rep) and (
                    scheme == "always" or (scheme == "first" and z > 0)):
                s = rep + s
                z = z + 1 if z else 0
            if split:
                spans = [(a, b) for a, b, _ in
                         split_by_behavior(_char_matches(rep, s),
                                           "MergedWithNext")]
            else:
                spans = [(0, len(s))]
            out.extend(_slice_spans(s, z, spans))
        return out
    return run


def build_pre_tokenizer(spec):
    """JSON pre_tokenizer -> function [(text, z)] -> [(text, z)]."""
    if spec is None:
        return lambda pieces: [p for p in pieces if p[0]]
    kind = spec.get("type")
    if kind == "Split":
        return _split_pretokenizer(spec)
    if kind == "ByteLevel":
        return _byte_level_pretokenizer(spec)
    if kind == "Metaspace":
        return _metaspace_pretokenizer(spec)
    if kind == "Sequence":
        steps = [build_pre_tokenizer(p) for p in spec["pretokenizers"]]
        return lambda pieces: functools.reduce(lambda acc, f: f(acc),
                                               steps, pieces)
    raise ValueError("unsupported pre_tokenizer type %r" % kind)


def pre_tokenize_text(pre_tokenizer, text):
    """The pieces of a whole text (z = 1: its first char is offset 0)."""
    return [p for p, _ in pre_tokenizer([(text, 1 if text else 0)])]

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

    def find_spans(self, index, s):
        """added_vocabulary.rs find_matches -> contiguous [(start, stop, id
        or None)] covering s."""
        out, offset = [], 0
        for start, stop, tid in self._raw_matches(index, s):
            span = self._accept(self.by_id[tid], s, start, stop)
            if span is None:
                continue
            start, stop = max(span[0], offset), span[1]
            if offset < start:
                out.append((offset, start, None))
            out.append((start, stop, tid))
            offset = stop
        if offset < len(s):
            out.append((offset, len(s), None))
        return out

    def extract_and_normalize(self, text, normalizer):
        """Split raw tokens, normalize the rest, split normalized tokens.

        -> [(piece, id or None, z)], empty pieces dropped; z (see the
        pre-tokenizer section) is > 0 only for the piece that starts at
        original offset 0.  After a normalizer the first z characters are
        taken to be those normalizer(text[0]) produces (plus what it
        prepends), which is tokenizers' alignment for the supported
        normalizers except a multi-character Replace match at the very start
        (its content aligns to the match's last character)."""
        out = []
        for a, b, tid in self.find_spans(self.raw_index, text):
            piece = text[a:b]
            if not piece:
                continue
            if tid is not None:
                out.append((piece, tid, 0))
                continue
            z = 1 if a == 0 else 0
            if normalizer is not None:
                z = len(normalizer(piece[:1])) if z else 0
                piece = normalizer(piece)
            for c, d, tid2 in self.find_spans(self.norm_index, piece):
                if d > c:
                    out.append((piece[c:d], tid2, max(0, z - c)))
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
# Decoders (decoders/{byte_level,byte_fallback,fuse,strip,sequence}.rs,
# the Replace and Metaspace decoders of normalizers/replace.rs and
# pre_tokenizers/metaspace.rs).  Each is decode_chain: list[str] -> list[str];
# Tokenizer.decode joins the final list with "".
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


_HEX = frozenset(b"0123456789abcdefABCDEF")


def byte_token_value(token):
    """decoders/byte_fallback.rs: a token of exactly 6 bytes "<0x..>" whose
    two middle bytes parse with u8::from_str_radix(.., 16) (which also takes
    a leading '+') -> the byte; anything else -> None."""
    raw = token.encode("utf-8")
    if len(raw) != 6 or not raw.startswith(b"<0x") or not raw.endswith(b">"):
        return None
    digits = raw[3:5]
    if digits[:1] == b"+":
        digits = digits[1:]
    if not all(c in _HEX for c in digits):
        return None
    return int(digits, 16)


def byte_fallback_decode_chain(tokens):
    """Runs of byte tokens become their UTF-8 text; a run that is not valid
    UTF-8 becomes one U+FFFD per byte token (not Python's per-sequence
    replacement)."""
    out, run = [], bytearray()

    def flush():
        if run:
            try:
                out.append(run.decode("utf-8"))
            except UnicodeDecodeError:
                out.extend("\ufffd" * len(run))
            run.clear()
    for tok in tokens:
        value = byte_token_value(tok)
        if value is not None:
            run.append(value)
            continue
        flush()
        out.append(tok)
    flush()
    return out


def _strip_decoder(spec):
    """decoders/strip.rs: per token, drop up to `start` leading and `stop`
    trailing `content` characters.  Where the Rust code would panic (stop > 0
    on an empty token, or the two cuts crossing) we raise."""
    content = spec["content"]
    start, stop = int(spec["start"]), int(spec["stop"])
    if not isinstance(content, str) or len(content) != 1:
        raise ValueError("Strip content must be one character: %r"
                         % (content,))

    def strip(tok):
        start_cut = 0
        for i, c in enumerate(tok[:start]):
            if c != content:
                break
            start_cut = i + 1
        stop_cut = len(tok)
        for i in range(stop):
            index = len(tok) - i - 1
            if index < 0:
                raise ValueError("Strip decoder: tokenizers panics on %r"
                                 % tok)
            if tok[index] != content:
                break
            stop_cut = index
        if start_cut > stop_cut:
            raise ValueError("Strip decoder: tokenizers panics on %r" % tok)
        return tok[start_cut:stop_cut]
    return lambda tokens: [strip(t) for t in tokens]


def _metaspace_decoder(spec):
    """pre_tokenizers/metaspace.rs Decoder::decode_chain: the replacement
    becomes ' ', except that in the FIRST token (whatever it is, a special
    token included) every replacement is dropped when prepend_scheme is not
    "never" -- so a first token "▁▁" decodes to "", not " ".  Byte-fallback
    tokens are left as they are ("<0xC3>")."""
    rep, scheme, _ = metaspace_settings(spec)

    def run(tokens):
        return [t.replace(rep, "" if i == 0 and scheme != "never" else " ")
                for i, t in enumerate(tokens)]
    return run


def build_decoder(spec):
    """JSON decoder -> decode_chain function (None: tokens joined by ' ')."""
    if spec is None:
        return lambda tokens: [" ".join(tokens)]
    kind = spec.get("type")
    if kind == "ByteLevel":
        return byte_level_decode_chain
    if kind == "ByteFallback":
        return byte_fallback_decode_chain
    if kind == "Fuse":
        return lambda tokens: ["".join(tokens)]
    if kind == "Strip":
        return _strip_decoder(spec)
    if kind == "Replace":
        fn = replace_function(spec, "Replace decoder")
        return lambda tokens: [fn(t) for t in tokens]
    if kind == "Metaspace":
        return _metaspace_decoder(spec)
    if kind == "Sequence":
        steps = [build_decoder(d) for d in spec["decoders"]]
        return lambda tokens: functools.reduce(lambda acc, f: f(acc),
                                               steps, tokens)
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
        self._decode_chain = None  # built on first decode()
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
        for piece, tid, z in self.added.extract_and_normalize(
                text, self.normalizer):
            if tid is not None:
                out.append((piece, tid))
            else:
                out.extend((p, None)
                           for p, _ in self.pre_tokenizer([(piece, z)]))
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
        if self._decode_chain is None:
            self._decode_chain = build_decoder(self.decoder)
        return "".join(self._decode_chain(tokens))

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
    template = bos_template("<|begin_of_text|>", bos_id)
    return {"type": "Sequence", "processors": [byte_level, template]}


def bos_template(bos, bos_id):
    """TemplateProcessing "<bos> $A" / "<bos> $A <bos>:1 $B:1" (Llama)."""
    return {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": bos, "type_id": 1}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }


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


def build_tokenizer_files(style, corpus, vocab_size=None,
                          merges_format="strings", metaspace_decoder=False):
    """Train and assemble (tokenizer.json dict, tokenizer_config.json dict)."""
    if vocab_size is None:
        vocab_size = DEFAULT_VOCAB_SIZE[style]
    if style in SPM_STYLES:
        return build_spm_files(style, corpus, vocab_size, merges_format,
                               metaspace_decoder)
    if metaspace_decoder:
        raise ValueError("--metaspace-decoder is only for --style mistral")
    pre = build_pre_tokenizer(_style_pre_tokenizer(style))
    norm = build_normalizer({"type": "NFC"} if style == "qwen2" else None)
    # the whole text at once, so pieces such as "\n\n" are seen too
    pieces = pre_tokenize_text(pre, norm(corpus) if norm else corpus)
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

# --- SentencePiece-style BPE (Llama 2 / TinyLlama legacy layout, Mistral) ---


BYTE_STYLES = ("llama3", "qwen2", "gpt2")
SPM_STYLES = ("llama2", "mistral")
DEFAULT_VOCAB_SIZE = {"llama3": 1000, "qwen2": 1000, "gpt2": 1000,
                      "llama2": 400, "mistral": 400}
SPIECE = "\u2581"  # ▁
SPM_SPECIALS = ["<unk>", "<s>", "</s>"]
# transformers' VERY_LARGE_INTEGER as Llama 2's and Mistral's configs spell it
SPM_MAX_LENGTH = 1000000000000000019884624838656


def spm_training_words(corpus):
    """Corpus -> SentencePiece-style words.  Per line: ' ' -> ▁ and a ▁ in
    front (the dummy prefix); a word is an optional ▁ plus non-▁ text, and a
    run of n > 1 ▁ before a word leaves a whitespace-only word of n - 1 ▁
    (sentencepiece's allow_whitespace_only_pieces: Llama 2's vocab has ▁▁,
    ▁▁▁▁ ... for indentation)."""
    words = []
    for line in corpus.split("\n"):
        if line:
            text = SPIECE + line.replace(" ", SPIECE)
            words += re.findall(
                "%s+(?=%s[^%s])|%s?[^%s]+|%s+" % ((SPIECE,) * 6), text)
    return words


def train_spm_bpe(corpus, vocab_size):
    """-> (vocab, merges) of a small Llama-2-like BPE.

    Alphabet: the corpus's most frequent non-control characters seen at
    least twice, at most half of the room left after <unk> <s> </s> and the
    256 byte tokens; control characters (\\t \\n \\r ...) and rarer
    characters are left to byte fallback, as Llama 2 leaves \\n to <0x0A>.
    Merges: train_bpe on the words cut at characters outside the alphabet, so
    no merge involves a byte-fallback character.  Vocab order as Llama 2's:
    <unk> <s> </s>, <0x00>..<0xFF>, merge results in merge order, then the
    single characters by decreasing frequency."""
    room = vocab_size - len(SPM_SPECIALS) - 256
    if room < 2:
        raise ValueError("--vocab-size must be at least %d for %s styles"
                         % (len(SPM_SPECIALS) + 258, "/".join(SPM_STYLES)))
    words = spm_training_words(corpus)
    counts = collections.Counter(ch for w in words for ch in w
                                 if unicodedata.category(ch) != "Cc")
    ranked = sorted((c for c in counts if counts[c] >= 2),
                    key=lambda c: (-counts[c], c))
    alphabet = ranked[:room // 2]
    if SPIECE not in alphabet:
        alphabet = [SPIECE] + alphabet[:room // 2 - 1]
    keep = set(alphabet)
    segments = []
    for word in words:
        seg = []
        for ch in word + "\0":  # "\0" (a control char) ends the last one
            if ch in keep:
                seg.append(ch)
            elif seg:
                segments.append("".join(seg))
                seg = []
    merges = train_bpe(segments, room - len(alphabet))
    tokens = SPM_SPECIALS + ["<0x%02X>" % b for b in range(256)]
    reserved, seen = set(tokens) | keep, set()
    for a, b in merges:
        if a + b in reserved:
            raise ValueError("merge result %r collides with a special or "
                             "byte token; use another corpus" % (a + b))
        if a + b not in seen:
            seen.add(a + b)
            tokens.append(a + b)
    tokens += alphabet
    return {t: i for i, t in enumerate(tokens)}, merges


def _spm_decoder_json():
    """transformers' LlamaConverter.decoder (add_prefix_space=True), written
    for both the legacy and the non-legacy layout."""
    return {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": SPIECE}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def _spm_layout(style, metaspace_decoder):
    """(normalizer, pre_tokenizer, decoder) of LlamaConverter's legacy
    (llama2) and non-legacy (mistral) output."""
    if style == "llama2":
        if metaspace_decoder:
            raise ValueError("--metaspace-decoder is only for --style mistral")
        normalizer = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPIECE},
            {"type": "Replace", "pattern": {"String": " "},
             "content": SPIECE}]}
        return normalizer, None, _spm_decoder_json()
    metaspace = {"type": "Metaspace", "replacement": SPIECE,
                 "prepend_scheme": "first", "split": False}
    return (None, metaspace,
            dict(metaspace) if metaspace_decoder else _spm_decoder_json())


def _spm_config_json(style, added):
    if style == "llama2":  # Llama-2-7b-hf / TinyLlama: AddedToken dicts
        def tok(content):
            return {"__type": "AddedToken", "content": content,
                    "lstrip": False, "normalized": False, "rstrip": False,
                    "single_word": False}
        return {"add_bos_token": True, "add_eos_token": False,
                "bos_token": tok("<s>"), "clean_up_tokenization_spaces": False,
                "eos_token": tok("</s>"), "legacy": False,
                "model_max_length": SPM_MAX_LENGTH, "pad_token": None,
                "padding_side": "right", "sp_model_kwargs": {},
                "tokenizer_class": "LlamaTokenizer", "unk_token": tok("<unk>")}
    decoder = {str(e["id"]): {k: e[k] for k in e if k != "id"} for e in added}
    return {"add_bos_token": True, "add_eos_token": False,
            "added_tokens_decoder": decoder, "bos_token": "<s>",
            "clean_up_tokenization_spaces": False, "eos_token": "</s>",
            "legacy": False, "model_max_length": SPM_MAX_LENGTH,
            "pad_token": None, "sp_model_kwargs": {},
            "spaces_between_special_tokens": False,
            "tokenizer_class": "LlamaTokenizer", "unk_token": "<unk>",
            "use_default_system_prompt": False}


def build_spm_files(style, corpus, vocab_size, merges_format="strings",
                    metaspace_decoder=False):
    vocab, merges = train_spm_bpe(corpus, vocab_size)
    normalizer, pre_tokenizer, decoder = _spm_layout(style, metaspace_decoder)
    added = [_added_token_entry(vocab[t], t) for t in SPM_SPECIALS]
    merges_out = ([list(m) for m in merges] if merges_format == "pairs"
                  else ["%s %s" % m for m in merges])
    tj = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": added, "normalizer": normalizer,
          "pre_tokenizer": pre_tokenizer,
          "post_processor": bos_template("<s>", vocab["<s>"]),
          "decoder": decoder,
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                    "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": True,
                    "byte_fallback": True, "ignore_merges": False,
                    "vocab": vocab, "merges": merges_out}}
    return tj, _spm_config_json(style, added)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)
        f.write("\n")


def make_dir(directory, style, vocab_size=None, corpus=None,
             merges_format="strings", metaspace_decoder=False):
    os.makedirs(directory, exist_ok=True)
    tj, cfg = build_tokenizer_files(style, corpus or BUILTIN_CORPUS,
                                    vocab_size, merges_format,
                                    metaspace_decoder)
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


# --- SentencePiece-style pieces (Metaspace, Prepend/Replace, byte fallback) --

# Hand-written SentencePiece-style BPE used by the checks below:
#   0 <unk> 1 <s> 2 </s> | bytes 3 <0xC3> 4 <0xA9> 5 <0xF0> 6 <0x9F> 7 <0x98>
#   8 <0x80> | 9 ▁ 10 H 11 e 12 y 13 a | merges (rank: pair -> id)
#   r0 ▁ ▁ -> ▁▁ 14   r1 ▁ H -> ▁H 15   r2 ▁H e -> ▁He 16   r3 ▁He y -> ▁Hey 17
#   r4 ▁ a -> ▁a 18
_SPM_BASE = ["<unk>", "<s>", "</s>", "<0xC3>", "<0xA9>", "<0xF0>", "<0x9F>",
             "<0x98>", "<0x80>", "\u2581", "H", "e", "y", "a"]
_SPM_MERGES = [("\u2581", "\u2581"), ("\u2581", "H"), ("\u2581H", "e"),
               ("\u2581He", "y"), ("\u2581", "a")]
LEGACY_NORMALIZER = {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "\u2581"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}


def _metaspace(scheme=None, split=None, **extra):
    spec = {"type": "Metaspace", "replacement": "\u2581"}
    if scheme is not None:
        spec["prepend_scheme"] = scheme
    if split is not None:
        spec["split"] = split
    spec.update(extra)
    return spec


def _spm_json(pre_tokenizer=None, normalizer=None, decoder=None,
              fuse_unk=True, added=None):
    vocab = {t: i for i, t in enumerate(
        _SPM_BASE + [a + b for a, b in _SPM_MERGES])}
    if added is None:
        added = [_added_token_entry(i, t) for i, t in enumerate(_SPM_BASE[:3])]
    return {"version": "1.0", "added_tokens": added, "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer, "post_processor": None,
            "decoder": decoder,
            "model": {"type": "BPE", "vocab": vocab, "unk_token": "<unk>",
                      "fuse_unk": fuse_unk, "byte_fallback": True,
                      "merges": ["%s %s" % m for m in _SPM_MERGES]}}


def _piece_texts(tok, text):
    return [p for p, _ in tok.pieces(text)]


def check_metaspace(ck):
    always = Tokenizer(_spm_json(_metaspace("always", True)))
    # metaspace.rs tests basic / multiple_spaces
    ck.eq("metaspace always split", _piece_texts(always, "Hey   friend!"),
          ["\u2581Hey", "\u2581", "\u2581", "\u2581friend!"])
    ck.eq("always: Hey  a", always.encode("Hey  a"), [17, 9, 18])
    # " Hey" -> "▁Hey" already starts with ▁: no second prefix
    ck.eq("always: leading space", always.encode(" Hey"), [17])
    ck.eq("always: after special", always.encode("Hey<s>Hey"), [17, 1, 17])
    ck.eq("always: special first", always.encode("<s>Hey"), [1, 17])
    ck.eq("always: empty", always.encode(""), [])
    ck.eq("always: tab is not a space", _piece_texts(always, "\tHey"),
          ["\u2581\tHey"])
    # byte fallback: é = C3 A9, 😀 = F0 9F 98 80 (models/bpe/model.rs)
    ck.eq("byte fallback é", always.encode("\u00e9"), [9, 3, 4])
    ck.eq("byte fallback emoji", always.encode("\U0001F600"), [9, 5, 6, 7, 8])
    # 'x' has no byte token here (<0x78>) -> <unk>, fused (fuse_unk)
    ck.eq("unk fused", always.encode("xx"), [9, 0])
    unfused = Tokenizer(_spm_json(_metaspace("always", True), fuse_unk=False))
    ck.eq("unk not fused", unfused.encode("xx"), [9, 0, 0])
    ck.eq("unk then bytes", always.encode("x\u00e9x"), [9, 3, 4, 0])

    first = Tokenizer(_spm_json(_metaspace("first", False)))
    # one piece "▁Hey▁▁a": r0 (▁,▁) first -> ▁Hey ▁▁ a
    ck.eq("first no split: Hey  a", first.encode("Hey  a"), [17, 14, 13])
    ck.eq("first: leading space", first.encode(" Hey"), [17])
    # the piece after an added token does not start at original offset 0
    ck.eq("first: after special", first.encode("Hey<s>Hey"),
          [17, 1, 10, 11, 12])
    ck.eq("first: special first", first.encode("<s>Hey"), [1, 10, 11, 12])
    # metaspace.rs test non_legacy_meta_space (First, split=false)
    for text, want in [
            ("Hey my friend <s>how\u2581are you",
             ["\u2581Hey\u2581my\u2581friend\u2581", "<s>",
              "how\u2581are\u2581you"]),
            (" Hey <s>how", ["\u2581Hey\u2581", "<s>", "how"]),
            (" Hey <s>how <s>are <s> you",
             ["\u2581Hey\u2581", "<s>", "how\u2581", "<s>", "are\u2581",
              "<s>", "\u2581you"])]:
        ck.eq("first pieces %r" % text, _piece_texts(first, text), want)
    first_split = Tokenizer(_spm_json(_metaspace("first", True)))
    ck.eq("first split pieces", _piece_texts(first_split, "Hey a<s>b c"),
          ["\u2581Hey", "\u2581a", "<s>", "b", "\u2581c"])

    never = Tokenizer(_spm_json(_metaspace("never", True)))
    ck.eq("never split", _piece_texts(never, "Hey a"), ["Hey", "\u2581a"])
    ck.eq("never ids", never.encode("Hey a"), [10, 11, 12, 18])
    never_whole = Tokenizer(_spm_json(_metaspace("never", False)))
    ck.eq("never no split", _piece_texts(never_whole, "Hey a"),
          ["Hey\u2581a"])

    # Deserialize rules of metaspace.rs
    legacy_true = Tokenizer(_spm_json(_metaspace(add_prefix_space=True)))
    ck.eq("add_prefix_space true = always, split",
          _piece_texts(legacy_true, "Hey a"), ["\u2581Hey", "\u2581a"])
    legacy_false = Tokenizer(_spm_json(_metaspace("never",
                                                  add_prefix_space=False)))
    ck.eq("add_prefix_space false + never", _piece_texts(legacy_false, "Hey"),
          ["Hey"])
    ck.raises("add_prefix_space false alone", ValueError, lambda: Tokenizer(
        _spm_json(_metaspace(add_prefix_space=False))))
    ck.raises("missing replacement", ValueError, lambda: Tokenizer(
        _spm_json({"type": "Metaspace", "prepend_scheme": "always"})))
    ck.raises("bad prepend_scheme", ValueError, lambda: Tokenizer(
        _spm_json(_metaspace("sometimes"))))
    under = Tokenizer(_spm_json(dict(_metaspace("always"), replacement="_")))
    ck.eq("custom replacement", _piece_texts(under, "a b\u2581c"),
          ["_a", "_b\u2581c"])
    # Sequence[Split, Metaspace first]: only the slice at offset 0 is "first"
    seq = Tokenizer(_spm_json({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": "-"},
         "behavior": "Isolated"}, _metaspace("first", False)]}))
    ck.eq("split then first", _piece_texts(seq, "a-b"),
          ["\u2581a", "-", "b"])


def check_first_after_normalized_token(ck):
    """A normalized added token at the start: the rest starts at original
    offset 0 only if it still comes from the first original character
    (normalizer.rs alignments; NFD gives both "e" and U+0301 of "é" the
    alignment of "é")."""
    e_tok = dict(_added_token_entry(11, "e"), normalized=True)
    added = [_added_token_entry(i, t) for i, t in enumerate(_SPM_BASE[:3])]
    nfd = Tokenizer(_spm_json(_metaspace("first", False), {"type": "NFD"},
                              added=added + [e_tok]))
    ck.eq("first: rest of the first char", _piece_texts(nfd, "\u00e9a"),
          ["e", "\u2581\u0301a"])
    plain = Tokenizer(_spm_json(_metaspace("first", False), None,
                                added=added + [e_tok]))
    ck.eq("first: next char", _piece_texts(plain, "ea"), ["e", "a"])


def check_legacy_normalizer(ck):
    legacy = Tokenizer(_spm_json(None, LEGACY_NORMALIZER))
    # Prepend + Replace on the whole piece, no pre-tokenizer: "▁▁Hey"
    # -> r0 (▁,▁) before r1 (▁,H) -> ▁▁ H e y
    ck.eq("legacy leading space", legacy.encode(" Hey"), [14, 10, 11, 12])
    ck.eq("legacy Hey a", legacy.encode("Hey a"), [17, 18])
    ck.eq("legacy one piece", _piece_texts(legacy, "Hey  a"),
          ["\u2581Hey\u2581\u2581a"])
    ck.eq("legacy Hey  a", legacy.encode("Hey  a"), [17, 14, 13])
    # every non-added piece gets the prefix (Prepend runs per piece)
    ck.eq("legacy after special", legacy.encode("Hey<s>Hey"), [17, 1, 17])
    ck.eq("legacy empty", legacy.encode(""), [])
    ck.eq("legacy byte fallback", legacy.encode("a\u00e9"), [18, 3, 4])
    regex = build_normalizer({"type": "Replace", "pattern": {"Regex": " {2,}"},
                              "content": "\u2581"})
    ck.eq("Replace regex", regex("a   b c  d"), "a\u2581b c\u2581d")
    ck.eq("Replace string", build_normalizer({
        "type": "Replace", "pattern": {"String": "ab"}, "content": "X"})(
            "aabab"), "aXX")
    ck.raises("Replace empty string", ValueError, lambda: build_normalizer(
        {"type": "Replace", "pattern": {"String": ""}, "content": "x"}))
    ck.raises("Replace unsupported regex", PatternError,
              lambda: build_normalizer({"type": "Replace", "pattern": {
                  "Regex": r"\bx"}, "content": "y"}))
    empty = build_normalizer({"type": "Replace", "pattern": {"Regex": "x*"},
                              "content": "y"})
    ck.raises("Replace regex matching empty", PatternError,
              lambda: empty("abc"))
    ck.raises("unsupported normalizer", ValueError,
              lambda: build_normalizer({"type": "Precompiled"}))
    # Gemma's layout (GemmaConverter): Replace only, Split(" ") that never
    # matches after it, decoder without Strip
    gemma = Tokenizer(_spm_json(
        {"type": "Split", "pattern": {"String": " "},
         "behavior": "MergedWithPrevious", "invert": False},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        {"type": "Sequence", "decoders": SPM_DECODER["decoders"][:3]}))
    ck.eq("gemma layout", gemma.encode("Hey a"), [10, 11, 12, 18])
    ck.eq("gemma leading space", gemma.encode(" Hey"), [17])
    ck.eq("gemma decode", gemma.decode([17, 18]), " Hey a")


SPM_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def check_spm_decoders(ck):
    bf = byte_fallback_decode_chain
    # decoders/byte_fallback.rs tests
    bad = "\ufffd"
    for tokens, want in [(["Hey", "friend!"], ["Hey", "friend!"]),
                         (["<0x61>"], ["a"]), (["<0xE5>"], [bad]),
                         (["<0xE5>", "<0x8f>"], [bad, bad]),
                         (["<0xE5>", "<0x8f>", "<0xab>"], ["\u53eb"]),
                         (["<0xE5>", "<0x8f>", "<0xab>", "a"], ["\u53eb", "a"]),
                         (["<0xE5>", "<0x8f>", "a"], [bad, bad, "a"])]:
        ck.eq("ByteFallback %r" % tokens, bf(tokens), want)
    forms = ("<0x41>", "<0x+A>", "<0xG1>", "<0x4>", "<0x041>", "<0x\u00e9>")
    ck.eq("byte token forms", [byte_token_value(t) for t in forms],
          [0x41, 10, None, None, None, None])
    # decoders/strip.rs tests
    ck.eq("Strip H 1 0", build_decoder({"type": "Strip", "content": "H",
                                        "start": 1, "stop": 0})(
        ["Hey", " friend!", "HHH"]), ["ey", " friend!", "HH"])
    ck.eq("Strip y 0 1", build_decoder({"type": "Strip", "content": "y",
                                        "start": 0, "stop": 1})(
        ["Hey", " friend!"]), ["He", " friend!"])
    # metaspace.rs test decode, plus: every ▁ of the first token is dropped
    ms = build_decoder(_metaspace("always"))
    ck.eq("Metaspace decoder", ms(["\u2581Hey", "\u2581friend!"]),
          ["Hey", " friend!"])
    ck.eq("Metaspace decoder never", build_decoder(_metaspace("never"))(
        ["\u2581Hey", "\u2581friend!"]), [" Hey", " friend!"])
    ck.eq("Metaspace decoder first token",
          ms(["\u2581\u2581a", "\u2581\u2581"]), ["a", "  "])
    ck.eq("Metaspace decoder after special", ms(["<s>", "\u2581Hey"]),
          ["<s>", " Hey"])
    tok = Tokenizer(_spm_json(None, LEGACY_NORMALIZER, SPM_DECODER))
    ck.eq("decode sequence", tok.decode([17, 3, 4, 9, 18]),
          "Hey\u00e9  a")
    ck.eq("decode keeps special", tok.decode([1, 17, 18]), "<s> Hey a")
    ck.eq("decode skip special", tok.decode([1, 17, 18], True), "Hey a")
    ck.eq("decode bad bytes", tok.decode([18, 3, 13]), "a\ufffda")
    ck.eq("decode truncated emoji", tok.decode([5, 6]), "\ufffd\ufffd")
    ck.eq("decode no decoder", Tokenizer(_spm_json()).decode([17, 18]),
          "\u2581Hey \u2581a")
    ck.raises("unsupported decoder", ValueError,
              lambda: build_decoder({"type": "WordPiece"}))


def _spm_expected_round_trip(style, text):
    """decode(encode(text)) for the trained styles: llama2's Prepend always
    adds the ▁ that Strip removes; mistral's Metaspace adds none when the
    text already starts with a space, so Strip eats that space."""
    if style == "mistral" and text.startswith(" "):
        return text[1:]
    return text


def check_trained_spm_style(ck, style, workdir):
    d = os.path.join(workdir, style)
    tj, cfg = make_dir(d, style)
    tok = Tokenizer.from_dir(d)
    vocab = tok.model.vocab
    ck.eq("%s vocab size" % style, len(vocab), 400)
    ck.eq("%s specials and bytes first" % style,
          [t for t, i in sorted(vocab.items(), key=lambda x: x[1])][:259],
          SPM_SPECIALS + ["<0x%02X>" % b for b in range(256)])
    ck.eq("%s vocab ids contiguous" % style, sorted(vocab.values()),
          list(range(len(vocab))))
    ck.true("%s learned merges" % style, len(tok.model.merges) > 50,
            str(len(tok.model.merges)))
    strings = ROUND_TRIP + _random_strings(150)
    bad = [s for s in strings if tok.decode(tok.encode(s, False))
           != _spm_expected_round_trip(style, s)]
    ck.eq("%s round trip (%d strings)" % (style, len(strings)), bad[:3], [])
    bad = [s for s in strings if tok.decode(tok.encode(s), True)
           != _spm_expected_round_trip(style, s)]
    ck.eq("%s round trip skipping <s>" % style, bad[:3], [])
    n_fallback = sum(1 for s in strings for i in tok.encode(s, False)
                     if 3 <= i < 259)
    ck.true("%s byte fallback used" % style, n_fallback > 100,
            str(n_fallback))
    mismatch = [p for s in strings for p, t in tok.pieces(s) if t is None and
                tok.model.merge_naive(tok.model.initial_ids(p)) !=
                tok.model.merge_heap(tok.model.initial_ids(p))]
    ck.eq("%s heap merge == naive merge" % style, mismatch[:3], [])
    ck.eq("%s corpus round trip" % style,
          tok.decode(tok.encode(BUILTIN_CORPUS, False)), BUILTIN_CORPUS)
    ck.eq("%s BOS" % style, tok.encode("Hello")[0], 1)
    ck.eq("%s template == config" % style, Tokenizer(tj).encode("a b"),
          tok.encode("a b"))
    ck.eq("%s empty" % style, tok.encode(""), [1])
    after = "<s> a</s> b" if style == "llama2" else "<s> a</s>b"
    ck.eq("%s text after a special" % style,
          tok.decode(tok.encode("a</s>b")), after)
    ck.eq("%s </s> inside" % style, tok.encode("a</s>", False)[-1], 2)
    ck.eq("%s leading spaces" % style, tok.decode(tok.encode("   x", False)),
          "   x" if style == "llama2" else "  x")
    ck.eq("%s config" % style, (cfg["tokenizer_class"], cfg["add_bos_token"],
                                cfg["add_eos_token"], cfg["legacy"]),
          ("LlamaTokenizer", True, False, False))
    other = build_tokenizer_files(style, BUILTIN_CORPUS, 400, "pairs")[0]
    ck.eq("%s pairs format same ids" % style,
          Tokenizer(other, cfg).encode(BUILTIN_CORPUS),
          tok.encode(BUILTIN_CORPUS))


def check_metaspace_decoder_style(ck):
    tj, cfg = build_tokenizer_files("mistral", BUILTIN_CORPUS, 400,
                                    metaspace_decoder=True)
    tok = Tokenizer(tj, cfg)
    ck.eq("metaspace decoder style", tj["decoder"]["type"], "Metaspace")
    ck.eq("metaspace decoder round trip", tok.decode(tok.encode(
        "the text is in the", False)), "the text is in the")
    ck.true("metaspace decoder keeps byte tokens", "<0xE4>" in tok.decode(
        tok.encode("a \u4e2d", False)))
    ck.raises("metaspace decoder only for mistral", ValueError,
              lambda: build_tokenizer_files("llama2", BUILTIN_CORPUS, 400,
                                            metaspace_decoder=True))


def check_cli_spm(ck, workdir):
    d = os.path.join(workdir, "cli_mistral")
    script = os.path.abspath(__file__)
    subprocess.run([sys.executable, script, "make", d, "--style", "mistral"],
                   check=True, capture_output=True)
    lines = ["Hello world", " a</s>b", "caf\u00e9 \U0001F600"]
    stdin = "".join(json.dumps(s) + "\n" for s in lines)
    res = subprocess.run([sys.executable, script, "encode", d], input=stdin,
                         capture_output=True, text=True, check=True)
    got = [json.loads(line) for line in res.stdout.splitlines()]
    tok = Tokenizer.from_dir(d)
    ck.eq("CLI mistral encode", got, [tok.encode(s) for s in lines])
    res = subprocess.run([sys.executable, script, "decode", d,
                          "--skip-special-tokens"], input=res.stdout,
                         capture_output=True, text=True, check=True)
    ck.eq("CLI mistral decode",
          [json.loads(x) for x in res.stdout.splitlines()],
          ["Hello world", "ab", "caf\u00e9 \U0001F600"])


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
    check_metaspace(ck)
    check_first_after_normalized_token(ck)
    check_legacy_normalizer(ck)
    check_spm_decoders(ck)
    check_metaspace_decoder_style(ck)
    with tempfile.TemporaryDirectory() as workdir:
        for style in BYTE_STYLES:
            check_trained_style(ck, style, workdir)
        for style in SPM_STYLES:
            check_trained_spm_style(ck, style, workdir)
        check_cli(ck, workdir)
        check_cli_spm(ck, workdir)
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
    vocab_size = args.vocab_size or DEFAULT_VOCAB_SIZE[args.style]
    tj, _ = make_dir(args.dir, args.style, vocab_size, corpus,
                     args.merges_format, args.metaspace_decoder)
    n_vocab = len(tj["model"]["vocab"])
    print("wrote %s: %d vocab, %d merges, %d added tokens%s"
          % (args.dir, n_vocab, len(tj["model"]["merges"]),
             len(tj["added_tokens"]),
             " (corpus has no more pairs seen twice)"
             if n_vocab < vocab_size else ""), file=sys.stderr)
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
    p.add_argument("--style", choices=list(BYTE_STYLES + SPM_STYLES),
                   required=True)
    p.add_argument("--vocab-size", type=int, default=None,
                   help="model vocab size: bytes + merges [+ gpt2 specials] "
                   "(default 1000); llama2/mistral: <unk> <s> </s> + 256 "
                   "byte tokens + merges + characters (default 400)")
    p.add_argument("--corpus", help="UTF-8 training text")
    p.add_argument("--merges-format", choices=["strings", "pairs"],
                   default="strings")
    p.add_argument("--metaspace-decoder", action="store_true",
                   help="mistral only: decoder Metaspace(first, split false) "
                   "instead of the shipped Replace/ByteFallback/Fuse/Strip "
                   "(byte-fallback tokens then decode as \"<0xC3>\" text)")
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
