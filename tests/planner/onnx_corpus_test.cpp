// Real PyTorch exports (tests/data/onnx, made by scripts/export_onnx.py --corpus from Debian's
// torchvision) against what PyTorch itself said about them when it ran the model
// (tests/data/onnx/manifest.json): every parameter counted once as a parameter, and the
// activations of named layers at the size PyTorch computed. Then each is planned at half of
// its store-all memory.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <ostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "planner/baselines.h"
#include "planner/bounds.h"
#include "planner/milp.h"
#include "planner/onnx_import.h"
#include "planner/planners.h"
#include "planner/schedule.h"
#include "planner/zoo.h"
#include "tests/support/test_graphs.h"

namespace ergon::planner {
namespace {

namespace fs = std::filesystem;

fs::path corpus_dir() { return fs::path(ERGON_TEST_DATA_DIR) / "onnx"; }

struct CorpusModel {
  std::string file;
  nlohmann::json entry;
};

void PrintTo(const CorpusModel& m, std::ostream* os) { *os << m.file; }

std::vector<CorpusModel> corpus() {
  std::ifstream in(corpus_dir() / "manifest.json");
  const auto manifest = nlohmann::json::parse(in);
  std::vector<CorpusModel> out;
  for (const auto& entry : manifest.at("models"))
    out.push_back({entry.at("file").get<std::string>(), entry});
  return out;
}

std::string test_name(const ::testing::TestParamInfo<CorpusModel>& info) {
  std::string name = fs::path(info.param.file).stem().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

/// ViT's class token and position embedding are graph inputs added to activations, as data
/// would be, when exported without weights: the file alone cannot tell them from data.
ForwardGraph import_entry(const CorpusModel& m) {
  const bool ambiguous = m.file == "vit_b_16_inputs.onnx";
  return import_onnx(corpus_dir() / m.file, 0,
                     ambiguous ? std::vector<std::string>{m.entry.at("data_input")}
                               : std::vector<std::string>{});
}

class OnnxCorpus : public ::testing::TestWithParam<CorpusModel> {};

TEST_P(OnnxCorpus, EveryParameterPyTorchCountsIsAParameterOnce) {
  const ForwardGraph g = import_entry(GetParam());
  const auto parameters = GetParam().entry.at("parameters").get<uint64_t>();
  EXPECT_EQ(g.param_bytes(), 4 * parameters) << g.import_note;
  const auto& input = GetParam().entry.at("input_shape");
  uint64_t input_elements = 1;
  for (const auto& d : input) input_elements *= d.get<uint64_t>();
  EXPECT_EQ(g.input_bytes, 4 * input_elements);
}

TEST_P(OnnxCorpus, NamedLayersHoldTheActivationsPyTorchComputed) {
  const ForwardGraph g = import_entry(GetParam());
  for (const auto& tensor : GetParam().entry.at("tensors")) {
    const auto node = tensor.at("onnx_node").get<std::string>();
    uint64_t elements = 1;
    for (const auto& d : tensor.at("shape")) elements *= d.get<uint64_t>();
    const auto op = std::find_if(g.ops.begin(), g.ops.end(),
                                 [&](const ForwardOp& o) { return o.name == node; });
    ASSERT_NE(op, g.ops.end()) << node << " (module " << tensor.at("module") << ") is not an op";
    EXPECT_EQ(op->output_bytes, 4 * elements) << node;
  }
}

TEST_P(OnnxCorpus, SaysWhatItLeftOut) {
  const ForwardGraph g = import_entry(GetParam());
  EXPECT_NE(g.import_note.find(" ops kept"), std::string::npos) << g.import_note;
  EXPECT_EQ(g.import_note.find('\n'), std::string::npos);
}

TEST_P(OnnxCorpus, PlansAtHalfOfStoreAllOrSaysWhyNot) {
  const ForwardGraph forward = import_entry(GetParam());
  const TrainingGraph graph = build_training_graph(forward, testing::CostsWithIdle());
  PlanRequest request;
  request.objective = Objective::kTotal;
  request.budget_bytes = graph.fixed_bytes + graph.store_all_peak_bytes() / 2;
  request.deadline_s = std::numeric_limits<double>::infinity();
  request.time_limit_s = 6;
  request.relative_gap = 0.01;
  request.threads = 1;
  const auto solver = make_cbc_solver();
  const PlanResult result = run_planner("poet", graph, request, *solver);
  if (!result.schedule) {
    EXPECT_FALSE(result.why.empty()) << "no schedule and no reason";
    return;
  }
  const ScheduleReport sim =
      simulate(graph, *result.schedule, request.budget_bytes - graph.fixed_bytes);
  EXPECT_TRUE(sim.error.empty()) << sim.error;
  EXPECT_LE(sim.peak_bytes, graph.store_all_peak_bytes() / 2);
  EXPECT_GE(result.objective_j, result.bound_j);
  EXPECT_LE(result.solve_time_s, 3 * request.time_limit_s);
}

// page-all on graphs nobody here wrote (branches, concatenations, tensors read by many later
// nodes): it must page only what the backward pass reads later, and the simulator must hold
// every read it makes.
TEST_P(OnnxCorpus, PageAllPagesEachActivationOutAndInOnceAndRecomputesNothing) {
  const TrainingGraph graph = build_training_graph(import_entry(GetParam()), testing::CostsWithIdle());
  PlanRequest request;
  request.budget_bytes = graph.store_all_peak_bytes();
  request.deadline_s = std::numeric_limits<double>::infinity();
  const PlanResult result = plan_page_all(graph, request);
  ASSERT_TRUE(result.schedule) << result.why;
  const ScheduleReport sim = simulate(graph, *result.schedule, request.budget_bytes);
  ASSERT_TRUE(sim.valid) << sim.error;
  EXPECT_EQ(sim.recomputes, 0);
  EXPECT_GT(sim.page_outs, 0);
  EXPECT_EQ(sim.page_ins, sim.page_outs);
  // Each tensor is resident only while store-all would hold it too. Not always less: on
  // VGG-11 both peak at 38,535,168 B (three 224 x 224 x 64 tensors).
  EXPECT_LE(sim.peak_bytes, graph.store_all_peak_bytes());
}

INSTANTIATE_TEST_SUITE_P(TorchvisionExports, OnnxCorpus, ::testing::ValuesIn(corpus()), test_name);

TEST(OnnxCorpusImport, WeightsAsInputsGiveTheSameGraphAsWeightsInTheFile) {
  for (const auto& [inputs, stripped] :
       {std::pair{"resnet18_inputs.onnx", "resnet18_stripped.onnx"},
        std::pair{"squeezenet1_1_inputs.onnx", "squeezenet1_1_weights.onnx"},
        std::pair{"densenet121.onnx", "densenet121_stripped.onnx"}}) {
    const ForwardGraph a = import_onnx(corpus_dir() / inputs);
    const ForwardGraph b = import_onnx(corpus_dir() / stripped);
    ASSERT_EQ(a.ops.size(), b.ops.size()) << inputs;
    EXPECT_EQ(a.param_bytes(), b.param_bytes()) << inputs;
    EXPECT_EQ(a.forward_flops(), b.forward_flops()) << inputs;
    for (std::size_t i = 0; i < a.ops.size(); ++i) {
      EXPECT_EQ(a.ops[i].output_bytes, b.ops[i].output_bytes) << inputs << " op " << i;
      EXPECT_EQ(a.ops[i].inputs, b.ops[i].inputs) << inputs << " op " << i;
    }
  }
}

// The memory bound's ResNet-18 figures (docs/planner.md) come from the zoo's graph; PyTorch's
// own export of torchvision's ResNet-18 has the same bound to the joule, at half of store-all
// where the stem's convolution output is certain to be away during its backward pass and at
// 30 %, under both objectives.
TEST(OnnxCorpusImport, TorchvisionsResnet18HasTheZoosMemoryBound) {
  const TrainingGraph exported = build_training_graph(import_onnx(corpus_dir() / "resnet18_stripped.onnx"),
                                                      testing::CostsWithIdle());
  const TrainingGraph zoo = build_training_graph(zoo_model("resnet18", 1), testing::CostsWithIdle());
  ASSERT_EQ(exported.size(), zoo.size());
  ASSERT_EQ(exported.store_all_peak_bytes(), zoo.store_all_peak_bytes());
  for (const uint64_t percent : {50U, 30U})
    for (const Objective objective : {Objective::kPoet, Objective::kTotal}) {
      const uint64_t budget = zoo.store_all_peak_bytes() * percent / 100;
      const double zoo_j = memory_lower_bound_j(zoo, budget, objective);
      EXPECT_GT(zoo_j, zoo.single_pass_energy_j());
      EXPECT_NEAR(memory_lower_bound_j(exported, budget, objective), zoo_j, zoo_j * 1e-12)
          << percent << " %, " << (objective == Objective::kPoet ? "poet" : "total");
    }
}

// torchvision's MobileNetV2, exported (a real graph, not one made for the test): its stem is
// a convolution, a batch norm and a ReLU6, the pattern the memory bound's pairs are for. At
// 30 % of store-all they raise its bound by 1.3 %.
TEST(OnnxCorpusImport, MobileNetV2sStemPairRaisesItsMemoryBound) {
  const TrainingGraph g =
      build_training_graph(import_onnx(corpus_dir() / "mobilenet_v2.onnx"), testing::LinearCosts());
  const uint64_t budget = g.store_all_peak_bytes() * 30 / 100;
  // Without the pairs (dadded5): 4.0935 J; with them, 4.1484 J.
  EXPECT_GT(memory_lower_bound_j(g, budget, Objective::kPoet), 4.14);
}

TEST(OnnxCorpusImport, AnInputAddedLikeDataIsRefusedNamingTheCandidates) {
  try {
    import_onnx(corpus_dir() / "vit_b_16_inputs.onnx");
    FAIL() << "imported without knowing the data input";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'class_token'"), std::string::npos) << what;
    EXPECT_NE(what.find("'input'"), std::string::npos) << what;
    EXPECT_NE(what.find("--onnx-input"), std::string::npos) << what;
  }
}

TEST(OnnxCorpusImport, NamingAnInputThatIsAWeightIsRefused) {
  EXPECT_THROW(import_onnx(corpus_dir() / "resnet18_stripped.onnx", 0, {"conv1.weight"}), InputError);
  EXPECT_THROW(import_onnx(corpus_dir() / "resnet18_inputs.onnx", 0, {"no_such_input"}), InputError);
}

TEST(OnnxCorpusImport, AConvNetReBatchesWithEveryActivationScaled) {
  for (const char* file : {"resnet18_inputs.onnx", "mobilenet_v2.onnx", "densenet121.onnx"}) {
    const ForwardGraph one = import_onnx(corpus_dir() / file, 1);
    const ForwardGraph four = import_onnx(corpus_dir() / file, 4);
    ASSERT_EQ(one.ops.size(), four.ops.size()) << file;
    EXPECT_EQ(one.param_bytes(), four.param_bytes()) << file;
    for (std::size_t i = 0; i < one.ops.size(); ++i)
      EXPECT_EQ(four.ops[i].output_bytes, 4 * one.ops[i].output_bytes) << file << " " << one.ops[i].name;
  }
}

// torch.onnx traces `n = x.shape[0]` in ViT, Swin and nn.MultiheadAttention as the constant
// batch it saw: re-batched, part of the graph would keep the exported size.
TEST(OnnxCorpusImport, ReBatchingAnExportThatBakedItsBatchIsRefusedNamingTheNode) {
  for (const char* file : {"vit_b_16.onnx", "swin_t.onnx", "transformer_encoder.onnx"}) {
    EXPECT_NO_THROW(import_onnx(corpus_dir() / file, 1)) << file;
    try {
      import_onnx(corpus_dir() / file, 4);
      ADD_FAILURE() << file << " re-batched although its export baked the batch in";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("cannot re-batch to 4"), std::string::npos) << what;
      EXPECT_NE(what.find(" node '/"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace ergon::planner
