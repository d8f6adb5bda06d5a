"""Every architecture family's config.json fixture through `llmcap estimate`: weights and KV
against the published parameter counts and the KV formula of its attention kind.

Run: python bench/architectures.py [--gpu H100-SXM] [--context 32768]
Prints one row per fixture in tests/data/configs/ (README there names each file's source):
- weights: `llmcap estimate --model FIXTURE --precision bf16` weights_gib against the published
  total parameters x 2 bytes (gpt-oss: the model card's checkpoint size, MXFP4 experts);
- KV/token: estimate's kv_cache_bytes_per_token against the formula computed here from the raw
  config (2 x kv_heads x head_dim x layers x 2 bytes; MLA: (kv_lora_rank + qk_rope_head_dim) x
  layers x 2 bytes);
- KV/seq at --context tokens: estimate's kv_cache_gib_per_sequence against the same formula with
  sliding-window (and chunked) layers holding at most their window.
Exit 1 when any figure is more than 2% off.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "data" / "configs"
GIB = 2**30

# fixture -> (published total parameters, B; published checkpoint GiB when the weights are not
# all 16-bit, else None; source)
PUBLISHED: dict[str, tuple[float, float | None, str]] = {
    "llama": (8.0, None, "Llama 3.1 8B model card"),
    "mistral": (7.3, None, "Mistral 7B announcement"),
    "qwen2": (3.09, None, "Qwen2.5-3B card"),
    "qwen3": (8.2, None, "Qwen3-8B card"),
    "qwen3_moe": (30.5, None, "Qwen3-30B-A3B card"),
    "mixtral": (46.7, None, "Mixtral 8x7B blog"),
    "deepseek_v2": (15.7, None, "DeepSeek-V2-Lite card"),
    "deepseek_v3": (671.0, None, "DeepSeek-V3 README (main model)"),
    "glm4_moe": (106.0, None, "GLM-4.5-Air (transformers glm4_moe docs)"),
    "gpt_oss": (116.83, 60.8, "gpt-oss model card: 116.83B, checkpoint 60.8 GiB"),
    "gpt_oss_20b": (20.91, 12.8, "gpt-oss model card: 20.91B, checkpoint 12.8 GiB"),
    "gemma2": (9.24, None, "Gemma 2 paper"),
    "gemma3": (1.0, None, "Gemma 3 report"),
    "llama4": (109.0, None, "Llama 4 Scout card (incl. vision)"),
    "phi3": (3.8, None, "Phi-4-mini-instruct card"),
}


def kv_formula(c: dict[str, Any], context: int) -> tuple[str, float, float]:
    """(kind, bytes per token, bytes per sequence of `context` tokens), 16-bit KV, from the raw config."""
    c = c.get("text_config", c)
    layers = c["num_hidden_layers"]
    if "kv_lora_rank" in c:
        per = (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * 2.0
        return "MLA latent", per * layers, per * layers * context
    hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    per = 2 * c.get("num_key_value_heads", c["num_attention_heads"]) * hd * 2.0
    mt = c["model_type"]
    window, n_win = None, 0
    if "layer_types" in c:
        window, n_win = c["sliding_window"], sum(t == "sliding_attention" for t in c["layer_types"])
    elif mt == "gemma2":
        window, n_win = c["sliding_window"], (layers + 1) // 2
    elif mt == "gemma3_text":
        window, n_win = c["sliding_window"], sum(1 for i in range(layers) if (i + 1) % c["sliding_window_pattern"])
    elif mt == "llama4_text" and c.get("attention_chunk_size"):
        window, n_win = c["attention_chunk_size"], sum(1 for i in range(layers) if (i + 1) % 4)
    kind = "full" if not n_win else f"{layers - n_win} full + {n_win} sliding({window})"
    seq = per * ((layers - n_win) * context + n_win * min(context, window or context))
    return kind, per * layers, seq


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpu", default="H100-SXM")
    ap.add_argument("--context", type=int, default=32768, help="tokens per sequence for the KV/seq column")
    args = ap.parse_args()
    from typer.testing import CliRunner

    from sizing.cli import app

    runner = CliRunner()
    head = (f"{'fixture':12} {'model_type':12} {'pub B':>7} {'weights GiB':>11} {'expect':>8} {'Δ%':>6} "
            f"{'KV B/tok':>9} {'formula':>9} {'Δ%':>5} {'KV GiB/seq':>10} {'formula':>8} {'Δ%':>5}  attention")
    print(head)
    worst = 0.0
    for f in sorted(CONFIGS.glob("*.json")):
        name = f.stem
        total_b, ckpt_gib, _src = PUBLISHED[name]
        c = json.loads(f.read_text())
        r = runner.invoke(app, ["estimate", "--model", str(f), "--gpu", args.gpu, "--precision", "bf16",
                                "--prompt-tokens", str(args.context - 1), "--output-tokens", "1", "--format", "json"])
        if r.exit_code != 0:
            print(f"{name:12} estimate failed: {r.output.strip()}")
            worst = 100.0
            continue
        d = json.loads(r.output)
        expect_w = ckpt_gib if ckpt_gib else total_b * 1e9 * 2 / GIB
        kind, kv_tok, kv_seq = kv_formula(c, args.context)
        dw = 100 * (d["weights_gib"] / expect_w - 1)
        dk = 100 * (d["kv_cache_bytes_per_token"] / kv_tok - 1)
        ds = 100 * (d["kv_cache_gib_per_sequence"] / (kv_seq / GIB) - 1)
        worst = max(worst, abs(dw), abs(dk), abs(ds) if kv_seq / GIB >= 0.05 else 0.0)  # 4-decimal rounding
        mt = c.get("text_config", c).get("model_type", c.get("model_type"))
        print(f"{name:12} {mt:12} {total_b:7.2f} {d['weights_gib']:11.1f} {expect_w:8.1f} {dw:+6.1f} "
              f"{d['kv_cache_bytes_per_token']:9,d} {kv_tok:9,.0f} {dk:+5.1f} {d['kv_cache_gib_per_sequence']:10.3f} "
              f"{kv_seq / GIB:8.3f} {ds:+5.1f}  {kind}")
    print(f"worst deviation {worst:.1f}% (limit 2%)")
    return 0 if worst <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
