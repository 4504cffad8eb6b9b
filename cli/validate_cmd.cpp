#include "cli/validate_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/truth_breakdown.h"
#include "common/stats.h"
#include "common/units.h"
#include "devices/board_profile.h"

namespace ergon::cli {

int run_validate(const app::ValidateRequest& args, bool json, std::ostream& out) {
  const app::ValidateOutcome o = app::validate(args, [](app::ValidatePhase phase) {
    if (phase == app::ValidatePhase::kReference)
      std::cerr << "executing the store-all schedule: reference gradients, and the machine's speed now\n";
  });
  if (o.run_incomplete) std::cerr << "warning: the run ended " << *o.run_incomplete << "; validated what arrived\n";
  auto pct = [](double measured, double predicted) {
    return predicted > 0 ? 100 * (measured / predicted - 1) : 0.0;
  };
  if (json) {
    nlohmann::json j;
    j["plan_id"] = o.plan_id;
    j["run_id"] = o.run_id;
    j["costs"] = o.cost_source;
    auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    j["steps"] = o.steps;
    j["iterations"] = o.iterations;
    j["iteration_times_s"] = o.iteration_times_s;
    j["iteration_energies_j"] = o.iteration_energies_j;
    j["steps_timed"] = o.steps_timed;
    j["steps_attributed"] = o.steps_attributed;
    j["predicted"] = {{"energy_j", opt(o.predicted_energy_j)}, {"time_s", o.predicted_time_s}};
    j["measured"] = {{"energy_j", opt(o.measured_energy_j)}, {"time_s", o.measured_time_s}};
    j["energy_error_pct"] = o.predicted_energy_j && o.measured_energy_j
                                ? nlohmann::json(pct(*o.measured_energy_j, *o.predicted_energy_j))
                                : nlohmann::json(nullptr);
    j["time_error_pct"] = pct(o.measured_time_s, o.predicted_time_s);
    j["step_time_error"] = {{"median_pct", 100 * o.step_error_median}, {"p95_pct", 100 * o.step_error_p95}};
    if (o.cache_model)
      j["cache_model"] = {{"description", o.cache_model->description},
                          {"steps", o.cache_model->steps},
                          {"time_s", o.cache_model->time_s},
                          {"energy_j", opt(o.cache_model->energy_j)},
                          {"time_error_pct", pct(o.measured_time_s, o.cache_model->time_s)}};
    j["step_times"] = nlohmann::json::array();
    for (const auto& st : o.step_times)
      j["step_times"].push_back({{"kind", st.recompute ? std::string("recompute") : planner::to_string(st.kind)},
                                 {"node", st.node},
                                 {"predicted_s", st.predicted_s},
                                 {"cached_fraction", opt(st.cached_fraction)},
                                 {"cached_predicted_s", opt(st.cached_predicted_s)},
                                 {"measured_s", opt(st.measured_s)}});
    if (o.executed) {
      auto iteration = [](const app::ExecutedIteration& e) {
        return nlohmann::json{{"loss", e.loss},
                              {"computes", e.computes},
                              {"recomputes", e.recomputes},
                              {"paged_out_bytes", e.paged_out_bytes},
                              {"paged_in_bytes", e.paged_in_bytes},
                              {"peak_bytes", e.peak_bytes},
                              {"gradient_digest", fmt::format("{:016x}", e.gradient_digest)}};
      };
      j["executed"] = iteration(*o.executed);
      j["store_all"] = iteration(*o.reference);
      j["store_all_run_id"] = o.reference_run_id;
      if (o.reference_time) {
        const auto& r = *o.reference_time;
        j["store_all_time"] = {{"predicted_s", r.predicted_s},
                               {"measured_s", r.measured_s},
                               {"error_pct", pct(r.measured_s, r.predicted_s)}};
        j["time_error_over_store_all_pct"] =
            pct(o.measured_time_s / r.measured_s, o.predicted_time_s / r.predicted_s);
      } else {
        j["store_all_time"] = nullptr;
        j["time_error_over_store_all_pct"] = nullptr;
      }
      j["predicted_peak_bytes"] = o.predicted_peak_bytes;
      j["gradients_match"] = o.gradients_match();
    }
    out << j.dump(2) << "\n";
    return o.executed && !o.gradients_match() ? 1 : 0;
  }
  out << fmt::format("{}, {} steps executed one by one on {}\n", o.description, o.steps,
                     !args.port.empty() ? args.port
                     : args.execute     ? "this machine (ergon-agent, real tensors)"
                                        : "a simulated board");
  out << o.cost_source << "\n";
  out << fmt::format("            predicted     measured    error\n");
  if (o.predicted_energy_j && o.measured_energy_j) {
    out << fmt::format("  energy  {:>10.6g} J {:>10.6g} J  {:>+6.2f} %\n", *o.predicted_energy_j,
                       *o.measured_energy_j, pct(*o.measured_energy_j, *o.predicted_energy_j));
  } else {
    out << "  energy  not compared: "
        << (!o.predicted_energy_j ? "the plan is for time (its costs carry no energy)"
            : o.steps_attributed == 0
                ? "the run has no power samples (a board without a power probe)"
                : fmt::format("the power samples of {} of {} steps did not all arrive", o.steps - o.steps_attributed,
                              o.steps))
        << "\n";
  }
  out << fmt::format("  time    {:>10.6g} s {:>10.6g} s  {:>+6.2f} %   (per step: |error| median {:.1f} %, p95 {:.1f} %)\n",
                     o.predicted_time_s, o.measured_time_s, pct(o.measured_time_s, o.predicted_time_s),
                     100 * o.step_error_median, 100 * o.step_error_p95);
  if (o.cache_model) {
    std::vector<double> errors;
    for (const auto& st : o.step_times)
      if (st.measured_s && st.predicted_s > 0)
        errors.push_back(std::abs(*st.measured_s / st.cached_predicted_s.value_or(st.predicted_s) - 1));
    out << fmt::format("  with the cache model: {:.6g} s  {:+.2f} %   (per step: |error| median {:.1f} %, p95 {:.1f} %)\n"
                       "    {}\n",
                       o.cache_model->time_s, pct(o.measured_time_s, o.cache_model->time_s), 100 * median(errors),
                       100 * quantile(errors, 0.95), o.cache_model->description);
  }
  if (o.iterations > 1) {
    const auto [lo, hi] = std::minmax_element(o.iteration_times_s.begin(), o.iteration_times_s.end());
    if (o.iteration_times_s.empty())
      out << fmt::format("  measured: the first of {} iterations, incomplete\n", o.iterations);
    else
      out << fmt::format("  measured: the median of {} of {} iterations, from {:.6g} s to {:.6g} s ({:+.2f} % to {:+.2f} %)\n",
                         o.iteration_times_s.size(), o.iterations, *lo, *hi, pct(*lo, o.predicted_time_s),
                         pct(*hi, o.predicted_time_s));
  }
  if (o.reference_time) {
    // The machine's speed moves (docs/accuracy.md, "Real silicon"): store-all, timed right
    // after on the same costs, shows how far, and the schedule against it leaves that out.
    const auto& r = *o.reference_time;
    const double predicted_ratio = o.predicted_time_s / r.predicted_s;
    const double measured_ratio = o.measured_time_s / r.measured_s;
    out << fmt::format("  store-all right after (run {}): predicted {:.6g} s, measured {:.6g} s  {:+.2f} %   (the "
                       "machine's speed against its costs')\n",
                       o.reference_run_id, r.predicted_s, r.measured_s, pct(r.measured_s, r.predicted_s));
    out << fmt::format("  this schedule over store-all: predicted x{:.4f}, measured x{:.4f}  {:+.2f} %\n",
                       predicted_ratio, measured_ratio, pct(measured_ratio, predicted_ratio));
  }
  out << fmt::format("  {} of {} steps timed, {} with energy; plan {} and run {} stored with the validation in {}\n",
                     o.steps_timed, o.steps, o.steps_attributed, o.plan_id, o.run_id, args.db);
  if (o.simulated_truth)
    print_error_breakdown(devices::board_named(o.board), *o.simulated_truth, o.predicted_time_s,
                          o.measured_time_s, o.predicted_energy_j, o.measured_energy_j, out);
  if (o.executed) {
    const app::ExecutedIteration& e = *o.executed;
    const app::ExecutedIteration& r = *o.reference;
    if (args.port.empty())
      out << "executed on this machine (ergon-agent in process): its times and energies are this "
             "machine's, not the board's\n";
    out << fmt::format("  executed on real tensors: {} computes, {} recomputations, {} paged out, {} paged in\n",
                       e.computes, e.recomputes, format_bytes(e.paged_out_bytes),
                       format_bytes(e.paged_in_bytes));
    out << fmt::format("  activation memory held: {} (planned {}; store-all {})\n",
                       format_bytes(e.peak_bytes), format_bytes(o.predicted_peak_bytes),
                       format_bytes(r.peak_bytes));
    out << fmt::format("  loss {:.6f}, gradients {:016x}; store-all (run {}): loss {:.6f}, gradients {:016x}\n",
                       e.loss, e.gradient_digest, o.reference_run_id, r.loss, r.gradient_digest);
    out << (o.gradients_match() ? "  gradients identical to store-all: recomputation and paging did not change the math\n"
                                : "  GRADIENTS DIFFER from store-all\n");
    return o.gradients_match() ? 0 : 1;
  }
  return 0;
}

}  // namespace ergon::cli
