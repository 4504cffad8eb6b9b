#!/usr/bin/env python3
"""Export a model's architecture to ONNX for `ergon plan --onnx FILE`.

  scripts/export_onnx.py --model resnet18 --batch 1 --out resnet18.onnx
  scripts/export_onnx.py --model tiny-cnn --out tests/data/onnx/tiny_cnn.onnx

Models: any torchvision classification model by name (resnet18, mobilenet_v2, vgg16,
vit_b_16, ...), built with weights=None (architecture only, nothing is downloaded), and two
tiny test models, tiny-cnn and tiny-mlp. Weights are random (seeded), so files are
reproducible.

The export is in training mode (TrainingMode.TRAINING, no constant folding): BatchNormalization
stays a node of its own, as in training, instead of being folded into the preceding Conv as an
inference export would. Needs PyTorch, torchvision and onnx (Debian: python3-torch,
python3-torchvision, python3-onnx); the Ergon build and tests do not.
"""

import argparse
import sys


def tiny_cnn(torch):
    nn = torch.nn

    class TinyCnn(nn.Module):
        """conv-bn-relu-maxpool-conv-bn-relu-add-globalavgpool-flatten-linear on 3x16x16."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, kernel_size=3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu1 = nn.ReLU()
            self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
            self.conv2 = nn.Conv2d(8, 8, kernel_size=3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(8)
            self.relu2 = nn.ReLU()
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 10)

        def forward(self, x):
            x = self.pool(self.relu1(self.bn1(self.conv1(x))))
            y = self.relu2(self.bn2(self.conv2(x)))
            y = self.avgpool(y + x)
            return self.fc(torch.flatten(y, 1))

    return TinyCnn(), (3, 16, 16)


def tiny_mlp(torch):
    nn = torch.nn
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.1),
                          nn.Linear(32, 10), nn.Softmax(dim=1))
    return model, (1, 8, 8)


TINY = {"tiny-cnn": tiny_cnn, "tiny-mlp": tiny_mlp}


def build(torch, name, image):
    if name in TINY:
        return TINY[name](torch)
    import torchvision

    builder = getattr(torchvision.models, name, None)
    if builder is None or not callable(builder) or name.startswith("_"):
        known = sorted(n for n in dir(torchvision.models)
                       if not n.startswith("_") and n.islower()
                       and callable(getattr(torchvision.models, n)))
        sys.exit(f"export_onnx: unknown model '{name}'; tiny models: "
                 f"{', '.join(sorted(TINY))}; torchvision: {', '.join(known)}")
    return builder(weights=None), (3, image, image)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="tiny-cnn, tiny-mlp or a torchvision name")
    parser.add_argument("--batch", type=int, default=1, help="batch size baked into the file")
    parser.add_argument("--image", type=int, default=224, help="image side for torchvision models")
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--out", required=True, help="output .onnx file")
    args = parser.parse_args()
    if args.batch < 1:
        sys.exit("export_onnx: --batch must be at least 1")

    import torch
    import onnx

    torch.manual_seed(0)
    model, input_shape = build(torch, args.model, args.image)
    model.train()
    example = torch.randn(args.batch, *input_shape)
    torch.onnx.export(model, example, args.out, opset_version=args.opset,
                      input_names=["input"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    onnx.checker.check_model(onnx.load(args.out))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
