"""The peers Forge's GPU figures are ratios against: PyTorch fp32 (TF32 off) matmul and
HuggingFace transformers' GPT-2, measured on the same GPU in the same run as Forge.

usage: python3 tools/peers/torch_peers.py OUT.json [--train]
Prints and writes {matmul: {shape: gflops}, gpt2: {config: {decode_ms_per_token, prefill_1024_ms,
prefill_1024_cached_last_logits_ms}}, train: {config: tokens_per_s}}.
"""
import json
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
dev = torch.device("cuda")


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def matmuls():
    out = {}
    for m, k, n in [(4096, 4096, 4096), (8192, 768, 2304), (8192, 768, 3072), (8192, 3072, 768),
                    (8192, 768, 50257)]:
        a = torch.randn(m, k, device=dev)
        b = torch.randn(k, n, device=dev)
        s = timed(lambda: torch.matmul(a, b), 10)
        out[f"{m}x{k}x{n}"] = 2 * m * n * k / s / 1e9
    return out


CONFIGS = {
    "gpt2-124M": dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257),
    "6L-6H-384": dict(n_layer=6, n_head=6, n_embd=384, vocab_size=50257),
}


def model_for(name):
    cfg = GPT2Config(n_positions=1024, **CONFIGS[name], resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    return GPT2LMHeadModel(cfg).to(dev).eval()


@torch.no_grad()
def inference(name):
    model = model_for(name)
    prompt = torch.randint(0, 50257, (1, 16), device=dev)

    def decode():
        out = model(prompt, use_cache=True)
        past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(128):
            out = model(tok, past_key_values=past, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            tok.item()
        return (time.perf_counter() - t0) / 128 * 1000

    decode()
    decode_ms = min(decode() for _ in range(3))
    ids = torch.randint(0, 50257, (1, 1024), device=dev)
    prefill_ms = timed(lambda: model(ids, use_cache=False).logits[:, -1].argmax(-1).item(), 5) * 1000
    # As generate() prefills: the KV cache kept, logits for the last position only (Forge's
    # prefill does both). Older transformers lack logits_to_keep.
    def last():
        return model(ids, use_cache=True, logits_to_keep=1).logits[:, -1].argmax(-1).item()

    try:
        prefill_last_ms = timed(last, 5) * 1000
    except TypeError:
        prefill_last_ms = None
    return {"decode_ms_per_token": decode_ms, "prefill_1024_ms": prefill_ms,
            "prefill_1024_cached_last_logits_ms": prefill_last_ms}


def train(name, batch=8, t=1024, steps=5):
    model = model_for(name).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=False)
    x = torch.randint(0, 50257, (batch, t), device=dev)

    def step():
        loss = model(x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    s = timed(step, steps)
    return {"ms_per_step": s * 1000, "tokens_per_s": batch * t / s}


def main():
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "matmul_gflops": matmuls(), "gpt2": {n: inference(n) for n in CONFIGS}}
    if "--train" in sys.argv:
        result["train"] = {n: train(n) for n in CONFIGS}
    print(json.dumps(result, indent=1))
    json.dump(result, open(sys.argv[1], "w"), indent=1)


main()
