"""Zero-shot top-1 on the 10,000 Fashion-MNIST test images, the same way for any checkpoint that
open_clip.create_model(MODEL, pretrained=FILE) loads (OpenCLIP's own epoch_N.pt, or dtrain-clip's
weights written by `dtrain-clip export-weights`).

Images: the test idx file, grey replicated to RGB, scaled to [0, 1], normalised with OpenCLIP's
mean/std (what both trainers use for a 3-channel model). Classes: each class's text embedding is
the mean over dtrain-clip's caption templates (the ones its Fashion-MNIST captions use), tokens
from OpenCLIP's tokenizer for MODEL.

usage: zeroshot.py MODEL_CONFIG.json CHECKPOINT [FASHION_MNIST_DIR]
"""
import gzip
import os
import sys

import numpy as np
import open_clip
import torch

CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
           "ankle boot"]
TEMPLATES = ["a photo of a {}.", "a bad photo of a {}.", "a good photo of a {}.",
             "a photo of the {}.", "a photo of my {}.", "itap of a {}.", "a close photo of a {}.",
             "art of the {}."]


def idx(path, header):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=header)


def main():
    config, checkpoint = sys.argv[1], sys.argv[2]
    data = sys.argv[3] if len(sys.argv) > 3 else "/usr/share/datasets/fashion-mnist"
    open_clip.add_model_config(config)
    name = os.path.splitext(os.path.basename(config))[0]
    model = open_clip.create_model(name, pretrained=checkpoint).eval()
    tokenizer = open_clip.get_tokenizer(name)
    images = torch.from_numpy(idx(f"{data}/t10k-images-idx3-ubyte.gz", 16).copy())
    images = images.view(-1, 1, 28, 28).float().div(255).expand(-1, 3, -1, -1)
    mean = torch.tensor(open_clip.OPENAI_DATASET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(open_clip.OPENAI_DATASET_STD).view(1, 3, 1, 1)
    labels = torch.from_numpy(idx(f"{data}/t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
    with torch.no_grad():
        classes = []
        for c in CLASSES:
            t = model.encode_text(tokenizer([tpl.format(c) for tpl in TEMPLATES]), normalize=True)
            classes.append(torch.nn.functional.normalize(t.mean(0), dim=0))
        classes = torch.stack(classes)
        correct = 0
        for start in range(0, len(labels), 500):
            x = (images[start:start + 500] - mean) / std
            f = model.encode_image(x, normalize=True)
            correct += (f @ classes.T).argmax(1).eq(labels[start:start + 500]).sum().item()
    print(f"zeroshot_top1 {correct / len(labels):.4f}")


if __name__ == "__main__":
    main()
