"""Cross-checks `prism eval` against lm-evaluation-harness (PyPI lm_eval, the
`hf` model type) run on a `prism export --hf` directory, item by item.

lm_eval runs its own task definitions: each task here is a local YAML that
includes lm_eval's shipped YAML (hellaswag, piqa, arc_easy, winogrande) and only
points its data at a local JSON file, converted from the task file prism read
(AI2's ARC form to the Hugging Face one, PIQA's labels file into a label field).
No hub access: HF_HUB_OFFLINE and HF_DATASETS_OFFLINE are set.

Compared per item: the (context, continuation) strings of every choice, the
log-likelihoods (prism's --dump against lm_eval's responses), acc and acc_norm
(lm_eval's per-sample metrics against prism's pred / pred_norm), and the
length each divides by for acc_norm (lm_eval: len() of the choice in
characters; prism: its dump's `bytes`). lm_eval's WinoGrande defines no
acc_norm (its choices are the two contexts), so there acc alone is compared.

usage: hf_lm_eval_check.py --export DIR --work DIR
           --task NAME,data=FILE,dump=PRISM_DUMP.json[,labels=FILE] ...
Prints one JSON object: per task n, the aggregates of both, and the lists of
disagreements (empty when they agree).
"""
import argparse
import json
import logging
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import lm_eval  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

STOCK = Path(lm_eval.__file__).parent / "tasks"
STOCK_YAML = {
    "hellaswag": STOCK / "hellaswag" / "hellaswag.yaml",
    "piqa": STOCK / "piqa" / "piqa.yaml",
    "arc_easy": STOCK / "arc" / "arc_easy.yaml",
    "winogrande": STOCK / "winogrande" / "default.yaml",
}


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def hf_rows(task, data, labels):
    """The task file as the rows of the Hugging Face dataset lm_eval's YAML reads."""
    rows = read_jsonl(data)
    if task == "piqa" and labels:
        with open(labels) as f:
            ls = [int(x) for x in f.read().split()]
        rows = [dict(r, label=ls[i]) for i, r in enumerate(rows)]
    if task == "arc_easy":
        out = []
        for r in rows:
            q = r["question"]
            if isinstance(q, dict):  # AI2's original form
                r = {"id": r.get("id", ""), "question": q["stem"], "answerKey": r["answerKey"],
                     "choices": {"text": [c["text"] for c in q["choices"]], "label": [c["label"] for c in q["choices"]]}}
            out.append(r)
        rows = out
    if task == "hellaswag":
        rows = [dict(r, label=str(r["label"])) for r in rows]
    return rows


def write_task(work, task, rows):
    name = f"prism_xcheck_{task}"
    data = work / f"{name}.jsonl"
    with open(data, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    yaml = (f"include: {STOCK_YAML[task]}\n"
            f"task: {name}\n"
            "tag: prism_xcheck\n"
            "dataset_path: json\n"
            "dataset_name: null\n"
            f"dataset_kwargs:\n  data_files:\n    validation: {data}\n"
            "training_split: null\nvalidation_split: validation\ntest_split: null\n"
            "fewshot_split: null\nnum_fewshot: 0\n")
    (work / f"{name}.yaml").write_text(yaml)
    return name


def response(resp):
    r = resp[0] if isinstance(resp, (list, tuple)) and isinstance(resp[0], (list, tuple)) else resp
    return float(r[0]), str(r[1]) == "True"


def compare(task, dump, samples):
    items = dump["items"]
    out = {"n": len(items), "lm_eval_n": len(samples), "text_mismatches": [], "acc_mismatches": [],
           "acc_norm_mismatches": [], "normaliser_mismatches": [], "max_ll_diff": 0.0}
    hits, hits_norm = [], []
    for s in sorted(samples, key=lambda s: s["doc_id"]):
        i = s["doc_id"]
        item = items[i]
        pairs = [tuple(a[:2]) for a in s["arguments"]]
        lls = [response(r)[0] for r in s["resps"]]
        for c, choice in enumerate(item["choices"]):
            if pairs[c] != (choice["context"], choice["continuation"]):
                out["text_mismatches"].append({"item": i, "choice": c, "lm_eval": pairs[c],
                                               "prism": [choice["context"], choice["continuation"]]})
            out["max_ll_diff"] = max(out["max_ll_diff"], abs(lls[c] - choice["loglikelihood"]))
            # acc_norm's normaliser: the answer's characters (Python's len()), as lm-eval counts them.
            if task != "winogrande" and len(pairs[c][1]) - 1 != choice["chars"]:
                out["normaliser_mismatches"].append({"item": i, "choice": c, "choice_text": choice["choice"],
                                                     "lm_eval_chars": len(pairs[c][1]) - 1,
                                                     "prism_chars": choice["chars"]})
        acc = float(item["pred"] == item["label"])
        hits.append(s["acc"])
        if s["acc"] != acc:
            out["acc_mismatches"].append({"item": i, "lm_eval": s["acc"], "prism": acc, "lls": lls})
        if "acc_norm" in s:
            acc_norm = float(item["pred_norm"] == item["label"])
            hits_norm.append(s["acc_norm"])
            if s["acc_norm"] != acc_norm:
                out["acc_norm_mismatches"].append({"item": i, "lm_eval": s["acc_norm"], "prism": acc_norm,
                                                   "lls": lls})
    out["lm_eval_acc"] = sum(hits) / len(hits)
    out["lm_eval_acc_norm"] = sum(hits_norm) / len(hits_norm) if hits_norm else None
    out["prism_acc"] = dump["acc"]
    out["prism_acc_norm"] = dump["acc_norm"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--export", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--task", action="append", required=True, help="NAME,data=FILE,dump=FILE[,labels=FILE]")
    ap.add_argument("--batch-size", type=int, default=4)
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    specs = {}
    for t in a.task:
        name, *kv = t.split(",")
        specs[name] = dict(x.split("=", 1) for x in kv)
    names = {write_task(work, t, hf_rows(t, s["data"], s.get("labels"))): t for t, s in specs.items()}
    res = lm_eval.simple_evaluate(
        model="hf",
        model_args={"pretrained": a.export, "trust_remote_code": True, "dtype": "float32"},
        tasks=list(names), device="cpu", batch_size=a.batch_size, bootstrap_iters=0, log_samples=True,
        task_manager=TaskManager(include_path=str(work), include_defaults=False))
    out = {"lm_eval_version": lm_eval.__version__, "tasks": {}}
    for name, task in names.items():
        with open(specs[task]["dump"], encoding="utf-8") as f:
            dump = json.load(f)
        r = compare(task, dump, res["samples"][name])
        r["lm_eval_results"] = {k: v for k, v in res["results"][name].items() if isinstance(v, (int, float))}
        out["tasks"][task] = r
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
