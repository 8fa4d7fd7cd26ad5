"""Reference for `prism eval`: lm-evaluation-harness's zero-shot multiple-choice
conventions written out again in Python (request texts, tokenisation with
tiktoken, truncation, log-likelihood with PyTorch, acc, acc_norm (answer length
in characters, len()) and acc_bytes (in UTF-8 bytes) with numpy),
so the C++ side can be checked against an independent computation.

    eval_reference.py corpus --task T --data FILE [--labels FILE] [--repeat N]
        prints the gold texts (context + correct continuation), one paragraph per
        item, blank-line separated: a corpus a model can memorise.
    eval_reference.py check --task T --data FILE [--labels FILE] --vocab VOCAB
                            --checkpoint MODEL.safetensors --dump DUMP.json
        compares prism eval's dump with this script's own requests, token ids,
        answer lengths and log-likelihoods, and computes acc / acc_norm /
        acc_bytes from the dump's numbers and from its own; prints one JSON object.
    eval_reference.py text --input FILE
        Python's own str.strip(), str.capitalize() and len() of each line of a
        UTF-8 file (JSON strings, one per line); prints a JSON list of
        {"strip", "capitalize", "len"}: what prism's python_text.h must match.
"""
import argparse
import json
import math
import re
import sys

import numpy as np

# ---- requests, as the harness builds them -------------------------------------------------------------


def hellaswag_clean(text):
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def load_items(task, path, labels_path=None):
    """[(label, [(context, continuation, choice_text), ...]), ...]"""
    rows = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
    labels = [int(l) for l in open(labels_path) if l.strip()] if labels_path else None
    items = []
    for i, d in enumerate(rows):
        if task == "hellaswag":
            ctx = d["ctx_a"] + " " + d["ctx_b"].capitalize()
            query = hellaswag_clean(d["activity_label"] + ": " + ctx)
            choices = [hellaswag_clean(e) for e in d["endings"]]
            items.append((int(d["label"]), [(query, " " + c, c) for c in choices]))
        elif task == "piqa":
            query = "Question: " + d["goal"] + "\nAnswer:"
            label = int(d["label"]) if "label" in d else labels[i]
            items.append((label, [(query, " " + d[k], d[k]) for k in ("sol1", "sol2")]))
        elif task == "arc_easy":
            if isinstance(d["question"], str):
                stem, texts, keys = d["question"], d["choices"]["text"], d["choices"]["label"]
            else:
                stem = d["question"]["stem"]
                texts = [c["text"] for c in d["question"]["choices"]]
                keys = [c["label"] for c in d["question"]["choices"]]
            query = "Question: " + stem + "\nAnswer:"
            items.append((keys.index(d["answerKey"]), [(query, " " + t, t) for t in texts]))
        elif task == "winogrande":
            s = d["sentence"]
            cut = s.index("_")
            target = s[cut + 1:].strip()
            opts = [d["option1"], d["option2"]]
            items.append(({"1": 0, "2": 1}[str(d["answer"])], [(s[:cut] + o, " " + target, target) for o in opts]))
        else:
            sys.exit(f"unknown task {task}")
    return items


# ---- tokenisation and scoring ---------------------------------------------------------------------------


def encode_pair(enc, context, continuation):
    if context == "":
        return [50256], enc.encode_ordinary(continuation)
    spaces = len(context) - len(context.rstrip())
    if spaces:
        continuation = context[-spaces:] + continuation
        context = context[:-spaces]
    whole = enc.encode_ordinary(context + continuation)
    ctx = enc.encode_ordinary(context)
    return ctx, whole[len(ctx):]


def load_model(path):
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file

    from gpt_reference import GPT

    tensors = load_file(path)
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    heads = [int(h) for h in meta["heads"].split(",")]
    wte = tensors["wte.weight"]
    if "wpe.weight" in tensors:
        block = tensors["wpe.weight"].shape[0]
        model = GPT(wte.shape[0], block, wte.shape[1], heads, "ln_f.bias" in tensors)
    else:  # rotary positions: position, rope_theta and block_size from the config the checkpoint carries
        import yaml
        m = (yaml.safe_load(meta["config"]) or {}).get("model", {})
        assert m.get("position") == "rope", f"{path}: no wpe.weight and no rotary positions in its config"
        block = int(m["block_size"])
        model = GPT(wte.shape[0], block, wte.shape[1], heads, "ln_f.bias" in tensors, "rope",
                    float(m.get("rope_theta", 10000.0)))
    model.load_state_dict({k: tensors[k] for k in dict(model.named_parameters())}, strict=True)
    return model.eval(), block


def loglikelihood(model, block, ctx, cont):
    import torch

    tokens = (ctx + cont)[-(block + 1):]
    inp = torch.tensor([tokens[:-1]])
    with torch.no_grad():
        logits, _ = model(inp)
    lp = torch.log_softmax(logits[0, -len(cont):].double(), -1)
    return float(lp[torch.arange(len(cont)), torch.tensor(cont)].sum())


def normalised_preds(lls, lengths):
    return [int(np.argmax(np.array(l) / np.array(n, dtype=float))) for l, n in zip(lls, lengths)]


def accuracy(lls, chars, bytes_, labels):
    """acc, acc_norm (per character, the harness's len()), acc_bytes (per UTF-8 byte)."""
    hits = [int(np.argmax(l)) == g for l, g in zip(lls, labels)]
    hits_norm = [p == g for p, g in zip(normalised_preds(lls, chars), labels)]
    hits_bytes = [p == g for p, g in zip(normalised_preds(lls, bytes_), labels)]
    return float(np.mean(hits)), float(np.mean(hits_norm)), float(np.mean(hits_bytes))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["corpus", "check", "text"])
    ap.add_argument("--task")
    ap.add_argument("--data")
    ap.add_argument("--input")
    ap.add_argument("--labels")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--vocab")
    ap.add_argument("--checkpoint")
    ap.add_argument("--dump")
    a = ap.parse_args()
    if a.mode == "text":
        lines = [json.loads(l) for l in open(a.input, encoding="utf-8") if l.strip()]
        print(json.dumps([{"strip": t.strip(), "capitalize": t.capitalize(), "len": len(t)} for t in lines]))
        return
    items = load_items(a.task, a.data, a.labels)
    if a.mode == "corpus":
        for _ in range(a.repeat):
            for label, choices in items:
                ctx, cont, _ = choices[label]
                print(ctx + cont + "\n")
        return

    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from tiktoken_gpt2 import gpt2

    enc = gpt2(a.vocab)
    model, block = load_model(a.checkpoint)
    dump = json.load(open(a.dump, encoding="utf-8"))
    out = {"items": len(items), "dump_items": len(dump["items"]), "text_mismatches": [], "token_mismatches": [],
           "max_ll_diff": 0.0}
    own_lls, dump_lls, own_chars, own_bytes, dump_chars, dump_bytes, labels = [], [], [], [], [], [], []
    for n, ((label, choices), d) in enumerate(zip(items, dump["items"])):
        labels.append(label)
        if d["label"] != label:
            out["text_mismatches"].append(f"item {n}: label {d['label']} vs {label}")
        lls, cs, bs = [], [], []
        for k, ((ctx, cont, text), dc) in enumerate(zip(choices, d["choices"])):
            if (dc["context"], dc["continuation"], dc["choice"]) != (ctx, cont, text):
                out["text_mismatches"].append(f"item {n} choice {k}: {dc['context']!r}+{dc['continuation']!r} vs {ctx!r}+{cont!r}")
            c_ids, k_ids = encode_pair(enc, ctx, cont)
            if (dc["context_tokens"], dc["continuation_tokens"]) != (c_ids, k_ids):
                out["token_mismatches"].append(f"item {n} choice {k}")
            ll = loglikelihood(model, block, c_ids, k_ids)
            out["max_ll_diff"] = max(out["max_ll_diff"], abs(ll - dc["loglikelihood"]))
            lls.append(ll)
            cs.append(len(text))
            bs.append(len(text.encode("utf-8")))
        own_lls.append(lls)
        own_chars.append(cs)
        own_bytes.append(bs)
        dump_lls.append([c["loglikelihood"] for c in d["choices"]])
        dump_chars.append([c["chars"] for c in d["choices"]])
        dump_bytes.append([c["bytes"] for c in d["choices"]])
    out["lengths_match"] = own_chars == dump_chars and own_bytes == dump_bytes
    out["chars_differ_from_bytes"] = own_chars != own_bytes
    out["acc_from_dump"], out["acc_norm_from_dump"], out["acc_bytes_from_dump"] = accuracy(
        dump_lls, own_chars, own_bytes, labels)
    out["acc_own"], out["acc_norm_own"], out["acc_bytes_own"] = accuracy(own_lls, own_chars, own_bytes, labels)
    out["pred_from_dump"] = [int(np.argmax(l)) for l in dump_lls]
    out["pred_norm_from_dump"] = normalised_preds(dump_lls, own_chars)
    out["pred_bytes_from_dump"] = normalised_preds(dump_lls, own_bytes)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
