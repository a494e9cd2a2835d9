"""Weights move between dtrain-clip and the real OpenCLIP with the same features.

Both directions, fp32 on the CPU, max abs difference of the L2-normalised features <= 1e-4:
  dtrain-clip -> OpenCLIP: a fresh dtrain-clip model exported with ExportOpenClipWeights is loaded
      by open_clip.create_model(..., pretrained=FILE);
  OpenCLIP -> dtrain-clip: a fresh OpenCLIP model saved from Python (safetensors, and a torch.save
      training checkpoint with "module." keys) is loaded by dtrain-clip (LoadOpenClipWeights).
For fmnist-tiny (1 channel, byte tokens; tests/open_clip/fmnist-tiny.json is its OpenCLIP config)
and ViT-B-32 (OpenCLIP's own config; its BPE vocabulary, shipped in open_clip_torch, must give
dtrain's tokenizer the same tokens as open_clip.tokenize).

usage: open_clip_interchange.py CLIP_WEIGHTS_TOOL SCRATCH_DIR
"""
import os
import subprocess
import sys

import open_clip
import torch
from safetensors.torch import load_file, save_file

TOOL, SCRATCH = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCE = 1e-4
BPE_VOCAB = os.path.join(os.path.dirname(open_clip.__file__), "bpe_simple_vocab_16e6.txt.gz")
CAPTIONS = ["a photo of a sneaker.", "A  blurry photo of the ankle-boot!", "a t-shirt & trouser"]
failures = []


def tool(*args):
    run = subprocess.run([TOOL, *args], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"clip_weights_tool {' '.join(args)} failed:\n{run.stderr}")


def check(what, ours, theirs):
    diff = (ours - theirs).abs().max().item()
    print(f"{what}: max abs difference {diff:.2e}")
    if not diff <= TOLERANCE:
        failures.append(f"{what}: {diff:.2e} > {TOLERANCE}")


def openclip_features(model, images, tokens):
    with torch.no_grad():
        return (model.encode_image(images, normalize=True),
                model.encode_text(tokens, normalize=True))


def byte_tokens(texts, context=32):
    rows = []
    for t in texts:
        ids = [257] + [b + 1 for b in t.encode()][: context - 2] + [258]
        rows.append(ids + [0] * (context - len(ids)))
    return torch.tensor(rows, dtype=torch.int64)


def case(name, tool_model, openclip_name, grey, images, tokens, texts=None):
    print(f"== {name}")
    torch.manual_seed(0)
    inputs = os.path.join(SCRATCH, f"{name}-inputs.safetensors")
    # dtrain-clip's towers take what they were built for: 1 channel for a grey model.
    save_file({"images": images[:, :1].contiguous() if grey else images, "tokens": tokens}, inputs,
              metadata={f"text{i}": t for i, t in enumerate(texts or [])})
    rgb = images[:, :1].expand(-1, 3, -1, -1).contiguous() if grey else images

    # dtrain-clip -> OpenCLIP
    weights = os.path.join(SCRATCH, f"{name}-from-dtrain.safetensors")
    feats = os.path.join(SCRATCH, f"{name}-dtrain-features.safetensors")
    tool("export", *tool_model, "--seed", "7", "--inputs", inputs, "--weights", weights,
         "--features", feats)
    model = open_clip.create_model(openclip_name, pretrained=weights).eval()
    image_f, text_f = openclip_features(model, rgb, tokens)
    ours = load_file(feats)
    check(f"{name} dtrain->open_clip image", ours["image_features"], image_f)
    check(f"{name} dtrain->open_clip text", ours["text_features"], text_f)

    # OpenCLIP -> dtrain-clip, as safetensors and as a DDP training checkpoint
    model = open_clip.create_model(openclip_name).eval()
    image_f, text_f = openclip_features(model, rgb, tokens)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    st = os.path.join(SCRATCH, f"{name}-from-open_clip.safetensors")
    save_file(state, st)
    pt = os.path.join(SCRATCH, f"{name}-open_clip-checkpoint.pt")
    torch.save({"epoch": 1, "name": name, "state_dict": {"module." + k: v for k, v in state.items()}},
               pt)
    for path in (st, pt):
        extra = ["--bpe-vocab", BPE_VOCAB] if texts else []
        tool("features", *tool_model, "--weights", path, "--inputs", inputs, "--features", feats,
             *extra)
        ours = load_file(feats)
        kind = os.path.basename(path).rsplit(".", 1)[1]
        check(f"{name} open_clip({kind})->dtrain image", ours["image_features"], image_f)
        check(f"{name} open_clip({kind})->dtrain text", ours["text_features"], text_f)
        if texts:
            same = torch.equal(ours["bpe_tokens"], tokens)
            print(f"{name} BPE tokens equal to open_clip.tokenize: {same}")
            if not same:
                failures.append(f"{name}: dtrain's BPE tokens {ours['bpe_tokens'].tolist()} "
                                f"differ from open_clip's {tokens.tolist()}")


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    torch.manual_seed(0)
    open_clip.add_model_config(os.path.join(HERE, "fmnist-tiny.json"))
    grey = torch.randn(4, 1, 28, 28)
    case("fmnist-tiny", ["--model", "fmnist-tiny"], "fmnist-tiny", True,
         grey.expand(-1, 3, -1, -1).contiguous(), byte_tokens(CAPTIONS + ["a bag."]))
    images = torch.randn(2, 3, 224, 224)
    tokens = open_clip.get_tokenizer("ViT-B-32")(CAPTIONS[:2])
    case("vit-b-32", ["--model", "vit-b-32"], "ViT-B-32", False, images, tokens, CAPTIONS[:2])
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("all features within", TOLERANCE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
