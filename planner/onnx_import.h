#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "planner/graph.h"

namespace ergon::planner {

/// The forward graph of an ONNX model (e.g. from scripts/export_onnx.py), with FLOPs, output
/// bytes and parameter bytes computed from the shapes ONNX shape inference gives every tensor,
/// under the conventions of the zoo (planner/zoo.cpp): a multiply-add is 2 FLOPs, a weighted
/// layer's backward is 2x its forward (1x when it reads only the data batch), batchnorm running
/// statistics are buffers, not parameters. The graph is named after the file's stem.
///
/// `batch` > 0 replaces the first dimension of every graph input (the exported batch, fixed or
/// symbolic) and re-infers all shapes; 0 keeps the file's sizes, which must then all be fixed.
/// A model that bakes the batch into a constant (a Reshape to (1, -1), say) cannot be
/// re-batched: its shapes then fail to infer or stay at the exported batch.
///
/// Weights are parameters, never activations: initializers, and graph inputs that an op reads
/// as its weight, bias or buffer (an export with export_params=False). The data input is the
/// input that is not a weight; `data_inputs` names it where the file alone cannot tell (ViT's
/// class token and position embedding are added to activations like data), and the import
/// refuses, naming the candidates, when it is empty and more than one input remains.
/// Shape arithmetic that ONNX's inference cannot see through (Shape, Gather, Concat, ...
/// feeding a Reshape or Expand) is folded to constants and inference runs again. Initializers are parameters, never activations; Constant, Shape and anything computed only
/// from them is folded away. Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Identity and
/// Dropout are views here: they produce no op, their consumers read their producer. Nodes that
/// do not lead to the first graph output (the logits) are left out, so the last op produces it.
///
/// Throws InputError "<path>: <problem>" when the file cannot be read, is not a valid ONNX
/// model, uses an op type the importer does not model (naming the op type and the node), or
/// has a tensor whose shape cannot be inferred; and for a batch < 0 or > 65536.
/// `import_note` of the result says in one line what was left out and why.
ForwardGraph import_onnx(const std::filesystem::path& path, int batch = 0,
                         const std::vector<std::string>& data_inputs = {});

/// import_onnx of a model held in memory (what the fuzzer feeds); `name` stands for the path
/// in messages and names the graph. No re-batching check: `batch` 0 or the exported batch.
ForwardGraph import_onnx_bytes(std::string_view bytes, const std::string& name, int batch = 0,
                               const std::vector<std::string>& data_inputs = {});

}  // namespace ergon::planner
