"""On CUDA under bf16 autocast: HF's KV cache bytes per token after generate vs kv_cache_bytes_per_token."""
import sys
import torch
from workers.config import ModelSpec
from workers.models import build_model
from workers.probes.throughput import kv_cache_bytes_per_token

device = torch.device(sys.argv[1] if len(sys.argv) > 1 else "cuda")
autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16)  # noqa: E731
for heads, kv in ((4, 4), (4, 2), (4, 1)):
    s = ModelSpec(family="gpt2", depth=2, num_heads=heads, num_kv_heads=kv, embed_dim=32, mlp_dim=64, seq_len=16,
                  vocab_size=64, num_classes=64)
    model = build_model(s).to(device).eval()
    prompt = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad(), autocast():
        out = model.lm.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8, min_new_tokens=8,
                                do_sample=False, use_cache=True, pad_token_id=0, return_dict_in_generate=True)
    tensors = [t for layer in out.cache.layers for t in (layer.keys, layer.values)]
    measured = sum(t.numel() * t.element_size() for t in tensors) / out.cache.get_seq_length()
    print(f"h={heads} kv={kv}: cache dtype {tensors[0].dtype}, HF cache {measured:g} B/token, "
          f"kv_cache_bytes_per_token {kv_cache_bytes_per_token(s, model, autocast)}", flush=True)
