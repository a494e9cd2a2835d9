#!/usr/bin/env python3
"""The fmnist-tiny CLIP model written the way OpenCLIP writes it, in eager PyTorch.

The Python side of bench/clip_speed.sh: same architecture, initialisation, loss, optimizer
(AdamW 0.9/0.98, eps 1e-6, no decay on gains/biases/logit_scale) and synthetic data shape as
`dtrain-clip train --dataset-type synthetic`. Prints one JSON line with samples/s.
"""
import argparse
import json
import math
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker",
           "bag", "ankle boot"]
TEMPLATES = ["a photo of a {}.", "a bad photo of a {}.", "a good photo of a {}.",
             "a photo of the {}.", "a photo of my {}.", "itap of a {}.", "a close photo of a {}.",
             "art of the {}."]


class ResidualAttentionBlock(nn.Module):
    def __init__(self, width, heads, mlp_ratio=4.0):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        hidden = int(width * mlp_ratio)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(width, hidden))
        self.mlp.add_module("gelu", nn.GELU())
        self.mlp.add_module("c_proj", nn.Linear(hidden, width))

    def forward(self, x, attn_mask=None):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False, attn_mask=attn_mask)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width, layers, heads):
        super().__init__()
        self.resblocks = nn.ModuleList([ResidualAttentionBlock(width, heads) for _ in range(layers)])

    def forward(self, x, attn_mask=None):
        for block in self.resblocks:
            x = block(x, attn_mask)
        return x


class VisionTransformer(nn.Module):
    def __init__(self, image_size=28, channels=1, patch=4, width=128, layers=4, heads=4, out=128):
        super().__init__()
        scale = width ** -0.5
        grid = image_size // patch
        self.conv1 = nn.Conv2d(channels, width, patch, stride=patch, bias=False)
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn(grid * grid + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = Transformer(width, layers, heads)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, out))

    def forward(self, x):
        x = self.conv1(x).flatten(2).transpose(1, 2)
        cls = self.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding.to(x.dtype)
        x = self.transformer(self.ln_pre(x))
        return self.ln_post(x[:, 0]) @ self.proj


class CLIP(nn.Module):
    def __init__(self, embed=128, context=32, vocab=259, width=128, layers=2, heads=4):
        super().__init__()
        self.visual = VisionTransformer(out=embed)
        self.token_embedding = nn.Embedding(vocab, width)
        self.positional_embedding = nn.Parameter(torch.empty(context, width))
        self.transformer = Transformer(width, layers, heads)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.empty(width, embed))
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
        self.register_buffer("attn_mask", torch.full((context, context), float("-inf")).triu_(1),
                             persistent=False)
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
        x = self.ln_final(self.transformer(x, self.attn_mask))
        return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

    def forward(self, image, text):
        image_features = F.normalize(self.visual(image), dim=-1)
        text_features = F.normalize(self.encode_text(text), dim=-1)
        return image_features, text_features, self.logit_scale.exp()


def clip_loss(image_features, text_features, logit_scale):
    logits_per_image = logit_scale * image_features @ text_features.T
    labels = torch.arange(image_features.shape[0])
    return (F.cross_entropy(logits_per_image, labels) +
            F.cross_entropy(logits_per_image.T, labels)) / 2


def tokenize(captions, context=32):
    rows = torch.zeros(len(captions), context, dtype=torch.long)
    for i, caption in enumerate(captions):
        ids = [257] + [b + 1 for b in caption.encode()][:context - 2] + [258]
        rows[i, :len(ids)] = torch.tensor(ids)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup-steps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    random.seed(0)
    model = CLIP()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "logit_scale" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "logit_scale" not in n)]
    optimizer = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0},
                                   {"params": decay, "weight_decay": 0.1}],
                                  lr=1e-3, betas=(0.9, 0.98), eps=1e-6)
    times = []
    for step in range(args.warmup_steps + args.steps):
        start = time.perf_counter()
        # Synthetic data, as dtrain-clip's: uniform pixels in [-2, 2), template captions.
        images = torch.rand(args.batch_size, 1, 28, 28) * 4 - 2
        captions = [random.choice(TEMPLATES).format(random.choice(CLASSES))
                    for _ in range(args.batch_size)]
        tokens = tokenize(captions)
        optimizer.zero_grad()
        loss = clip_loss(*model(images, tokens))
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        loss.item()
        if step >= args.warmup_steps:
            times.append(time.perf_counter() - start)
    print(json.dumps({"implementation": "pytorch-eager", "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "batch_size": args.batch_size,
                      "steps": len(times), "step_s": sum(times) / len(times),
                      "median_step_s": sorted(times)[len(times) // 2],
                      "samples_per_s": args.batch_size * len(times) / sum(times)}))


if __name__ == "__main__":
    main()
