#!/usr/bin/python3
"""Export a model's architecture to ONNX for `ergon plan --onnx FILE`.

  scripts/export_onnx.py --model resnet18 --batch 1 --out resnet18.onnx
  scripts/export_onnx.py --model vit_b_16 --weights stripped --out vit.onnx
  scripts/export_onnx.py --model tiny-cnn --out tests/data/onnx/tiny_cnn.onnx
  scripts/export_onnx.py --corpus tests/data/onnx      # the test corpus and its manifest

Models: any torchvision classification model by name (resnet18, mobilenet_v2, vgg16,
vit_b_16, ...), built with weights=None (nothing is downloaded); two tiny test models,
tiny-cnn and tiny-mlp; and transformer-encoder (torch.nn.TransformerEncoder, 4 layers,
d_model 256, 8 heads, 64 tokens). Weights are random (seeded), so files are reproducible.

Weights (--weights):
  inline    the weights as initializers inside the file (torch.onnx.export's default)
  inputs    export_params=False: every weight is a graph input, no initializer holds data
            (the architecture only; a common way to share a model without its weights)
  stripped  the weights as initializers whose data lives in an external file that is not
            kept (the architecture only, in the initializer form; small constants stay inline)

The export is in training mode (TrainingMode.TRAINING, no constant folding): BatchNormalization
stays a node of its own, as in training. A model with stochastic depth (EfficientNet,
ConvNeXt, Swin) has no ONNX form in training mode (its random draw, bernoulli, does not
export): it is exported in training mode with stochastic depth off (p = 0, the identity it is
at inference), so BatchNormalization and dropout stay as they train. (An eval-mode export is
the last resort: torch.onnx then folds each BatchNormalization into its Conv even without
constant folding, and the file no longer has the model's parameters.) The manifest says which
mode each file was exported in.

--corpus DIR exports the corpus the tests import (tests/data/onnx) and writes DIR/manifest.json:
for each file, torchvision's parameter count and the output shapes of a few named modules, as
PyTorch computed them running the model, next to the ONNX node that produces each.

Needs PyTorch, torchvision and onnx (Debian: python3-torch, python3-torchvision,
python3-onnx); the Ergon build and tests do not.
"""

import argparse
import json
import os
import sys
import tempfile
import warnings

VIEW_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Transpose",
            "Constant", "Shape", "Gather", "Cast", "Concat", "Slice", "Expand"}

# (file stem, model, weights form, image side, extra builder arguments)
CORPUS = [
    ("resnet18_inputs", "resnet18", "inputs", 224, {}),
    ("resnet18_stripped", "resnet18", "stripped", 224, {}),
    ("resnext50_32x4d", "resnext50_32x4d", "inputs", 224, {}),
    ("wide_resnet50_2", "wide_resnet50_2", "inputs", 224, {}),
    ("vgg11", "vgg11", "inputs", 224, {}),
    ("densenet121", "densenet121", "inputs", 224, {}),
    ("densenet121_stripped", "densenet121", "stripped", 224, {}),
    ("mobilenet_v2", "mobilenet_v2", "stripped", 224, {}),
    ("mobilenet_v3_small", "mobilenet_v3_small", "inputs", 224, {}),
    ("efficientnet_b0", "efficientnet_b0", "inputs", 224, {}),
    ("squeezenet1_1_weights", "squeezenet1_1", "inline", 224, {}),
    ("squeezenet1_1_inputs", "squeezenet1_1", "inputs", 224, {}),
    ("shufflenet_v2_x1_0", "shufflenet_v2_x1_0", "inputs", 224, {}),
    ("mnasnet1_0", "mnasnet1_0", "inputs", 224, {}),
    ("regnet_y_400mf", "regnet_y_400mf", "inputs", 224, {}),
    ("googlenet", "googlenet", "inputs", 224, {"aux_logits": False, "init_weights": True}),
    ("inception_v3", "inception_v3", "stripped", 299, {"aux_logits": False, "init_weights": True}),
    ("convnext_tiny", "convnext_tiny", "stripped", 224, {}),
    ("vit_b_16", "vit_b_16", "stripped", 224, {}),
    ("vit_b_16_inputs", "vit_b_16", "inputs", 224, {}),
    ("swin_t", "swin_t", "stripped", 224, {}),
    ("transformer_encoder", "transformer-encoder", "inputs", 0, {}),
]


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


def transformer_encoder(torch):
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024,
                                       batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=4), (64, 256)


CUSTOM = {"tiny-cnn": tiny_cnn, "tiny-mlp": tiny_mlp, "transformer-encoder": transformer_encoder}


def build(torch, name, image, extra):
    if name in CUSTOM:
        return CUSTOM[name](torch)
    import torchvision

    builder = getattr(torchvision.models, name, None)
    if builder is None or not callable(builder) or name.startswith("_"):
        known = sorted(n for n in dir(torchvision.models)
                       if not n.startswith("_") and n.islower()
                       and callable(getattr(torchvision.models, n)))
        sys.exit(f"export_onnx: unknown model '{name}'; own models: "
                 f"{', '.join(sorted(CUSTOM))}; torchvision: {', '.join(known)}")
    return builder(weights=None, **extra), (3, image, image)


def export(torch, model, example, out, weights, opset):
    """Exports in training mode; where stochastic depth stops it (no ONNX form for its random
    draw), in training mode with stochastic depth off (p = 0, the identity it is at
    inference); else in eval mode. Returns the mode used."""
    import onnx

    for mode in ("train", "train, stochastic depth off", "eval"):
        if mode == "train, stochastic depth off":
            depth = [m for m in model.modules() if type(m).__name__ == "StochasticDepth"]
            if not depth:
                continue
            for m in depth:
                m.p = 0.0
        model.train(mode != "eval")
        training = (torch.onnx.TrainingMode.EVAL if mode == "eval"
                    else torch.onnx.TrainingMode.TRAINING)
        try:
            torch.onnx.export(model, example, out, opset_version=opset, input_names=["input"],
                              output_names=["logits"], training=training,
                              do_constant_folding=False, export_params=weights != "inputs")
        except Exception as error:  # torch raises several kinds for an op with no ONNX form
            if mode == "eval":
                raise
            print(f"  no {mode} export ({str(error).splitlines()[0][:120]})", file=sys.stderr)
            continue
        break
    if weights == "stripped":
        m = onnx.load(out)
        data = os.path.basename(out) + ".weights"
        onnx.save_model(m, out, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=data, size_threshold=1024)
        os.remove(os.path.join(os.path.dirname(out) or ".", data))
    else:
        onnx.checker.check_model(onnx.load(out))
    return mode


def module_shapes(torch, model, example):
    """Output shape of every module whose output is one tensor, from running the model."""
    shapes, calls, hooks = {}, {}, []
    for name, module in model.named_modules():
        if not name:
            continue

        def hook(_, __, output, name=name):
            calls[name] = calls.get(name, 0) + 1
            if isinstance(output, torch.Tensor):
                shapes[name] = list(output.shape)

        hooks.append(module.register_forward_hook(hook))
    with torch.no_grad():
        model(example)
    for h in hooks:
        h.remove()
    # A module called twice (torchvision's ResNet blocks reuse one ReLU) has two scopes.
    return {name: shape for name, shape in shapes.items() if calls[name] == 1}


def scope_of(module_path):
    """The node-name prefix torch.onnx gives a module's nodes: layer1.0.conv1 -> /layer1/layer1.0/conv1/."""
    parts, scope = module_path.split("."), []
    for k, part in enumerate(parts):
        scope.append(f"{parts[k - 1]}.{part}" if part.isdigit() and k > 0 else part)
    return "/" + "/".join(scope) + "/"


def named_tensors(onnx_path, shapes, want=4):
    """A few modules spread through the model, each with the last ONNX node in its scope."""
    import onnx

    nodes = onnx.load(onnx_path, load_external_data=False).graph.node
    found = []
    for module, shape in shapes.items():
        prefix = scope_of(module)
        inside = [n for n in nodes if n.name.startswith(prefix)]
        if not inside or inside[-1].op_type in VIEW_OPS or len(inside[-1].output) != 1:
            continue
        found.append({"module": module, "onnx_node": inside[-1].name,
                      "op_type": inside[-1].op_type, "shape": shape})
    # Modules whose last node is also the last node of a larger module say the same thing.
    unique = {}
    for f in found:
        unique.setdefault(f["onnx_node"], f)
    found = list(unique.values())
    if len(found) <= want:
        return found
    step = (len(found) - 1) / (want - 1)
    return [found[round(k * step)] for k in range(want)]


def export_one(torch, name, out, weights, batch, image, opset, extra=None):
    torch.manual_seed(0)
    model, input_shape = build(torch, name, image, extra or {})
    example = torch.randn(batch, *input_shape)
    model.eval()
    shapes = module_shapes(torch, model, example)
    # torch.onnx merges parameters whose values are equal in eval-mode exports (every
    # BatchNorm's bias starts at 0): a little noise keeps each layer's own tensor.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 1e-3)
    mode = export(torch, model, example, out, weights, opset)
    return {
        "file": os.path.basename(out),
        "model": name,
        "builder_arguments": extra or {},
        "weights": weights,
        "export_mode": mode,
        "opset": opset,
        "batch": batch,
        "input_shape": [batch, *input_shape],
        "data_input": "input",
        "parameters": sum(p.numel() for p in model.parameters()),
        "tensors": named_tensors(out, shapes),
        "bytes": os.path.getsize(out),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="tiny-cnn, tiny-mlp, transformer-encoder or a torchvision name")
    parser.add_argument("--batch", type=int, default=1, help="batch size baked into the file")
    parser.add_argument("--image", type=int, default=224, help="image side for torchvision models")
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--weights", choices=["inline", "inputs", "stripped"], default="inline")
    parser.add_argument("--out", help="output .onnx file")
    parser.add_argument("--corpus", metavar="DIR", help="export the test corpus into DIR")
    parser.add_argument("--only", help="with --corpus: export only these stems (comma-separated)")
    args = parser.parse_args()
    if args.batch < 1:
        sys.exit("export_onnx: --batch must be at least 1")
    if bool(args.corpus) == bool(args.model):
        sys.exit("export_onnx: give --model NAME --out FILE, or --corpus DIR")

    warnings.filterwarnings("ignore")  # torch.onnx warns for every BatchNorm counter it drops
    import torch
    import torchvision

    if args.model:
        if not args.out:
            sys.exit("export_onnx: --model needs --out FILE")
        entry = export_one(torch, args.model, args.out, args.weights, args.batch, args.image,
                           args.opset)
        print(f"wrote {args.out} ({entry['export_mode']} mode, {entry['parameters']} parameters)")
        return

    os.makedirs(args.corpus, exist_ok=True)
    manifest_path = os.path.join(args.corpus, "manifest.json")
    entries = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            entries = {e["file"]: e for e in json.load(f)["models"]}
    only = set(args.only.split(",")) if args.only else None
    for stem, name, weights, image, extra in CORPUS:
        if only and stem not in only:
            continue
        out = os.path.join(args.corpus, stem + ".onnx")
        print(f"exporting {stem} ({name}, weights {weights})", file=sys.stderr, flush=True)
        entries[stem + ".onnx"] = export_one(torch, name, out, weights, 1, image, args.opset,
                                             extra)
    manifest = {
        "format": "ergon.onnx-corpus/1",
        "made_with": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                      "script": "scripts/export_onnx.py --corpus"},
        "models": sorted(entries.values(), key=lambda e: e["file"]),
    }
    with tempfile.NamedTemporaryFile("w", dir=args.corpus, delete=False) as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    os.replace(f.name, manifest_path)
    print(f"wrote {manifest_path}: {len(entries)} models", file=sys.stderr)


if __name__ == "__main__":
    main()
