#!/usr/bin/python3
"""Independent reference of lm-evaluation-harness's log-likelihood / multiple-choice scoring, for cross-checking
fwlab's task evaluation. Standard library + torch; the model is hf_llama.py's float64 forward and the tokenizer is
hf_tokenizer.py's tokenizer.json encoder (both independent references in this directory). It shares no code with
fwlab and was written from lm-evaluation-harness (EleutherAI, v0.4.10+; checked against the sources at
0.4.13.dev0), file by file:

  requests     lm_eval/api/task.py ConfigurableTask.construct_requests: multiple choice -> one request
               (context, target_delimiter + choice) per choice, target_delimiter " "; multiple-input tasks
               (winogrande) -> (context_i, " " + target) per context; output_type "loglikelihood" (lambada) ->
               (context, target) with no delimiter.
  encoding     lm_eval/api/model.py TemplateLM._encode_pair: the context's trailing whitespace (str.rstrip) moves
               to the continuation; whole = encode(context + continuation), ctx = encode(context),
               cont = whole[len(ctx):]. An empty context is refused here (lm-eval would score it after
               prefix_token_id; fwlab refuses it). lm_eval/models/huggingface.py HFLM.tok_encode with
               add_bos_token unset: the tokenizer's own default (add_special_tokens=True: a Llama-3 tokenizer adds
               BOS to both encodings), except that a string that already starts with the prefix token's text
               (bos_token, else eos_token, of tokenizer_config.json) is encoded with add_special_tokens=False
               (has_bos_prefix).
  scoring      HFLM._loglikelihood_tokens: asserts 0 < len(cont) <= max_length; inp = (ctx + cont)
               [-(max_length + 1):][:-1] (left truncation, positions restart at 0); log_softmax of the logits at
               the last len(cont) positions; ll = sum of the continuation tokens' log-probs; is_greedy = every
               continuation token equals the argmax at its position. Here all in float64 (hf_llama.to_f64).
               max_length defaults to config.json's max_position_embeddings (HFLM.max_length reads it first).
  metrics      ConfigurableTask.process_results (multiple_choice): pred = np.argmax(lls), pred_norm =
               np.argmax(lls / [len(c) for c in doc_to_choice(doc)]) (Python characters of the choice, no
               delimiter; for winogrande doc_to_choice is the list of contexts); ties -> first index, NaN wins as
               in numpy. gold for multiple-input tasks = doc_to_text(doc). loglikelihood output: perplexity = ll,
               acc = int(is_greedy). lm_eval/api/metrics.py: mean = sum / len, mean_stderr = sample_stddev
               (divisor n - 1) / sqrt(n), perplexity = exp(-mean(lls)); lm_eval/evaluator_utils.py: stderr is
               "N/A" when there is 1 item. ppl's (bootstrap) stderr is not produced.
  adapters     lm_eval/tasks/{piqa/piqa.yaml, arc/arc_easy.yaml, hellaswag/{hellaswag.yaml,utils.py},
               winogrande/{default.yaml,preprocess_winogrande.py}, super_glue/copa/{default.yaml,utils.py},
               openbookqa/openbookqa.yaml, mmlu/default/_default_template_yaml (+ per-subject description),
               lambada/lambada_openai.yaml}; see ADAPTERS below.
  few-shot     TaskConfig fewshot_delimiter "\\n\\n", target_delimiter " "; ConfigurableTask.fewshot_context /
               build_qa_turn (older: samplers.ContextSampler.get_context): description + for each shot
               doc_to_text(shot) + " " + answer + "\\n\\n", then doc_to_text(doc); a shot whose answer is "" is
               rendered as its text alone (no delimiter, no "\\n\\n"). The answer is choices[gold] for multiple
               choice, the target for winogrande (text = contexts[gold]) and for lambada (so a lambada shot is
               context + " " + " word": lm-eval adds the target delimiter although the target starts with a
               space; --lambada-shot-delimiter "" drops it). mmlu: lm-eval's first_n sampler on the dev split,
               i.e. the first K dev documents of the same subject. Other adapters: not lm-eval's random sampler
               (random.Random(1234).sample) but fwlab's deterministic rule: the K documents of the few-shot file
               with the smallest sha256(f"{seed}:{line}").hexdigest() (1-based line numbers, blank lines
               counted), in increasing digest order; the doc being scored is not excluded.

CLI:
  lm_eval_ref.py score --model DIR --task ADAPTER PATH [--num-fewshot K] [--fewshot-path PATH]
                       [--fewshot-seed S] [--max-length N] [--lambada-shot-delimiter STR]
      stdout: {"task": ADAPTER, "docs": [{"line": L, "lls": [...], "is_greedy": [...], "gold": g, "pred": i,
               "pred_norm": j}], "metrics": {...}}  (lambada docs: gold / pred / pred_norm are null)
  lm_eval_ref.py selftest
      prints "selftest: N checks passed"; exits 1 on any failure.
"""
import argparse
import hashlib
import json
import math
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"
MMLU_LETTERS = ["A", "B", "C", "D"]


# ------------------------------------------------------------------------------------------------- documents
def read_jsonl(path):
    """[(1-based line number, doc)]; blank lines are skipped but counted. Lines are split on "\\n" only."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    out = []
    for i, line in enumerate(text.split("\n")):
        if line.strip():
            out.append((i + 1, json.loads(line)))
    return out


class Item:
    """One document as lm-eval's task sees it.
    kind "mc": context (str), choices (list), gold (int); requests (context, " " + choice).
    kind "multi": contexts (list), target (str), gold (int); requests (context_i, " " + target).
    kind "ll": context (str), target (str); one request (context, target)."""

    def __init__(self, kind, **kw):
        self.kind = kind
        self.context = kw.get("context")
        self.contexts = kw.get("contexts")
        self.choices = kw.get("choices")
        self.target = kw.get("target")
        self.gold = kw.get("gold")
        self.description = kw.get("description", "")


def _int_label(v):
    """doc_to_target on a field / "{{label}}": an int, or a digit string lm-eval literal_evals to an int."""
    if isinstance(v, bool):
        raise ValueError("boolean label")
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.isdigit():
        return int(v)
    raise ValueError("label %r is not an integer" % (v,))


def piqa(doc):
    return Item("mc", context="Question: %s\nAnswer:" % doc["goal"], choices=[doc["sol1"], doc["sol2"]],
                gold=_int_label(doc["label"]))


def arc(doc):
    return Item("mc", context="Question: %s\nAnswer:" % doc["question"], choices=list(doc["choices"]["text"]),
                gold=doc["choices"]["label"].index(doc["answerKey"]))


def hellaswag_preprocess(text):
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    text = text.replace("  ", " ")
    return text


def hellaswag(doc):
    ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
    return Item("mc", context=hellaswag_preprocess(doc["activity_label"] + ": " + ctx),
                choices=[hellaswag_preprocess(e) for e in doc["endings"]], gold=_int_label(doc["label"]))


def winogrande(doc):
    s = doc["sentence"]
    idx = s.index("_")
    return Item("multi", contexts=[s[:idx] + doc["option1"], s[:idx] + doc["option2"]],
                target=s[idx + 1:].strip(), gold={"1": 0, "2": 1}[doc["answer"]])


def copa(doc):
    def convert(c):
        return c[0].lower() + c[1:]
    connector = {"cause": "because", "effect": "therefore"}[doc["question"]]
    return Item("mc", context=doc["premise"].strip()[:-1] + " " + connector,
                choices=[" " + convert(doc["choice1"]), " " + convert(doc["choice2"])], gold=_int_label(doc["label"]))


def openbookqa(doc):
    # lm-eval 0.4.13.dev0 writes answerKey.lstrip(); the brief says strip(). Same for any key in the labels.
    return Item("mc", context=doc["question_stem"], choices=list(doc["choices"]["text"]),
                gold=doc["choices"]["label"].index(doc["answerKey"].strip()))


def mmlu_text(doc):
    c = doc["choices"]
    return "%s\nA. %s\nB. %s\nC. %s\nD. %s\nAnswer:" % (doc["question"].strip(), c[0], c[1], c[2], c[3])


def mmlu(doc):
    return Item("mc", context=mmlu_text(doc), choices=list(MMLU_LETTERS), gold=_int_label(doc["answer"]),
                description="The following are multiple choice questions (with answers) about %s.\n\n"
                            % doc["subject"].replace("_", " "))


def lambada(doc):
    words = doc["text"].split(" ")
    return Item("ll", context=" ".join(words[:-1]), target=" " + words[-1])


ADAPTERS = {"piqa": piqa, "arc": arc, "hellaswag": hellaswag, "winogrande": winogrande, "copa": copa,
            "openbookqa": openbookqa, "mmlu": mmlu, "lambada": lambada}
# metrics each task's yaml lists (acc_stderr etc. follow)
REPORTS = {"piqa": ["acc", "acc_norm"], "arc": ["acc", "acc_norm"], "hellaswag": ["acc", "acc_norm"],
           "winogrande": ["acc"], "copa": ["acc"], "openbookqa": ["acc", "acc_norm"], "mmlu": ["acc"],
           "lambada": ["acc", "ppl"]}


# --------------------------------------------------------------------------------------------------- few-shot
def shot_text(item, lambada_delimiter=TARGET_DELIMITER):
    """One labelled example: doc_to_text + target delimiter + answer + fewshot delimiter (build_qa_turn)."""
    if item.kind == "mc":
        q, a, delim = item.context, item.choices[item.gold], TARGET_DELIMITER
    elif item.kind == "multi":
        q, a, delim = item.contexts[item.gold], item.target, TARGET_DELIMITER
    else:
        q, a, delim = item.context, item.target, lambada_delimiter
    if a == "":  # has_answer is false: the text alone, no delimiters
        return q
    return q + delim + a + FEWSHOT_DELIMITER


def hashed_shots(fewshot_docs, k, seed):
    """fwlab's rule: the k (line, doc) with the smallest hex sha256 of f"{seed}:{line}", in that order."""
    if k > len(fewshot_docs):
        raise ValueError("--num-fewshot %d but the few-shot file has %d documents" % (k, len(fewshot_docs)))
    keyed = sorted(fewshot_docs, key=lambda ld: hashlib.sha256(("%s:%d" % (seed, ld[0])).encode("utf-8"))
                   .hexdigest())
    return keyed[:k]


def mmlu_shots(fewshot_docs, k, subject):
    """lm-eval's first_n sampler on the subject's dev split."""
    same = [ld for ld in fewshot_docs if ld[1]["subject"] == subject]
    if k > len(same):
        raise ValueError("--num-fewshot %d but the dev file has %d %s documents" % (k, len(same), subject))
    return same[:k]


def build_requests(task, doc, k=0, fewshot_docs=None, seed=1234, lambada_delimiter=TARGET_DELIMITER):
    """(item, [(context, continuation)]) for one document, few-shot prefix included."""
    item = ADAPTERS[task](doc)
    prefix = item.description
    if k > 0:
        if fewshot_docs is None:
            raise ValueError("--num-fewshot > 0 needs --fewshot-path")
        if task == "mmlu":
            shots = mmlu_shots(fewshot_docs, k, doc["subject"])
        else:
            shots = hashed_shots(fewshot_docs, k, seed)
        prefix += "".join(shot_text(ADAPTERS[task](d), lambada_delimiter) for _, d in shots)
    if item.kind == "mc":
        reqs = [(prefix + item.context, TARGET_DELIMITER + c) for c in item.choices]
    elif item.kind == "multi":
        reqs = [(prefix + c, TARGET_DELIMITER + item.target) for c in item.contexts]
    else:
        reqs = [(prefix + item.context, item.target)]
    return item, reqs


# --------------------------------------------------------------------------------------------------- encoding
class Encoder:
    """HFLM.tok_encode over hf_tokenizer.Tokenizer: the tokenizer's default specials, none when the string
    already starts with the prefix token's text."""

    def __init__(self, tokenizer, prefix_text=None):
        self.tok = tokenizer
        self.prefix_text = prefix_text

    @classmethod
    def from_dir(cls, path):
        import hf_tokenizer
        tok = hf_tokenizer.Tokenizer.from_dir(path)
        prefix_text = None
        cfg_path = os.path.join(path, "tokenizer_config.json")
        if os.path.exists(cfg_path):
            with open(cfg_path, encoding="utf-8") as f:
                cfg = json.load(f)

            def text(v):
                return v.get("content") if isinstance(v, dict) else v
            prefix_text = text(cfg.get("bos_token")) or text(cfg.get("eos_token"))
        return cls(tok, prefix_text)

    def __call__(self, s):
        add = not (self.prefix_text and s.startswith(self.prefix_text))
        return list(self.tok.encode(s, add_special_tokens=add))


def encode_pair(encode, context, continuation):
    if not context:
        raise ValueError("empty context (lm-eval would use prefix_token_id; fwlab refuses it)")
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole_enc = encode(context + continuation)
    context_enc = encode(context)
    return context_enc, whole_enc[len(context_enc):]


# ---------------------------------------------------------------------------------------------------- scoring
def score_tokens(logits_fn, context_enc, continuation_enc, max_length):
    """(ll, is_greedy, inp) as HFLM._loglikelihood_tokens; logits_fn(list of ids) -> [T, V] float64 logits."""
    if not context_enc:
        raise ValueError("empty context encoding")
    if not continuation_enc:
        raise ValueError("empty continuation encoding (lm-eval asserts len(continuation_enc) > 0)")
    if len(continuation_enc) > max_length:
        raise ValueError("continuation of %d tokens exceeds max_length %d" % (len(continuation_enc), max_length))
    inp = (context_enc + continuation_enc)[-(max_length + 1):][:-1]
    logp = torch.log_softmax(logits_fn(inp), dim=-1)
    n = len(continuation_enc)
    sel = logp[len(inp) - n:len(inp)]
    cont = torch.tensor(continuation_enc, dtype=torch.long)
    ll = float(sel.gather(1, cont.unsqueeze(1)).sum())
    greedy = bool((sel.argmax(dim=-1) == cont).all())
    return ll, greedy, inp


class Model:
    def __init__(self, path):
        import hf_llama
        cfg, W = hf_llama.load_model(path)
        self.hf = hf_llama
        self.cfg, self.W = cfg, hf_llama.to_f64(W)
        self.cache = {}

    def __call__(self, ids):
        key = tuple(ids)
        if key not in self.cache:
            with torch.no_grad():
                self.cache[key] = self.hf.forward(self.W, self.cfg, torch.tensor([ids], dtype=torch.long))[0]
        return self.cache[key]


# ---------------------------------------------------------------------------------------------------- metrics
def np_argmax(xs):
    """numpy argmax on floats: the first maximum; the first NaN if there is one."""
    best = 0
    for i, x in enumerate(xs):
        if math.isnan(x):
            return i
        if x > xs[best]:
            best = i
    return best


def div(a, b):
    """numpy float division (a / 0.0 -> +-inf or nan)."""
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b


def mean(xs):
    return sum(xs) / len(xs)


def mean_stderr(xs):
    if len(xs) <= 1:
        return "N/A"
    mu = mean(xs)
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / (len(xs) - 1)) / math.sqrt(len(xs))


def doc_result(item, lls):
    """gold, pred, pred_norm, acc, acc_norm of a multiple-choice document (process_results)."""
    choices = item.choices if item.kind == "mc" else item.contexts  # doc_to_choice(doc)
    pred = np_argmax(lls)
    pred_norm = np_argmax([div(ll, float(len(c))) for ll, c in zip(lls, choices)])
    return pred, pred_norm, 1.0 if pred == item.gold else 0.0, 1.0 if pred_norm == item.gold else 0.0


def aggregate(task, rows):
    m = {}
    if task == "lambada":
        accs = [1.0 if r["is_greedy"][0] else 0.0 for r in rows]
        m["acc"], m["acc_stderr"] = mean(accs), mean_stderr(accs)
        m["ppl"] = math.exp(-mean([r["lls"][0] for r in rows]))
        return m
    for name in REPORTS[task]:
        vals = [r["_" + name] for r in rows]
        m[name], m[name + "_stderr"] = mean(vals), mean_stderr(vals)
    return m


def score(task, docs, encode, logits_fn, max_length, k=0, fewshot_docs=None, seed=1234,
          lambada_delimiter=TARGET_DELIMITER):
    rows = []
    for line, doc in docs:
        item, reqs = build_requests(task, doc, k, fewshot_docs, seed, lambada_delimiter)
        lls, greedy = [], []
        for ctx, cont in reqs:
            ce, ue = encode_pair(encode, ctx, cont)
            ll, g, _ = score_tokens(logits_fn, ce, ue, max_length)
            lls.append(ll)
            greedy.append(g)
        row = {"line": line, "lls": lls, "is_greedy": greedy}
        if item.kind == "ll":
            row.update(gold=None, pred=None, pred_norm=None)
        else:
            pred, pred_norm, acc, acc_norm = doc_result(item, lls)
            row.update(gold=item.gold, pred=pred, pred_norm=pred_norm, _acc=acc, _acc_norm=acc_norm)
        rows.append(row)
    if not rows:
        raise ValueError("no documents")
    metrics = aggregate(task, rows)
    out_docs = [{k2: v for k2, v in r.items() if not k2.startswith("_")} for r in rows]
    return {"task": task, "docs": out_docs, "metrics": metrics}


def cmd_score(args):
    model = Model(args.model)
    max_length = args.max_length if args.max_length is not None else int(model.cfg["max_position_embeddings"])
    encode = Encoder.from_dir(args.model)
    fewshot_docs = read_jsonl(args.fewshot_path) if args.fewshot_path else None
    result = score(args.task, read_jsonl(args.path), encode, model, max_length, args.num_fewshot, fewshot_docs,
                   args.fewshot_seed, args.lambada_shot_delimiter)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


# --------------------------------------------------------------------------------------------------- selftest
class Checks:
    def __init__(self):
        self.passed, self.failed = 0, []

    def eq(self, name, got, want):
        if got == want:
            self.passed += 1
        else:
            self.failed.append(name)
            print("FAIL %s\n  got  %r\n  want %r" % (name, got, want))

    def close(self, name, got, want, tol=1e-9):
        self.eq(name, abs(got - want) <= tol * max(1.0, abs(want)), True)

    def raises(self, name, fn):
        try:
            fn()
        except (ValueError, KeyError, IndexError):
            self.passed += 1
            return
        self.failed.append(name)
        print("FAIL %s: no exception" % name)


DOCS = {
    "piqa": {"goal": "Open a jar", "sol1": "Twist the lid.", "sol2": "Hit it", "label": 0},
    "arc": {"question": "Which is a gas?", "choices": {"text": ["ice", "steam", "rock"], "label": ["A", "B", "C"]},
            "answerKey": "B"},
    "hellaswag": {"activity_label": "Baking cookies", "ctx_a": "A woman mixes flour.",
                  "ctx_b": "she THEN adds [step] eggs", "endings": [" pours milk [title] Stir.  Done ", "eats it"],
                  "label": "1"},
    "winogrande": {"sentence": "The cup fell off the shelf because _ was unstable. ", "option1": "the cup",
                   "option2": "the shelf", "answer": "2"},
    "copa": {"premise": "The man broke his toe. ", "choice1": "He dropped a hammer.", "choice2": "He wore socks.",
             "question": "cause", "label": 0},
    "openbookqa": {"question_stem": "The sun is", "choices": {"text": ["a star", "a moon"], "label": ["A", "B"]},
                   "answerKey": " A"},
    "mmlu": {"question": " What is 2+2? ", "subject": "high_school_math", "choices": ["3", "4", "5", "6"],
             "answer": 1},
    "lambada": {"text": "she looked at the  old dog"},
}
# (context, continuation) per request, written by hand from the task definitions
EXPECTED = {
    "piqa": [("Question: Open a jar\nAnswer:", " Twist the lid."), ("Question: Open a jar\nAnswer:", " Hit it")],
    "arc": [("Question: Which is a gas?\nAnswer:", " ice"), ("Question: Which is a gas?\nAnswer:", " steam"),
            ("Question: Which is a gas?\nAnswer:", " rock")],
    "hellaswag": [("Baking cookies: A woman mixes flour. She then adds eggs", " pours milk. Stir. Done"),
                  ("Baking cookies: A woman mixes flour. She then adds eggs", " eats it")],
    "winogrande": [("The cup fell off the shelf because the cup", " was unstable."),
                   ("The cup fell off the shelf because the shelf", " was unstable.")],
    "copa": [("The man broke his toe because", "  he dropped a hammer."),
             ("The man broke his toe because", "  he wore socks.")],
    "openbookqa": [("The sun is", " a star"), ("The sun is", " a moon")],
    "mmlu": [("The following are multiple choice questions (with answers) about high school math.\n\n"
              "What is 2+2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:", " " + x) for x in "ABCD"],
    "lambada": [("she looked at the  old", " dog")],
}
GOLD = {"piqa": 0, "arc": 1, "hellaswag": 1, "winogrande": 1, "copa": 0, "openbookqa": 0, "mmlu": 1}


def check_requests(ck):
    for task, doc in DOCS.items():
        item, reqs = build_requests(task, doc)
        ck.eq("requests/" + task, reqs, EXPECTED[task])
        if task in GOLD:
            ck.eq("gold/" + task, item.gold, GOLD[task])
    ck.raises("arc answerKey not in labels", lambda: arc(dict(DOCS["arc"], answerKey="E")))
    ck.raises("winogrande without blank", lambda: winogrande(dict(DOCS["winogrande"], sentence="no blank")))


def check_fewshot(ck):
    # hashed selection: build a file with a blank line (line 3) and 4 docs on lines 1, 2, 4, 5
    pool = [(1, {"text": "a b"}), (2, {"text": "c d"}), (4, {"text": "e f"}), (5, {"text": "g h"})]
    digests = {line: int(hashlib.sha256(b"7:" + str(line).encode()).hexdigest(), 16) for line, _ in pool}
    order = sorted(digests, key=digests.get)
    got = [line for line, _ in hashed_shots(list(reversed(pool)), 3, 7)]
    ck.eq("hashed shots = 3 smallest digests, file order irrelevant", got, order[:3])
    ck.raises("more shots than documents", lambda: hashed_shots(pool, 5, 7))
    # lambada shots: lm-eval's target delimiter before a target that starts with a space; or none
    shots = hashed_shots(pool, 2, 7)
    by_line = dict(pool)
    words = [by_line[line]["text"].split(" ") for line, _ in shots]
    _, reqs = build_requests("lambada", DOCS["lambada"], 2, pool, 7)
    ck.eq("lambada 2-shot", reqs, [("".join("%s  %s\n\n" % (w[0], w[1]) for w in words) + "she looked at the  old",
                                    " dog")])
    _, reqs = build_requests("lambada", DOCS["lambada"], 2, pool, 7, lambada_delimiter="")
    ck.eq("lambada 2-shot without delimiter",
          reqs[0][0], "".join("%s %s\n\n" % (w[0], w[1]) for w in words) + "she looked at the  old")
    # copa: a shot ends with the gold choice after the delimiter (two spaces)
    _, reqs = build_requests("copa", DOCS["copa"], 1, [(9, dict(DOCS["copa"], label=1, question="effect"))], 1)
    ck.eq("copa 1-shot", reqs[1], ("The man broke his toe therefore  he wore socks.\n\nThe man broke his toe because",
                                   "  he wore socks."))
    # winogrande: each context gets the prefix; the shot is contexts[gold] + " " + target
    _, reqs = build_requests("winogrande", DOCS["winogrande"], 1, [(3, DOCS["winogrande"])], 1)
    pre = "The cup fell off the shelf because the shelf was unstable.\n\n"
    ck.eq("winogrande 1-shot", reqs, [(pre + "The cup fell off the shelf because the cup", " was unstable."),
                                      (pre + "The cup fell off the shelf because the shelf", " was unstable.")])
    _, reqs = build_requests("winogrande", DOCS["winogrande"], 1,
                             [(3, dict(DOCS["winogrande"], sentence="It was _", answer="1"))], 1)
    ck.eq("winogrande shot with empty target: no delimiters", reqs[0][0],
          "It was the cupThe cup fell off the shelf because the cup")
    # arc: hashed choice of 1 of 2
    pool2 = [(1, DOCS["arc"]), (2, dict(DOCS["arc"], question="Q2?", answerKey="C"))]
    first = hashed_shots(pool2, 1, 1234)[0][1]
    _, reqs = build_requests("arc", DOCS["arc"], 1, pool2, 1234)
    ck.eq("arc 1-shot", reqs[0][0], "Question: %s\nAnswer: %s\n\nQuestion: Which is a gas?\nAnswer:"
          % (first["question"], {"B": "steam", "C": "rock"}[first["answerKey"]]))
    # mmlu: first K of the same subject, description once at the top
    dev = [(1, dict(DOCS["mmlu"], subject="other", question="X")),
           (2, dict(DOCS["mmlu"], question="One?", answer=3)),
           (4, dict(DOCS["mmlu"], question="Two?", answer=0)),
           (5, dict(DOCS["mmlu"], question="Three?", answer=2))]
    _, reqs = build_requests("mmlu", DOCS["mmlu"], 2, dev)
    ck.eq("mmlu 2-shot", reqs[0], (
        "The following are multiple choice questions (with answers) about high school math.\n\n"
        "One?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer: D\n\n"
        "Two?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer: A\n\n"
        "What is 2+2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:", " A"))
    ck.raises("mmlu: more shots than the subject has", lambda: build_requests("mmlu", DOCS["mmlu"], 4, dev))


def check_encode_pair(ck):
    # a character-level "tokenizer" with a BOS (id 0) that merges "ab" into one token (id 1)
    def enc(s):
        ids, i = [0], 0
        while i < len(s):
            if s.startswith("ab", i):
                ids.append(1)
                i += 2
            else:
                ids.append(ord(s[i]))
                i += 1
        return ids
    ce, ue = encode_pair(enc, "x y \n", "z")
    ck.eq("trailing whitespace moves to the continuation", (ce, ue), ([0, ord("x"), ord(" "), ord("y")],
                                                                     [ord(" "), ord("\n"), ord("z")]))
    ce, ue = encode_pair(enc, "xa", "b")
    ck.eq("continuation = whole[len(context):] even across a merge", (ce, ue), ([0, ord("x"), ord("a")], []))
    ck.raises("empty context", lambda: encode_pair(enc, "", " x"))
    ck.raises("empty continuation encoding", lambda: score_tokens(lambda ids: torch.zeros(len(ids), 4),
                                                                  [0, 1], [], 8))
    e = Encoder(type("T", (), {"encode": lambda self, s, add_special_tokens=True:
                               ([0] if add_special_tokens else []) + [5]})(), "<s>")
    ck.eq("default specials", e("hello"), [0, 5])
    ck.eq("no specials on a string that starts with the prefix token", e("<s>hello"), [5])


def check_scoring(ck):
    V = 6

    def fake(ids):
        g = torch.Generator().manual_seed(sum(ids) * 31 + len(ids))
        return torch.randn(len(ids), V, generator=g, dtype=torch.float64)
    ll, greedy, inp = score_tokens(fake, [1, 2, 3, 4, 5], [2, 3], 3)
    ck.eq("left truncation to max_length + 1 then drop the last", inp, [4, 5, 2])
    logp = torch.log_softmax(fake([4, 5, 2]), -1)
    ck.close("ll = logp[1][2] + logp[2][3]", ll, float(logp[1, 2] + logp[2, 3]))
    ck.eq("is_greedy", greedy, bool(logp[1].argmax() == 2 and logp[2].argmax() == 3))
    ck.raises("continuation longer than max_length", lambda: score_tokens(fake, [1], [1, 2, 3], 2))
    # always-greedy logits: the next id is the argmax everywhere
    def peaked(ids):
        out = torch.zeros(len(ids), V, dtype=torch.float64)
        for t, i in enumerate(ids):
            out[t, (i + 1) % V] = 5.0
        return out
    ll, greedy, _ = score_tokens(peaked, [0, 1], [2, 3], 16)
    p = math.exp(5) / (math.exp(5) + V - 1)
    ck.close("peaked ll", ll, 2 * math.log(p))
    ck.eq("peaked is greedy", greedy, True)
    ck.eq("peaked wrong token is not greedy", score_tokens(peaked, [0, 1], [2, 4], 16)[1], False)


def check_model_chain(ck):
    """With a real (small, random) model: token-level chain rule and the truncation window."""
    import hf_llama
    cfg, W = hf_llama.small("llama")

    def fn(ids):
        with torch.no_grad():
            return hf_llama.forward(W, cfg, torch.tensor([ids]))[0]
    ctx, cont = [3, 9, 14, 1], [7, 22, 5]
    a = score_tokens(fn, ctx, cont, 64)[0]
    b = score_tokens(fn, ctx, cont[:1], 64)[0] + score_tokens(fn, ctx + cont[:1], cont[1:], 64)[0]
    ck.close("chain rule over the continuation", a, b)
    t = score_tokens(fn, [40, 41] + ctx, cont, 5)
    ck.eq("truncated window", t[2], ctx[-3:] + cont[:2])
    ck.close("truncation == scoring the kept window", t[0], score_tokens(fn, ctx[-3:], cont, 64)[0])


def check_metrics(ck):
    ck.close("mean_stderr [1,0,1,1]", mean_stderr([1.0, 0.0, 1.0, 1.0]), 0.25)
    ck.close("mean_stderr [1,0]", mean_stderr([1.0, 0.0]), math.sqrt(0.5) / math.sqrt(2))
    ck.eq("stderr of one item", mean_stderr([1.0]), "N/A")
    ck.eq("argmax tie -> first", np_argmax([-1.0, -0.5, -0.5]), 1)
    ck.eq("argmax nan wins", np_argmax([-1.0, math.nan, 0.0]), 1)
    # copa: the choice's leading space counts in acc_norm's length
    item = copa(DOCS["copa"])  # choices " he dropped a hammer." (21 chars), " he wore socks." (15 chars)
    ck.eq("copa choice lengths", [len(c) for c in item.choices], [21, 15])
    pred, pred_norm, acc, acc_norm = doc_result(item, [-21.0, -16.0])
    ck.eq("copa pred / pred_norm", (pred, pred_norm, acc, acc_norm), (1, 0, 0.0, 1.0))
    item = arc(DOCS["arc"])  # lengths 3, 5, 4
    ck.eq("arc pred / pred_norm", doc_result(item, [-3.0, -5.5, -4.1])[:2], (0, 0))
    ck.eq("arc acc_norm tie -> first", doc_result(item, [-6.0, -10.0, -8.0])[:2], (0, 0))
    rows = [{"lls": [-2.0], "is_greedy": [True]}, {"lls": [-4.0], "is_greedy": [False]}]
    m = aggregate("lambada", rows)
    ck.close("lambada ppl = exp(-mean ll)", m["ppl"], math.exp(3.0))
    ck.eq("lambada acc", (m["acc"], "ppl_stderr" in m), (0.5, False))
    m = aggregate("copa", [{"_acc": 1.0, "_acc_norm": 0.0}, {"_acc": 0.0, "_acc_norm": 0.0}])
    ck.eq("copa reports acc only", sorted(m), ["acc", "acc_stderr"])


def selftest(_args=None):
    ck = Checks()
    for fn in (check_requests, check_fewshot, check_encode_pair, check_scoring, check_model_chain, check_metrics):
        fn(ck)
    if ck.failed:
        print("selftest: %d checks failed: %s" % (len(ck.failed), ", ".join(ck.failed)))
        return 1
    print("selftest: %d checks passed" % ck.passed)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score", help="score a JSONL task file")
    s.add_argument("--model", required=True, help="HF model directory with tokenizer.json")
    s.add_argument("--task", required=True, nargs=2, metavar=("ADAPTER", "PATH"))
    s.add_argument("--num-fewshot", type=int, default=0)
    s.add_argument("--fewshot-path")
    s.add_argument("--fewshot-seed", type=int, default=1234)
    s.add_argument("--max-length", type=int, default=None, help="default: max_position_embeddings")
    s.add_argument("--lambada-shot-delimiter", default=TARGET_DELIMITER,
                   help='between a lambada shot\'s context and target (lm-eval: " ")')
    sub.add_parser("selftest", help="run the built-in checks")
    args = p.parse_args(argv)
    if args.cmd == "selftest":
        return selftest()
    task, path = args.task
    if task not in ADAPTERS:
        p.error("unknown adapter %r (one of %s)" % (task, ", ".join(ADAPTERS)))
    args.task, args.path = task, path
    try:
        return cmd_score(args)
    except (ValueError, KeyError, IndexError, TypeError) as e:  # a malformed document or option
        print("lm_eval_ref: error: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
