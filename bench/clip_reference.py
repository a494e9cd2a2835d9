#!/usr/bin/env python3
"""dtrain-clip's model as a PyTorch program: the reference bench/clip_gpu.sh measures it against.

OpenCLIP's architecture (pre-LN residual attention blocks, class-token pooling, end-of-text
pooling, symmetric contrastive loss) with attention through F.scaled_dot_product_attention (the
text tower with is_causal, as dtrain-clip), dtrain-clip's initialisation (nn.MultiheadAttention's
for the blocks, OpenCLIP's init_parameters() for the text tower), its AdamW (0.9/0.98, eps 1e-6,
wd 0.1 never on gains, biases or logit_scale; fused=True on CUDA), warmup + cosine learning rate
and the logit_scale clamp after every step. bf16 autocast on CUDA (`--precision amp_bf16`).

Modes:
  eager                    the model as written
  compile                  torch.compile(step) with the default mode
  compile-reduce-overhead  torch.compile(step, mode="reduce-overhead"): CUDA graphs (GPU only)
  open_clip                the real open_clip_torch model and ClipLoss (when `import open_clip`
                           works), same optimizer, data and precision

Data is synthetic and already on the device, as dtrain-clip hands it to the model on a GPU:
8-bit pixels normalised on the device every step, token rows (start, random ids, end at a
position between 6 and 11, padding: the length of the Fashion-MNIST captions). Two batches are
made once and taken in turn. The whole 77-position context is computed (OpenCLIP does); dtrain-clip
cuts its text tower at the batch's longest caption.

Prints one JSON line: samples/s over the timed steps, peak memory, warmup (compile) time.
The presets and the FLOP count come from bench/clip_flops.py.
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from clip_flops import MLP_RATIO, PRESETS

MODES = ["eager", "compile", "compile-reduce-overhead", "open_clip"]


class Attention(nn.Module):
    """nn.MultiheadAttention's parameters and initialisation (packed in_proj, zero biases),
    computed with scaled_dot_product_attention."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * width, width))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * width))
        self.out_proj = nn.Linear(width, width)
        nn.init.xavier_uniform_(self.in_proj_weight)
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, x, causal):
        b, n, w = x.shape
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)
        q, k, v = qkv.view(b, n, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.out_proj(out.transpose(1, 2).reshape(b, n, w))


class ResidualAttentionBlock(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(width, width * MLP_RATIO))
        self.mlp.add_module("gelu", nn.GELU())
        self.mlp.add_module("c_proj", nn.Linear(width * MLP_RATIO, width))

    def forward(self, x, causal=False):
        x = x + self.attn(self.ln_1(x), causal)
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width, layers, heads):
        super().__init__()
        self.resblocks = nn.ModuleList([ResidualAttentionBlock(width, heads) for _ in range(layers)])

    def forward(self, x, causal=False):
        for block in self.resblocks:
            x = block(x, causal)
        return x


class VisionTransformer(nn.Module):
    def __init__(self, p):
        super().__init__()
        width, scale = p["v_width"], p["v_width"] ** -0.5
        grid = p["image"] // p["patch"]
        self.conv1 = nn.Conv2d(p["channels"], width, p["patch"], stride=p["patch"], bias=False)
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn(grid * grid + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = Transformer(width, p["v_layers"], p["v_heads"])
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, p["embed"]))

    def forward(self, x):
        x = self.conv1(x).flatten(2).transpose(1, 2)
        cls = self.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding.to(x.dtype)
        x = self.transformer(self.ln_pre(x))
        return self.ln_post(x[:, 0]) @ self.proj


class CLIP(nn.Module):
    def __init__(self, p):
        super().__init__()
        width, layers = p["t_width"], p["t_layers"]
        self.visual = VisionTransformer(p)
        self.token_embedding = nn.Embedding(p["vocab"], width)
        self.positional_embedding = nn.Parameter(torch.empty(p["context"], width))
        self.transformer = Transformer(width, layers, p["t_heads"])
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.empty(width, p["embed"]))
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
        # OpenCLIP's TextTransformer.init_parameters(), as dtrain-clip's text tower.
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)
        proj_std = (width ** -0.5) * ((2 * layers) ** -0.5)
        for block in self.transformer.resblocks:
            nn.init.normal_(block.attn.in_proj_weight, std=width ** -0.5)
            nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
            nn.init.normal_(block.mlp.c_fc.weight, std=(2 * width) ** -0.5)
            nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)
        nn.init.normal_(self.text_projection, std=width ** -0.5)

    def encode_text(self, text):
        x = self.token_embedding(text) + self.positional_embedding
        x = self.ln_final(self.transformer(x, causal=True))
        return x[torch.arange(x.shape[0], device=x.device), text.argmax(dim=-1)] @ self.text_projection

    def forward(self, image, text):
        image_features = F.normalize(self.visual(image), dim=-1)
        text_features = F.normalize(self.encode_text(text), dim=-1)
        return image_features, text_features, self.logit_scale.exp()


def clip_loss(image_features, text_features, logit_scale):
    """Symmetric cross-entropy over the batch, logits in float32 (as dtrain-clip)."""
    logits = (logit_scale * image_features @ text_features.T).float()
    labels = torch.arange(image_features.shape[0], device=logits.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


def make_open_clip_model(model, device):
    import open_clip  # noqa: F401 (only this mode needs it)
    if not hasattr(open_clip, "create_model"):  # bench/open_clip/ seen as a namespace package
        raise ModuleNotFoundError("No module named 'open_clip' (open_clip_torch is not installed)")
    if model == "vit-b-32":
        name = "ViT-B-32"
    else:  # fmnist-tiny as an OpenCLIP config (its vision tower takes RGB)
        here = os.path.dirname(os.path.abspath(__file__))
        open_clip.add_model_config(os.path.join(here, "..", "tests", "open_clip",
                                                PRESETS[model]["open_clip_config"]))
        name = "fmnist-tiny"
    net = open_clip.create_model(name, pretrained=None, device=device)
    loss = open_clip.ClipLoss()
    return net, lambda i, t, s: loss(i, t, s)


def synthetic_batches(p, batch, channels, device, generator, count=2):
    """`count` batches on the device: uint8 pixels and token rows shaped like the captions."""
    images = torch.randint(0, 256, (count, batch, channels, p["image"], p["image"]),
                           dtype=torch.uint8, generator=generator)
    if p["tokenizer"] == "bpe":
        start, end, low, high = 49406, 49407, 1, 49406
    else:
        start, end, low, high = 257, 258, 1, 257
    tokens = torch.randint(low, high, (count, batch, p["context"]), generator=generator)
    ends = torch.randint(6, 12, (count, batch, 1), generator=generator)
    positions = torch.arange(p["context"]).expand_as(tokens)
    tokens = torch.where(positions == ends, torch.full_like(tokens, end), tokens)
    tokens = torch.where(positions > ends, torch.zeros_like(tokens), tokens)
    tokens[..., 0] = start
    return images.to(device), tokens.to(device)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(PRESETS), default="vit-b-32")
    parser.add_argument("--mode", choices=MODES, default="eager")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", choices=["amp_bf16", "fp32"], default=None,
                        help="default: amp_bf16 on CUDA, fp32 on the CPU")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=40, help="timed steps")
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=10, help="learning-rate warmup steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile-steps", default="",
                        help="A-B: torch.profiler over steps A to B (from 1, as dtrain-clip's)")
    parser.add_argument("--profile-file", default="reference.pt.trace.json")
    args = parser.parse_args()
    profile_range = None
    if args.profile_steps:
        first, _, last = args.profile_steps.partition("-")
        profile_range = (int(first), int(last or first))

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("clip_reference: --device cuda but torch sees no GPU")
    if args.mode == "compile-reduce-overhead" and not cuda:
        sys.exit("clip_reference: compile-reduce-overhead records CUDA graphs: GPU only")
    precision = args.precision or ("amp_bf16" if cuda else "fp32")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if cuda:
        if device.index is not None:  # set_device refuses a plain "cuda"
            torch.cuda.set_device(device)
        device = torch.device("cuda", torch.cuda.current_device())
    torch.manual_seed(args.seed)
    p = PRESETS[args.model]

    channels = p["channels"]
    if args.mode == "open_clip":
        model, loss_fn = make_open_clip_model(args.model, device)
        channels = 3
    else:
        model, loss_fn = CLIP(p).to(device), clip_loss
    model.train()
    params = list(model.named_parameters())
    decay = [t for n, t in params if t.ndim >= 2 and "logit_scale" not in n]
    no_decay = [t for n, t in params if not (t.ndim >= 2 and "logit_scale" not in n)]
    optimizer = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0},
                                   {"params": decay, "weight_decay": 0.1}],
                                  lr=args.lr, betas=(0.9, 0.98), eps=1e-6,
                                  **({"fused": True} if cuda else {}))

    generator = torch.Generator().manual_seed(args.seed)
    images_u8, tokens = synthetic_batches(p, args.batch_size, channels, device, generator)
    bf16 = precision == "amp_bf16"

    def forward_loss(pixels, text):
        images = pixels.float().mul_(1 / 63.75).sub_(2.0)  # [0, 255] -> [-2, 2)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            return loss_fn(*model(images, text))

    step_fn = forward_loss
    if args.mode == "compile":
        step_fn = torch.compile(forward_loss)
    elif args.mode == "compile-reduce-overhead":
        step_fn = torch.compile(forward_loss, mode="reduce-overhead")

    total = args.warmup_steps + args.steps
    lr_steps = max(total - args.warmup, 1)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    losses = []
    prof = None
    start = time.perf_counter()
    timed_start = warmup_s = None
    for step in range(total):
        if step == args.warmup_steps:
            sync()
            timed_start = time.perf_counter()
            warmup_s = timed_start - start
        lr = (args.lr * (step + 1) / args.warmup if step < args.warmup else
              0.5 * args.lr * (1 + math.cos(math.pi * (step - args.warmup) / lr_steps)))
        for group in optimizer.param_groups:
            group["lr"] = lr
        if profile_range and step + 1 == profile_range[0]:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU] + (
                [torch.profiler.ProfilerActivity.CUDA] if cuda else []))
            prof.__enter__()
        if args.mode == "compile-reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        optimizer.zero_grad(set_to_none=True)
        loss = step_fn(images_u8[step % 2], tokens[step % 2])
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        if step in (0, total - 1):
            losses.append(loss.detach().float().item())
        if prof is not None and step + 1 == profile_range[1]:
            sync()
            prof.__exit__(None, None, None)
            prof.export_chrome_trace(args.profile_file)
            prof = None
    sync()
    timed_s = time.perf_counter() - timed_start if timed_start else float("nan")

    result = {
        "implementation": args.mode, "model": args.model, "device": str(device),
        "precision": precision, "batch_size": args.batch_size, "steps": args.steps,
        "warmup_steps": args.warmup_steps, "warmup_s": warmup_s, "timed_s": timed_s,
        "step_ms": 1000 * timed_s / args.steps,
        "samples_per_s": args.batch_size * args.steps / timed_s,
        "first_loss": losses[0], "last_loss": losses[-1], "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "parameters": sum(t.numel() for _, t in params),
        # Linux reports ru_maxrss in KiB.
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if cuda:
        result["max_memory_allocated_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
        result["max_memory_reserved_mib"] = torch.cuda.max_memory_reserved(device) / 2**20
        result["gpu"] = torch.cuda.get_device_name(device)
    if not all(math.isfinite(x) for x in losses):
        print(json.dumps(result))
        sys.exit(f"clip_reference: loss is not finite: {losses}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
