"""dtrain-clip's model presets (DESIGN.md, "dtrain-clip") as numbers, and the matmul FLOPs of a
training sample counted from them. Torch-free: bench/clip_reference.py builds its model from these
presets, bench/clip_gpu.py turns samples/s into FLOP/s and MFU with the same count."""

# The presets of DESIGN.md ("dtrain-clip"). tokenizer: byte (vocab 259: 0 pad, 1..256 bytes,
# 257 start, 258 end) or bpe (CLIP's: 49406 start, 49407 end).
PRESETS = {
    "fmnist-tiny": dict(embed=128, image=28, channels=1, patch=4, v_width=128, v_layers=4,
                        v_heads=4, context=32, vocab=259, t_width=128, t_layers=2, t_heads=4,
                        tokenizer="byte", open_clip_config="fmnist-tiny.json"),
    "vit-b-32": dict(embed=512, image=224, channels=3, patch=32, v_width=768, v_layers=12,
                     v_heads=12, context=77, vocab=49408, t_width=512, t_layers=12, t_heads=8,
                     tokenizer="bpe", open_clip_config=None),
}
MLP_RATIO = 4


def transformer_flops(tokens, width, layers):
    """Forward matmul FLOPs of `layers` pre-LN blocks over `tokens` positions (2 per multiply-add):
    q/k/v 6w^2, output projection 2w^2, MLP 16w^2 per position; scores and weighted values
    4*tokens*w per position (every key counted, causal or not)."""
    per_position = (6 + 2 + 4 * MLP_RATIO) * width * width + 4 * tokens * width
    return layers * tokens * per_position


def train_flops_per_sample(model, batch_size, text_tokens=None):
    """Matmul FLOPs of one training sample: 3x the forward (backward = 2x forward), counted from
    the architecture. Vision: the patch embedding (a matmul over each patch), the blocks over
    grid^2 + 1 positions, the projection of the class token. Text: the blocks over `text_tokens`
    positions (default: the whole context, what OpenCLIP computes), the projection of the end
    token. Loss: the batch x batch logits (2 * batch * embed per sample). LayerNorm, softmax,
    GELU and the optimizer are left out (element-wise; a few per cent)."""
    p = PRESETS[model]
    grid = p["image"] // p["patch"]
    patch_in = p["channels"] * p["patch"] * p["patch"]
    vision = (2 * grid * grid * patch_in * p["v_width"] +
              transformer_flops(grid * grid + 1, p["v_width"], p["v_layers"]) +
              2 * p["v_width"] * p["embed"])
    t = text_tokens or p["context"]
    text = transformer_flops(t, p["t_width"], p["t_layers"]) + 2 * p["t_width"] * p["embed"]
    logits = 2 * batch_size * p["embed"]
    return {"forward_vision": vision, "forward_text": text, "forward_logits": logits,
            "train": 3 * (vision + text + logits), "text_tokens": t}
