"""Extract ResNet-50 last-conv-layer features (14×14 = 196 regions × 2048) for Multi30k images,
in the layout of ``--task multimodal_translation``: ``{split}.img.npy`` of shape (n, 196, 2048),
float16, written row by row into a memory-mapped file (never held in RAM).

Needs torchvision and Pillow (not dependencies of fairseq-ctx). Usage:
  python extract_resnet_features.py --image-list train_images.txt --image-dir flickr30k-images \
      --out data-bin/train.img.npy [--device cuda]
``--image-list``: one image file name per line, in the order of the sentences of that split.
"""
import argparse

import numpy as np
import torch


def main() -> None:
    import torchvision
    from PIL import Image

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image-list", required=True)
    parser.add_argument("--image-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    names = open(args.image_list, encoding="utf-8").read().split()
    weights = torchvision.models.ResNet50_Weights.IMAGENET1K_V2
    resnet = torchvision.models.resnet50(weights=weights).eval().to(args.device)
    trunk = torch.nn.Sequential(*list(resnet.children())[:-2])  # drop avgpool + fc: (B, 2048, 14, 14) at 448px
    transform = torchvision.transforms.Compose([
        torchvision.transforms.Resize(448), torchvision.transforms.CenterCrop(448),
        torchvision.transforms.ToTensor(),
        torchvision.transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    out = np.lib.format.open_memmap(args.out, mode="w+", dtype=np.float16, shape=(len(names), 196, 2048))
    with torch.no_grad():
        for start in range(0, len(names), args.batch_size):
            batch = torch.stack([transform(Image.open(f"{args.image_dir}/{n}").convert("RGB"))
                                 for n in names[start:start + args.batch_size]]).to(args.device)
            features = trunk(batch).flatten(2).transpose(1, 2)  # (B, 196, 2048)
            out[start:start + len(batch)] = features.cpu().numpy().astype(np.float16)
    out.flush()
    print(f"wrote {args.out}: {out.shape}")


if __name__ == "__main__":
    main()
