#include "planner/onnx_fold.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>

namespace ergon::planner::detail {
namespace {

constexpr std::size_t kMaxIntElements = 1 << 16;  // shape arithmetic is small
constexpr std::size_t kMaxFloatElements = 64;     // scalars such as an attention scale

/// A small constant tensor: integers (and booleans) exactly, floats as doubles.
struct Value {
  int32_t type = 0;
  std::vector<int64_t> dims;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  [[nodiscard]] bool floating() const {
    return type == onnx::TensorProto_DataType_FLOAT || type == onnx::TensorProto_DataType_DOUBLE;
  }
  [[nodiscard]] std::size_t size() const { return floating() ? floats.size() : ints.size(); }
  [[nodiscard]] double at(std::size_t k) const {
    return floating() ? floats[k] : static_cast<double>(ints[k]);
  }
  [[nodiscard]] int64_t int_at(std::size_t k) const {
    return floating() ? static_cast<int64_t>(floats[k]) : ints[k];
  }
  void push(double v) {
    if (floating()) floats.push_back(v);
    else ints.push_back(static_cast<int64_t>(v));
  }
  void push_from(const Value& from, std::size_t k) {
    if (floating()) floats.push_back(from.at(k));
    else ints.push_back(from.int_at(k));
  }
};

bool is_integer_type(int32_t t) {
  using T = onnx::TensorProto_DataType;
  return t == T::TensorProto_DataType_INT64 || t == T::TensorProto_DataType_INT32 ||
         t == T::TensorProto_DataType_INT16 || t == T::TensorProto_DataType_INT8 ||
         t == T::TensorProto_DataType_UINT8 || t == T::TensorProto_DataType_BOOL;
}

bool supported_type(int32_t t) {
  return is_integer_type(t) || t == onnx::TensorProto_DataType_FLOAT ||
         t == onnx::TensorProto_DataType_DOUBLE;
}

std::optional<std::size_t> count(const std::vector<int64_t>& dims) {
  std::size_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<std::size_t>(d), &n)) return std::nullopt;
  }
  return n;
}

bool small_enough(int32_t type, std::size_t n) {
  return n <= (is_integer_type(type) ? kMaxIntElements : kMaxFloatElements);
}

template <class T>
bool read_raw(const std::string& raw, std::size_t n, std::vector<T>& out) {
  if (raw.size() != n * sizeof(T)) return false;
  out.resize(n);
  if (n > 0) std::memcpy(out.data(), raw.data(), raw.size());
  return true;
}

std::optional<Value> from_tensor(const onnx::TensorProto& t) {
  if (!supported_type(t.data_type()) || t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
    return std::nullopt;
  Value v;
  v.type = t.data_type();
  v.dims.assign(t.dims().begin(), t.dims().end());
  const auto n = count(v.dims);
  if (!n || !small_enough(v.type, *n)) return std::nullopt;
  using T = onnx::TensorProto_DataType;
  const bool raw = t.has_raw_data();
  switch (t.data_type()) {
    case T::TensorProto_DataType_INT64: {
      if (raw) {
        if (!read_raw(t.raw_data(), *n, v.ints)) return std::nullopt;
      } else {
        v.ints.assign(t.int64_data().begin(), t.int64_data().end());
      }
      break;
    }
    case T::TensorProto_DataType_INT32: {
      std::vector<int32_t> i32;
      if (raw) {
        if (!read_raw(t.raw_data(), *n, i32)) return std::nullopt;
      } else {
        i32.assign(t.int32_data().begin(), t.int32_data().end());
      }
      v.ints.assign(i32.begin(), i32.end());
      break;
    }
    case T::TensorProto_DataType_FLOAT: {
      std::vector<float> f;
      if (raw) {
        if (!read_raw(t.raw_data(), *n, f)) return std::nullopt;
      } else {
        f.assign(t.float_data().begin(), t.float_data().end());
      }
      v.floats.assign(f.begin(), f.end());
      break;
    }
    case T::TensorProto_DataType_DOUBLE: {
      if (raw) {
        if (!read_raw(t.raw_data(), *n, v.floats)) return std::nullopt;
      } else {
        v.floats.assign(t.double_data().begin(), t.double_data().end());
      }
      break;
    }
    default: {  // int16, int8, uint8, bool: one byte or two raw, else int32_data
      if (raw) {
        const std::size_t width = t.raw_data().size() / std::max<std::size_t>(*n, 1);
        if (*n > 0 && (width == 0 || width > 2 || t.raw_data().size() != *n * width))
          return std::nullopt;
        for (std::size_t k = 0; k < *n; ++k) {
          if (width == 1) {
            const auto byte = static_cast<uint8_t>(t.raw_data()[k]);
            v.ints.push_back(t.data_type() == T::TensorProto_DataType_INT8
                                 ? static_cast<int8_t>(byte)
                                 : byte);
          } else {
            int16_t s = 0;
            std::memcpy(&s, t.raw_data().data() + 2 * k, 2);
            v.ints.push_back(s);
          }
        }
      } else {
        v.ints.assign(t.int32_data().begin(), t.int32_data().end());
      }
    }
  }
  if (v.size() != *n) return std::nullopt;
  if (v.type == T::TensorProto_DataType_BOOL)
    for (auto& b : v.ints) b = b != 0 ? 1 : 0;
  return v;
}

onnx::TensorProto to_tensor(const Value& v) {
  onnx::TensorProto t;
  t.set_data_type(v.type);
  for (int64_t d : v.dims) t.add_dims(d);
  using T = onnx::TensorProto_DataType;
  switch (v.type) {
    case T::TensorProto_DataType_INT64:
      for (int64_t x : v.ints) t.add_int64_data(x);
      break;
    case T::TensorProto_DataType_FLOAT:
      for (double x : v.floats) t.add_float_data(static_cast<float>(x));
      break;
    case T::TensorProto_DataType_DOUBLE:
      for (double x : v.floats) t.add_double_data(x);
      break;
    default:
      for (int64_t x : v.ints) t.add_int32_data(static_cast<int32_t>(x));
  }
  return t;
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& node, const char* name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t int_attr(const onnx::NodeProto& node, const char* name, int64_t fallback) {
  const auto* a = attribute(node, name);
  return a != nullptr && a->type() == onnx::AttributeProto_AttributeType_INT ? a->i() : fallback;
}

std::optional<std::vector<int64_t>> ints_attr(const onnx::NodeProto& node, const char* name) {
  const auto* a = attribute(node, name);
  if (a == nullptr || a->type() != onnx::AttributeProto_AttributeType_INTS) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<Value> constant_node_value(const onnx::NodeProto& node) {
  for (const auto& a : node.attribute()) {
    Value v;
    if (a.name() == "value" && a.has_t()) return from_tensor(a.t());
    if (a.name() == "value_int") {
      v.type = onnx::TensorProto_DataType_INT64;
      v.ints = {a.i()};
      return v;
    }
    if (a.name() == "value_ints") {
      v.type = onnx::TensorProto_DataType_INT64;
      v.ints.assign(a.ints().begin(), a.ints().end());
      v.dims = {static_cast<int64_t>(v.ints.size())};
      return small_enough(v.type, v.ints.size()) ? std::optional(v) : std::nullopt;
    }
    if (a.name() == "value_float") {
      v.type = onnx::TensorProto_DataType_FLOAT;
      v.floats = {a.f()};
      return v;
    }
    if (a.name() == "value_floats") {
      v.type = onnx::TensorProto_DataType_FLOAT;
      v.floats.assign(a.floats().begin(), a.floats().end());
      v.dims = {static_cast<int64_t>(v.floats.size())};
      return small_enough(v.type, v.floats.size()) ? std::optional(v) : std::nullopt;
    }
  }
  return std::nullopt;
}

std::vector<std::size_t> strides(const std::vector<int64_t>& dims) {
  std::vector<std::size_t> s(dims.size(), 1);
  for (std::size_t d = dims.size(); d-- > 1;) s[d - 1] = s[d] * static_cast<std::size_t>(dims[d]);
  return s;
}

/// Numpy broadcasting of several shapes; nullopt when they do not broadcast.
std::optional<std::vector<int64_t>> broadcast(const std::vector<const std::vector<int64_t>*>& shapes) {
  std::size_t rank = 0;
  for (const auto* s : shapes) rank = std::max(rank, s->size());
  std::vector<int64_t> out(rank, 1);
  for (const auto* s : shapes) {
    for (std::size_t k = 0; k < s->size(); ++k) {
      int64_t& o = out[rank - s->size() + k];
      const int64_t d = (*s)[k];
      if (d == o || d == 1) continue;
      if (o != 1) return std::nullopt;
      o = d;
    }
  }
  return out;
}

/// The flat index into `in` (broadcast to `out`) of the flat output index `k`.
std::size_t broadcast_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                            std::size_t k) {
  const auto in_strides = strides(in);
  std::size_t index = 0;
  for (std::size_t d = out.size(); d-- > 0;) {
    const std::size_t coord = k % static_cast<std::size_t>(out[d]);
    k /= static_cast<std::size_t>(out[d]);
    const std::size_t di = d + in.size() - out.size();
    if (d + in.size() >= out.size() && in[di] != 1) index += coord * in_strides[di];
  }
  return index;
}

std::optional<Value> elementwise(const std::string& op, const std::vector<const Value*>& in) {
  std::vector<const std::vector<int64_t>*> shapes;
  for (const Value* v : in) shapes.push_back(&v->dims);
  const auto dims = broadcast(shapes);
  if (!dims) return std::nullopt;
  const auto n = count(*dims);
  Value out;
  const bool compare = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
                       op == "GreaterOrEqual" || op == "Not" || op == "And" || op == "Or";
  out.type = compare ? onnx::TensorProto_DataType_BOOL : in.back()->type;
  if (op == "Where") out.type = in[1]->type;
  out.dims = *dims;
  if (!n || !small_enough(out.type, *n)) return std::nullopt;
  for (std::size_t k = 0; k < *n; ++k) {
    const double a = in[0]->at(broadcast_index(in[0]->dims, *dims, k));
    if (in.size() == 1) {
      double r = 0;
      if (op == "Neg") r = -a;
      else if (op == "Abs") r = std::abs(a);
      else if (op == "Sqrt") r = std::sqrt(a);
      else if (op == "Floor") r = std::floor(a);
      else if (op == "Ceil") r = std::ceil(a);
      else if (op == "Not") r = a == 0 ? 1 : 0;
      else if (op == "Reciprocal") r = 1 / a;
      else return std::nullopt;
      out.push(r);
      continue;
    }
    const std::size_t kb = broadcast_index(in[1]->dims, *dims, k);
    if (op == "Where") {
      const Value& pick = a != 0 ? *in[1] : *in[2];
      out.push_from(pick, a != 0 ? kb : broadcast_index(in[2]->dims, *dims, k));
      continue;
    }
    if (!in[0]->floating() && !in[1]->floating() && !out.floating()) {
      const int64_t x = in[0]->ints[broadcast_index(in[0]->dims, *dims, k)], y = in[1]->ints[kb];
      int64_t r = 0;
      // A result int64 cannot hold is no shape a model means: not folded (found by
      // fuzz_onnx_import, 256 x 72057594037927937).
      if (op == "Add") {
        if (__builtin_add_overflow(x, y, &r)) return std::nullopt;
      } else if (op == "Sub") {
        if (__builtin_sub_overflow(x, y, &r)) return std::nullopt;
      } else if (op == "Mul") {
        if (__builtin_mul_overflow(x, y, &r)) return std::nullopt;
      } else if (op == "Div" || op == "Mod") {
        if (y == 0 || (y == -1 && x == std::numeric_limits<int64_t>::min())) return std::nullopt;
        r = op == "Div" ? x / y : x % y;
      } else if (op == "Max") r = std::max(x, y);
      else if (op == "Min") r = std::min(x, y);
      else if (op == "Equal") r = x == y;
      else if (op == "Less") r = x < y;
      else if (op == "Greater") r = x > y;
      else if (op == "LessOrEqual") r = x <= y;
      else if (op == "GreaterOrEqual") r = x >= y;
      else if (op == "And") r = (x != 0) && (y != 0);
      else if (op == "Or") r = (x != 0) || (y != 0);
      else return std::nullopt;
      out.ints.push_back(r);
      continue;
    }
    const double b = in[1]->at(kb);
    double r = 0;
    if (op == "Add") r = a + b;
    else if (op == "Sub") r = a - b;
    else if (op == "Mul") r = a * b;
    else if (op == "Div") r = a / b;
    else if (op == "Pow") r = std::pow(a, b);
    else if (op == "Max") r = std::max(a, b);
    else if (op == "Min") r = std::min(a, b);
    else if (op == "Equal") r = a == b;
    else if (op == "Less") r = a < b;
    else if (op == "Greater") r = a > b;
    else if (op == "LessOrEqual") r = a <= b;
    else if (op == "GreaterOrEqual") r = a >= b;
    else return std::nullopt;
    out.push(r);
  }
  return out;
}

int64_t normalize_axis(int64_t axis, std::size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

/// Copies the elements of `in` at the positions `index_of(output coordinate)` picks.
template <class IndexOf>
Value gather_elements(const Value& in, std::vector<int64_t> out_dims, IndexOf index_of) {
  Value out;
  out.type = in.type;
  out.dims = std::move(out_dims);
  const auto n = count(out.dims).value_or(0);
  std::vector<int64_t> coord(out.dims.size(), 0);
  for (std::size_t k = 0; k < n; ++k) {
    out.push_from(in, index_of(coord));
    for (std::size_t d = coord.size(); d-- > 0;) {
      if (++coord[d] < out.dims[d]) break;
      coord[d] = 0;
    }
  }
  return out;
}

std::optional<Value> gather(const onnx::NodeProto& node, const Value& data, const Value& idx) {
  if (data.dims.empty() || idx.floating()) return std::nullopt;
  const int64_t axis = normalize_axis(int_attr(node, "axis", 0), data.dims.size());
  if (axis < 0 || axis >= static_cast<int64_t>(data.dims.size())) return std::nullopt;
  const auto ax = static_cast<std::size_t>(axis);
  std::vector<int64_t> dims(data.dims.begin(), data.dims.begin() + axis);
  dims.insert(dims.end(), idx.dims.begin(), idx.dims.end());
  dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  const auto n = count(dims);
  if (!n || !small_enough(data.type, *n)) return std::nullopt;
  for (int64_t i : idx.ints)
    if (i < -data.dims[ax] || i >= data.dims[ax]) return std::nullopt;
  const auto data_strides = strides(data.dims);
  const auto idx_strides = strides(idx.dims);
  return gather_elements(data, dims, [&](const std::vector<int64_t>& c) {
    std::size_t at = 0;
    for (std::size_t d = 0; d < ax; ++d) at += static_cast<std::size_t>(c[d]) * data_strides[d];
    std::size_t flat_idx = 0;
    for (std::size_t d = 0; d < idx.dims.size(); ++d)
      flat_idx += static_cast<std::size_t>(c[ax + d]) * idx_strides[d];
    int64_t i = idx.ints[flat_idx];
    if (i < 0) i += data.dims[ax];
    at += static_cast<std::size_t>(i) * data_strides[ax];
    for (std::size_t d = ax + 1; d < data.dims.size(); ++d)
      at += static_cast<std::size_t>(c[d + idx.dims.size() - 1]) * data_strides[d];
    return at;
  });
}

std::optional<Value> slice(const Value& data, const std::vector<int64_t>& starts,
                           const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                           std::vector<int64_t> steps) {
  const std::size_t rank = data.dims.size();
  if (axes.empty())
    for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return std::nullopt;
  std::vector<int64_t> first(rank, 0), step(rank, 1), dims = data.dims;
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const int64_t axis = normalize_axis(axes[k], rank);
    if (axis < 0 || axis >= static_cast<int64_t>(rank) || steps[k] == 0) return std::nullopt;
    const int64_t d = data.dims[static_cast<std::size_t>(axis)];
    auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0) v = v < -d ? lo : v + d;
      return std::clamp(v, lo, hi);
    };
    int64_t s = 0, e = 0, len = 0;
    if (steps[k] > 0) {
      s = clamp(starts[k], 0, d);
      e = clamp(ends[k], 0, d);
      len = e > s ? (e - s + steps[k] - 1) / steps[k] : 0;
    } else {
      s = clamp(starts[k], -1, d - 1);
      e = clamp(ends[k], -1, d - 1);
      if (ends[k] < -d) e = -1;
      len = s > e ? (s - e + (-steps[k]) - 1) / (-steps[k]) : 0;
    }
    first[static_cast<std::size_t>(axis)] = s;
    step[static_cast<std::size_t>(axis)] = steps[k];
    dims[static_cast<std::size_t>(axis)] = len;
  }
  const auto s = strides(data.dims);
  return gather_elements(data, dims, [&](const std::vector<int64_t>& c) {
    std::size_t at = 0;
    for (std::size_t d = 0; d < rank; ++d)
      at += static_cast<std::size_t>(first[d] + c[d] * step[d]) * s[d];
    return at;
  });
}

std::optional<Value> concat(const onnx::NodeProto& node, const std::vector<const Value*>& in) {
  if (in.empty() || in[0]->dims.empty()) return std::nullopt;
  const std::size_t rank = in[0]->dims.size();
  const int64_t axis = normalize_axis(int_attr(node, "axis", 0), rank);
  if (axis < 0 || axis >= static_cast<int64_t>(rank)) return std::nullopt;
  const auto ax = static_cast<std::size_t>(axis);
  std::vector<int64_t> dims = in[0]->dims;
  dims[ax] = 0;
  for (const Value* v : in) {
    if (v->dims.size() != rank || v->floating() != in[0]->floating()) return std::nullopt;
    for (std::size_t d = 0; d < rank; ++d)
      if (d != ax && v->dims[d] != in[0]->dims[d]) return std::nullopt;
    dims[ax] += v->dims[ax];
  }
  const auto n = count(dims);
  if (!n || !small_enough(in[0]->type, *n)) return std::nullopt;
  Value out;
  out.type = in[0]->type;
  out.dims = dims;
  std::size_t outer = 1;
  for (std::size_t d = 0; d < ax; ++d) outer *= static_cast<std::size_t>(dims[d]);
  for (std::size_t o = 0; o < outer; ++o) {
    for (const Value* v : in) {
      const std::size_t chunk = v->size() / std::max<std::size_t>(outer, 1);
      for (std::size_t k = 0; k < chunk; ++k) out.push_from(*v, o * chunk + k);
    }
  }
  return out;
}

std::optional<std::vector<int64_t>> reshape_dims(const std::vector<int64_t>& from,
                                                 const std::vector<int64_t>& target, bool allow_zero) {
  std::vector<int64_t> dims = target;
  std::size_t known = 1;
  int infer = -1;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 0 && !allow_zero) {
      if (d >= from.size()) return std::nullopt;
      dims[d] = from[d];
    }
    if (dims[d] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int>(d);
    } else if (dims[d] < 0) {
      return std::nullopt;
    } else {
      known *= static_cast<std::size_t>(dims[d]);
    }
  }
  const auto total = count(from);
  if (!total) return std::nullopt;
  if (infer >= 0) {
    if (known == 0 || *total % known != 0) return std::nullopt;
    dims[static_cast<std::size_t>(infer)] = static_cast<int64_t>(*total / known);
  } else if (known != *total) {
    return std::nullopt;
  }
  return dims;
}

std::optional<std::vector<int64_t>> axes_of(const onnx::NodeProto& node,
                                            const std::vector<const Value*>& in) {
  if (in.size() > 1 && in[1] != nullptr) return in[1]->ints;
  return ints_attr(node, "axes");
}

/// The value of `node` from its inputs' values (nullptr where an input is absent).
std::optional<Value> evaluate(const onnx::NodeProto& node, const std::vector<const Value*>& in) {
  const std::string& op = node.op_type();
  for (std::size_t k = 0; k < in.size(); ++k)
    if (in[k] == nullptr && !(op == "Slice" && k >= 3) && !(op == "Squeeze" && k == 1) &&
        !(op == "Unsqueeze" && k == 1))
      return std::nullopt;
  if (op == "Identity" && in.size() == 1) return *in[0];
  if (op == "Cast" && in.size() == 1) {
    const auto to = static_cast<int32_t>(int_attr(node, "to", 0));
    if (!supported_type(to)) return std::nullopt;
    Value out;
    out.type = to;
    out.dims = in[0]->dims;
    for (std::size_t k = 0; k < in[0]->size(); ++k) {
      const double v = in[0]->at(k);
      if (to == onnx::TensorProto_DataType_BOOL) out.ints.push_back(v != 0 ? 1 : 0);
      else if (out.floating()) out.floats.push_back(v);
      else out.ints.push_back(in[0]->int_at(k));
    }
    if (!small_enough(to, out.size())) return std::nullopt;
    return out;
  }
  static const std::map<std::string, int> arity{
      {"Add", 2},        {"Sub", 2},        {"Mul", 2},     {"Div", 2},   {"Mod", 2},
      {"Pow", 2},        {"Equal", 2},      {"Less", 2},    {"Greater", 2}, {"LessOrEqual", 2},
      {"GreaterOrEqual", 2}, {"And", 2},    {"Or", 2},      {"Max", 2},   {"Min", 2},
      {"Where", 3},      {"Neg", 1},        {"Abs", 1},     {"Sqrt", 1},  {"Floor", 1},
      {"Ceil", 1},       {"Not", 1},        {"Reciprocal", 1}};
  if (const auto it = arity.find(op); it != arity.end()) {
    if (static_cast<int>(in.size()) != it->second) return std::nullopt;
    return elementwise(op, in);
  }
  if (op == "Gather" && in.size() == 2) return gather(node, *in[0], *in[1]);
  if (op == "Concat") return concat(node, in);
  if (op == "Slice" && !in.empty()) {
    if (in.size() == 1) {
      const auto starts = ints_attr(node, "starts"), ends = ints_attr(node, "ends");
      if (!starts || !ends) return std::nullopt;
      return slice(*in[0], *starts, *ends, ints_attr(node, "axes").value_or(std::vector<int64_t>{}), {});
    }
    if (in.size() < 3) return std::nullopt;
    return slice(*in[0], in[1]->ints, in[2]->ints,
                 in.size() > 3 && in[3] != nullptr ? in[3]->ints : std::vector<int64_t>{},
                 in.size() > 4 && in[4] != nullptr ? in[4]->ints : std::vector<int64_t>{});
  }
  if ((op == "Unsqueeze" || op == "Squeeze") && !in.empty()) {
    Value out = *in[0];
    const auto axes = axes_of(node, in);
    if (op == "Unsqueeze") {
      if (!axes) return std::nullopt;
      const std::size_t rank = out.dims.size() + axes->size();
      std::vector<bool> inserted(rank, false);
      for (int64_t a : *axes) {
        const int64_t axis = normalize_axis(a, rank);
        if (axis < 0 || axis >= static_cast<int64_t>(rank)) return std::nullopt;
        inserted[static_cast<std::size_t>(axis)] = true;
      }
      std::vector<int64_t> dims;
      std::size_t from = 0;
      for (std::size_t d = 0; d < rank; ++d)
        dims.push_back(inserted[d] ? 1 : (from < in[0]->dims.size() ? in[0]->dims[from++] : -1));
      if (std::count(dims.begin(), dims.end(), -1) > 0) return std::nullopt;
      out.dims = dims;
      return out;
    }
    std::vector<int64_t> dims;
    for (std::size_t d = 0; d < in[0]->dims.size(); ++d) {
      const bool listed =
          axes ? std::any_of(axes->begin(), axes->end(),
                             [&](int64_t a) { return normalize_axis(a, in[0]->dims.size()) == static_cast<int64_t>(d); })
               : in[0]->dims[d] == 1;
      if (!listed) dims.push_back(in[0]->dims[d]);
    }
    out.dims = dims;
    return out;
  }
  if (op == "Reshape" && in.size() == 2) {
    const auto dims = reshape_dims(in[0]->dims, in[1]->ints, int_attr(node, "allowzero", 0) != 0);
    if (!dims) return std::nullopt;
    Value out = *in[0];
    out.dims = *dims;
    return out;
  }
  if (op == "Expand" && in.size() == 2) {
    const auto dims = broadcast({&in[0]->dims, &in[1]->ints});
    if (!dims) return std::nullopt;
    const auto n = count(*dims);
    if (!n || !small_enough(in[0]->type, *n)) return std::nullopt;
    return gather_elements(*in[0], *dims, [&](const std::vector<int64_t>& c) {
      std::size_t flat = 0;
      for (std::size_t d = 0; d < c.size(); ++d)
        flat = flat * static_cast<std::size_t>((*dims)[d]) + static_cast<std::size_t>(c[d]);
      return broadcast_index(in[0]->dims, *dims, flat);
    });
  }
  if (op == "ConstantOfShape" && in.size() == 1) {
    Value fill;
    fill.type = onnx::TensorProto_DataType_FLOAT;
    fill.floats = {0.0};
    if (const auto* a = attribute(node, "value"); a != nullptr && a->has_t()) {
      const auto v = from_tensor(a->t());
      if (!v || v->size() != 1) return std::nullopt;
      fill = *v;
    }
    const auto n = count(in[0]->ints);
    if (!n || !small_enough(fill.type, *n)) return std::nullopt;
    Value out;
    out.type = fill.type;
    out.dims = in[0]->ints;
    for (std::size_t k = 0; k < *n; ++k) out.push_from(fill, 0);
    return out;
  }
  if (op == "Range" && in.size() == 3) {
    if (in[0]->size() != 1 || in[1]->size() != 1 || in[2]->size() != 1) return std::nullopt;
    const double start = in[0]->at(0), limit = in[1]->at(0), delta = in[2]->at(0);
    if (delta == 0) return std::nullopt;
    const double steps = std::max(std::ceil((limit - start) / delta), 0.0);
    Value out;
    out.type = in[0]->type;
    if (!small_enough(out.type, static_cast<std::size_t>(std::min(steps, 1e9)))) return std::nullopt;
    out.dims = {static_cast<int64_t>(steps)};
    for (int64_t k = 0; k < out.dims[0]; ++k) out.push(start + static_cast<double>(k) * delta);
    return out;
  }
  if (op == "Transpose" && in.size() == 1) {
    const std::size_t rank = in[0]->dims.size();
    std::vector<int64_t> perm = ints_attr(node, "perm").value_or(std::vector<int64_t>{});
    if (perm.empty())
      for (std::size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    if (perm.size() != rank) return std::nullopt;
    std::vector<int64_t> dims;
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(rank)) return std::nullopt;
      dims.push_back(in[0]->dims[static_cast<std::size_t>(p)]);
    }
    const auto s = strides(in[0]->dims);
    return gather_elements(*in[0], dims, [&](const std::vector<int64_t>& c) {
      std::size_t at = 0;
      for (std::size_t d = 0; d < rank; ++d)
        at += static_cast<std::size_t>(c[d]) * s[static_cast<std::size_t>(perm[d])];
      return at;
    });
  }
  return std::nullopt;
}

}  // namespace

int fold_constants(onnx::GraphProto& graph, const std::vector<bool>& foldable,
                   const StaticShape& static_shape) {
  std::unordered_map<std::string, Value> values;
  for (const auto& init : graph.initializer())
    if (auto v = from_tensor(init)) values.emplace(init.name(), std::move(*v));
  int folded = 0;
  for (int i = 0; i < graph.node_size(); ++i) {
    onnx::NodeProto& node = *graph.mutable_node(i);
    if (node.op_type() == "Constant") {
      if (node.output_size() == 1)
        if (auto v = constant_node_value(node)) values[node.output(0)] = std::move(*v);
      continue;
    }
    if (static_cast<std::size_t>(i) >= foldable.size() || !foldable[static_cast<std::size_t>(i)] ||
        node.output_size() != 1 || !node.domain().empty())
      continue;
    std::optional<Value> value;
    if (node.op_type() == "Shape" || node.op_type() == "Size") {
      const auto dims = node.input_size() == 1 ? static_shape(node.input(0)) : std::nullopt;
      if (!dims) continue;
      Value v;
      v.type = onnx::TensorProto_DataType_INT64;
      if (node.op_type() == "Size") {
        const auto n = count(*dims);
        if (!n) continue;
        v.ints = {static_cast<int64_t>(*n)};
      } else {
        const auto rank = static_cast<int64_t>(dims->size());
        int64_t start = int_attr(node, "start", 0), end = int_attr(node, "end", rank);
        if (start < 0) start += rank;
        if (end < 0) end += rank;
        start = std::clamp<int64_t>(start, 0, rank);
        end = std::clamp<int64_t>(end, start, rank);
        v.ints.assign(dims->begin() + start, dims->begin() + end);
        v.dims = {end - start};
      }
      value = std::move(v);
    } else {
      std::vector<const Value*> in;
      bool known = true;
      for (const std::string& name : node.input()) {
        if (name.empty()) {
          in.push_back(nullptr);
          continue;
        }
        const auto it = values.find(name);
        if (it == values.end()) {
          known = false;
          break;
        }
        in.push_back(&it->second);
      }
      if (!known) continue;
      value = evaluate(node, in);
    }
    if (!value) continue;
    onnx::AttributeProto attr;
    attr.set_name("value");
    attr.set_type(onnx::AttributeProto_AttributeType_TENSOR);
    *attr.mutable_t() = to_tensor(*value);
    attr.mutable_t()->set_name(node.output(0));
    node.set_op_type("Constant");
    node.clear_input();
    node.clear_attribute();
    *node.add_attribute() = std::move(attr);
    values[node.output(0)] = std::move(*value);
    ++folded;
  }
  return folded;
}

}  // namespace ergon::planner::detail
