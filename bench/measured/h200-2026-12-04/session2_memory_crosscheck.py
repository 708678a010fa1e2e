"""The memory probe (S + P, workers/probes/memory.py) beside the allocator's absolute peak over the same step
in a process that holds nothing else: ViT-B/16, bf16 autocast, AdamW state present, gradients None."""
import torch
from workers.config import TrainSpec
from workers.gpu_check import CUDA_MODE, generated_batch
from workers.models import build_model
from workers.probes.memory import peak_train_step_memory, training_step_tensors
from workers.train import make_context, train_step

device = torch.device("cuda")
spec = CUDA_MODE.spec
for batch in (32, 128, 256):
    model = build_model(spec).to(device)
    ctx = make_context(model, TrainSpec(batch_size=batch, warmup_steps=0, amp_bf16=True), device, total_steps=10**9)
    images, labels = generated_batch(spec, batch, device, seed=1)
    for _ in range(2):
        train_step(ctx, images, labels)
    ctx.optimizer.zero_grad(set_to_none=True)
    held = training_step_tensors(ctx.model, ctx.optimizer, [images, labels])
    probe, method = peak_train_step_memory(lambda: train_step(ctx, images, labels), device, held)
    absolute = torch.cuda.max_memory_allocated(device)
    params = sum(p.numel() for p in model.parameters())
    print(f"batch {batch}: probe {probe / 2**30:.3f} GiB, allocator absolute peak {absolute / 2**30:.3f} GiB, "
          f"probe/absolute {probe / absolute:.4f}, params {params}, probe B/param {probe / params:.1f}", flush=True)
    del model, ctx, images, labels, held
    torch.cuda.empty_cache()
