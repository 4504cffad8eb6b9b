#pragma once

// Private to planner/onnx_import.cpp: ONNX types appear here, so no other module includes it.

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ergon::planner::detail {

/// The static shape of a tensor, when every dimension is known.
using StaticShape = std::function<std::optional<std::vector<int64_t>>(const std::string& tensor)>;

/// Folds the shape arithmetic of real exports (Shape, Gather, Slice, Concat, Unsqueeze, Range,
/// ConstantOfShape, Where, integer Add/Mul/Div, Cast, ...) that ONNX's own data propagation
/// leaves unknown: every node with `foldable[i]` whose inputs are constants (small initializers,
/// Constant nodes) or the shapes of tensors `static_shape` knows is evaluated here and replaced,
/// in place, by a Constant node holding its value, so the next round of shape inference sees
/// the Reshape, Expand or Tile target as a constant. Only integer and boolean values and float
/// tensors of a few elements are computed; anything else is left as it is. Never throws on
/// what it cannot evaluate. Returns how many nodes it folded.
int fold_constants(onnx::GraphProto& graph, const std::vector<bool>& foldable,
                   const StaticShape& static_shape);

}  // namespace ergon::planner::detail
