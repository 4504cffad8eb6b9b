#pragma once

#include <string>
#include <vector>

#include "planner/graph.h"

namespace ergon::planner {

/// Models of the zoo, by CLI name (e.g. "resnet18-cifar"), with a one-line description.
struct ZooEntry {
  std::string name;
  std::string description;
};
const std::vector<ZooEntry>& zoo_models();

/// The forward graph of a zoo model at a batch size, with real layer shapes (fp32). Besides
/// the named models, "mlp:IN,HIDDEN...,OUT" is an MLP of those widths with relu between
/// (small enough for a microcontroller: "mlp:64,32,10").
/// Throws InputError for an unknown name (listing the known ones) or a batch < 1.
ForwardGraph zoo_model(const std::string& name, int batch);

}  // namespace ergon::planner
