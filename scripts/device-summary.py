#!/usr/bin/env python3
"""The device check's report (scripts/device-check.sh), from its results.jsonl alone.

  device-summary.py RESULTS SUMMARY_MD SECONDS BUDGET   the stage table and every measurement
  device-summary.py --mfu RUN_DIR RESULTS               appends tokens/s and MFU of a `prism train`
                                                        run on the GPU to RESULTS

Standard library only (json, struct): it must run on the device and in CI alike.
MFU counts nanoGPT's FLOPs per token, 6 N + 12 L d T (N: parameters without the
position table; the attention term at the run's T), against the bf16 matmul peak
that `prism-device-bench train` measured in the same check (its "peak" line), and
against the datasheet's dense bf16 peak for H100/H200 SXM (989 TFLOP/s).
"""
import json
import math
import re
import struct
import sys

DATASHEET_BF16 = 989e12  # NVIDIA H100/H200 SXM, dense bf16 (datasheet)


def read_rows(path):
    rows = []
    for n, line in enumerate(open(path), 1):
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            rows.append({"stage": f"line {n}", "status": "unreadable", "rc": -1, "seconds": 0, "limit_s": 0,
                         "note": line[:120]})
    return rows


def fmt(x, spec):
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return "yes" if x else "NO"
    if isinstance(x, (int, float)):
        return format(x, spec)
    return str(x)


def table(title, rows, cols):
    """cols: (header, key, format spec)."""
    if not rows:
        return []
    out = ["", title, "", "| " + " | ".join(h for h, _, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(fmt(r.get(k), spec) for _, k, spec in cols) + " |")
    return out


def summary(results, md, seconds, budget):
    rows = read_rows(results)
    stages = [r for r in rows if "stage" in r]
    failed = [r["stage"] for r in stages if r["status"] not in ("pass",) and not r["note"].startswith("not selected")]
    out = [f"# Device check: {len(stages) - len(failed)} of {len(stages)} stages passed "
           f"({seconds} s of a {budget} s budget)", ""]
    out += ["| stage | status | rc | seconds | limit | note |", "|---|---|---|---|---|---|"]
    out += [f"| {r['stage']} | {r['status']} | {r['rc']} | {r['seconds']} | {r['limit_s']} | {r['note']} |" for r in stages]
    b = lambda kind: [r for r in rows if r.get("bench") == kind]
    out += table("Kernel against float64 (relative error of the norm)", b("check"),
                 [("dtype", "dtype", ""), ("d_h", "d_h", ""), ("T", "T", ""), ("out", "out_err", ".1e"),
                  ("dq", "dq_err", ".1e"), ("dk", "dk_err", ".1e"), ("dv", "dv_err", ".1e"),
                  ("distance", "distance_err", ".1e"), ("within tolerance", "ok", ""), ("error", "error", "")])
    out += table("Attention, causal, bf16: Prism's CUDA kernel vs SDPA flash (median ms; ratio < 1: Prism faster)",
                 b("attention"),
                 [("d_h", "d_h", ""), ("T", "T", ""), ("B", "B", ""), ("H", "H", ""), ("mode", "mode", ""),
                  ("run", "run", ""), ("prism", "prism_ms", ".3f"), ("prism+distance", "prism_distance_ms", ".3f"),
                  ("flash", "sdpa_flash_ms", ".3f"), ("prism/flash", "prism_over_flash", ".2f"),
                  ("distance cost", "distance_overhead", ".3f"), ("error", "error", "")])
    out += table("LM-head loss, forward + backward, bf16 autocast", b("loss"),
                 [("path", "path", ""), ("N", "N", ""), ("V", "V", ""), ("run", "run", ""), ("ms", "ms", ".2f"),
                  ("peak GB", "peak_gb", ".2f"), ("vs the other", "over_other", ".2f"),
                  ("loss rel diff", "loss_rel_diff", ".1e"), ("default here", "default", ""), ("error", "error", "")])
    out += table("Matmul peak measured here", b("peak"),
                 [("dtype", "dtype", ""), ("TFLOP/s", "tflops", ".0f"), ("shape", "shape", "")])
    out += table("124M training steps (forward, backward, AdamW; T 1024)", b("train"),
                 [("schedule", "schedule", ""), ("dtype", "dtype", ""), ("tf32", "tf32", ""),
                  ("attention", "attention_backend", ""), ("loss path", "loss_path", ""), ("B", "batch", ""),
                  ("ms/step", "ms_per_step", ".1f"), ("tokens/s", "tokens_per_s", ".0f"),
                  ("vs uniform", "throughput_vs_uniform", ".3f"), ("MFU %", "mfu_pct", ".1f"),
                  ("peak GB", "peak_gb", ".1f"), ("error", "error", "")])
    out += table("The full prism on the GPU", b("run"),
                 [("what", "what", ""), ("ok", "ok", ""), ("value", "value", ""), ("note", "note", "")])
    mem = b("memcheck")
    if mem:
        out += ["", f"memcheck after the failed smoke launch: rc {mem[0]['rc']}: {mem[0]['note']}"]
    text = "\n".join(out) + "\n"
    open(md, "w").write(text)
    print(text)


def safetensors_shapes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return {k: v["shape"] for k, v in header.items() if k != "__metadata__"}


def latest_checkpoint(run):
    name = open(f"{run}/checkpoints/latest").read().strip()
    return f"{run}/checkpoints/{name}/model.safetensors"


def mfu(run, results):
    import h5py  # on the device (KINDS.md) and in .venv
    shapes = safetensors_shapes(latest_checkpoint(run))
    n_params = sum(math.prod(s) for k, s in shapes.items() if k != "wpe.weight")
    layers = len({k.split(".")[1] for k in shapes if k.startswith("h.")})
    d = shapes["wte.weight"][1]
    with h5py.File(f"{run}/run.h5", "r") as f:
        tokens, secs = f["train/tokens"][:], f["train/time_s"][:]
    skip = min(3, len(tokens) - 2)  # the first steps include warm-up (allocator, kernels' first launch)
    tps = float(tokens[-1] - tokens[skip]) / float(secs[-1] - secs[skip])
    m = re.search(r"^\s*seq_len:\s*(\d+)", open(f"{run}/config.yaml").read(), re.M)
    seq = int(m.group(1)) if m and int(m.group(1)) > 0 else shapes["wpe.weight"][0]  # 0: the block size
    flops_per_token = 6 * n_params + 12 * layers * d * seq
    peaks = [r for r in read_rows(results) if r.get("bench") == "peak" and r.get("dtype") == "bf16"]
    measured = peaks[-1]["tflops"] * 1e12 if peaks else None
    rec = {"bench": "run", "what": "tokens/s and MFU of the full prism (steps after the first 3)", "ok": True,
           "tokens_per_s": tps, "flops_per_token": flops_per_token, "params": n_params,
           "mfu_measured_peak_pct": 100 * tps * flops_per_token / measured if measured else None,
           "mfu_datasheet_pct": 100 * tps * flops_per_token / DATASHEET_BF16}
    rec["value"] = (f"{tps:,.0f} tok/s; MFU {fmt(rec['mfu_measured_peak_pct'], '.1f')}% of the measured bf16 peak, "
                    f"{rec['mfu_datasheet_pct']:.1f}% of 989 TFLOP/s")
    rec["note"] = f"{n_params / 1e6:.1f}M params, {layers} layers, d {d}, T {seq}: {flops_per_token / 1e9:.3f} GFLOP/token"
    open(results, "a").write(json.dumps(rec) + "\n")
    print(rec["what"] + ": " + rec["value"])


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--mfu":
        mfu(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5:
        summary(*sys.argv[1:5])
    else:
        sys.exit(__doc__)
