#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/schedule.h"

namespace ergon::planner {

/// An n x n table of flags in one block, one bit each, read and written as grid[row][column].
/// Plans are measured thousands of times a second by the greedy search: one allocation per
/// table, not one per row, and rows it scans 64 flags at a time (words()). A bit per flag
/// rather than a byte: clearing and scanning DenseNet-121's 867 x 867 tables was a third of
/// the search's time.
class StageGrid {
 public:
  /// One flag, assignable (grid[t][i] = true) and readable as a bool.
  class Flag {
   public:
    Flag(uint64_t& word, uint64_t mask) : word_(&word), mask_(mask) {}
    operator bool() const { return (*word_ & mask_) != 0; }  // NOLINT(google-explicit-constructor)
    Flag& operator=(bool on) {
      if (on) {
        *word_ |= mask_;
      } else {
        *word_ &= ~mask_;
      }
      return *this;
    }
    Flag& operator=(const Flag& other) { return *this = static_cast<bool>(other); }

   private:
    uint64_t* word_;
    uint64_t mask_;
  };
  class ConstRow {
   public:
    explicit ConstRow(const uint64_t* words) : words_(words) {}
    [[nodiscard]] bool operator[](int i) const { return ((words_[i >> 6] >> (i & 63)) & 1U) != 0; }
    [[nodiscard]] const uint64_t* words() const { return words_; }

   private:
    const uint64_t* words_;
  };

  class Row {
   public:
    explicit Row(uint64_t* words) : words_(words) {}
    [[nodiscard]] Flag operator[](int i) const { return {words_[i >> 6], uint64_t{1} << (i & 63)}; }
    operator ConstRow() const { return ConstRow(words_); }  // NOLINT(google-explicit-constructor)

   private:
    uint64_t* words_;
  };
  StageGrid() = default;
  explicit StageGrid(int n) : stride_((n + 63) / 64), words_(static_cast<std::size_t>(n) * stride_, 0) {}
  [[nodiscard]] Row operator[](int row) { return Row(words_.data() + static_cast<std::size_t>(row) * stride_); }
  [[nodiscard]] ConstRow operator[](int row) const {
    return ConstRow(words_.data() + static_cast<std::size_t>(row) * stride_);
  }
  void clear() { std::fill(words_.begin(), words_.end(), 0); }

 private:
  int stride_ = 0;  ///< words per row
  std::vector<uint64_t> words_;
};

/// The same n x n table of flags, read and written as grid[row][column] too, but stored a
/// column at a time: a tensor's stages in RAM or on storage are runs of consecutive rows
/// (set_rows()), and a stage's resident bytes are summed run by run (for_each_run()), not
/// flag by flag.
class ColumnGrid {
 public:
  class Row {
   public:
    Row(uint64_t* words, int stride, int row) : words_(words), stride_(stride), row_(row) {}
    [[nodiscard]] StageGrid::Flag operator[](int i) const {
      return {words_[static_cast<std::size_t>(i) * stride_ + (row_ >> 6)], uint64_t{1} << (row_ & 63)};
    }

   private:
    uint64_t* words_;
    int stride_, row_;
  };
  class ConstRow {
   public:
    ConstRow(const uint64_t* words, int stride, int row) : words_(words), stride_(stride), row_(row) {}
    [[nodiscard]] bool operator[](int i) const {
      return ((words_[static_cast<std::size_t>(i) * stride_ + (row_ >> 6)] >> (row_ & 63)) & 1U) != 0;
    }

   private:
    const uint64_t* words_;
    int stride_, row_;
  };

  ColumnGrid() = default;
  explicit ColumnGrid(int n) : n_(n), stride_((n + 63) / 64), words_(static_cast<std::size_t>(n) * stride_, 0) {}
  [[nodiscard]] Row operator[](int row) { return {words_.data(), stride_, row}; }
  [[nodiscard]] ConstRow operator[](int row) const { return {words_.data(), stride_, row}; }
  void clear() { std::fill(words_.begin(), words_.end(), 0); }

  /// Sets rows [from, to] of `column` (none when to < from).
  void set_rows(int column, int from, int to) {
    uint64_t* c = words_.data() + static_cast<std::size_t>(column) * stride_;
    for (int r = from; r <= to;) {
      const int bit = r & 63;
      const int count = std::min(64 - bit, to - r + 1);
      c[r >> 6] |= (count == 64 ? ~uint64_t{0} : ((uint64_t{1} << count) - 1)) << bit;
      r += count;
    }
  }

  /// Calls f(first, last) for each run of set rows of `column` at or after row `from`.
  template <class F>
  void for_each_run(int column, int from, F&& f) const {
    const uint64_t* c = words_.data() + static_cast<std::size_t>(column) * stride_;
    int r = from;
    while (r < n_) {
      const int first = next(c, r, false);
      if (first >= n_) return;
      r = next(c, first, true);
      f(first, r - 1);
    }
  }

 private:
  /// The first row at or after r whose flag is set (or, with `clear`, unset); n_ if none.
  [[nodiscard]] int next(const uint64_t* c, int r, bool clear) const {
    int w = r >> 6;
    uint64_t word = (clear ? ~c[w] : c[w]) & (~uint64_t{0} << (r & 63));
    while (word == 0) {
      if (++w >= stride_) return n_;
      word = clear ? ~c[w] : c[w];
    }
    return std::min(n_, w * 64 + std::countr_zero(word));
  }

  int n_ = 0;
  int stride_ = 0;  ///< words per column
  std::vector<uint64_t> words_;
};

/// A schedule in the POET model's stage form (DESIGN.md, Planner). Stage t computes the nodes
/// marked in `compute[t]` in ascending order, the last one being t; `ram[t]` and `ssd[t]`
/// mark the outputs in RAM and on storage at the start of stage t; `page_in[t]` and
/// `page_out[t]` the transfers during stage t. Matrices are indexed [stage][node].
/// Under Objective::kTotal a page-out may span consecutive stages (`page_out` set in each,
/// the tensor in RAM in each): its transfer time is spread over them, so a transfer longer
/// than any one node's compute can still hide behind several. One storage channel carries
/// the transfers in the order to_schedule issues them, and three rules keep a stage from
/// waiting longer than the model says: at most one page-out goes on from a stage into the
/// next, issued last in it; a stage a page-out runs through (from the stage before to the
/// stage after) carries no other transfer; a stage a page-out goes on from has no late
/// page-in. So page-outs chain: one ends in a stage, the next starts there.
/// The POET MILP's binaries describe exactly this, so a heuristic that builds one gives the
/// solver a warm start it can check row by row. `page_in_late[t]` (Objective::kTotal only)
/// marks page-ins issued after stage t's last compute and drops: they take no memory in
/// stage t but do not overlap its computes.
struct StagePlan {
  explicit StagePlan(int nodes);
  int n = 0;
  /// Every flag unset (the tables keep their memory).
  void clear();
  StageGrid compute, page_in, page_out, page_in_late;
  ColumnGrid ram, ssd;  ///< a tensor's stages in RAM, on storage: runs of rows
};

/// Which ways of saving memory a planner may use: POET uses both; Checkmate-style planning
/// only recomputes; a paging-only planner only pages.
struct AllowedMoves {
  bool recompute = true;
  bool paging = true;
};

/// A plan measured the way the MILP of an Objective measures it.
struct StagePlanCosts {
  double energy_j = 0;        ///< the objective's energy
  double compute_time_s = 0;  ///< every compute
  /// Sum over stages of max(compute, transfers): under kTotal a stage's transfers overlap
  /// its computes.
  double makespan_s = 0;
  double deadline_time_s = 0;  ///< what the deadline bounds: compute time or makespan
  /// Memory as the model's U counts it: after each compute allocates its output and before
  /// the frees it triggers. Under kPoet a paged-in output counts from the next stage on;
  /// under kTotal from the stage that pages it in, and an output paged out stays all stage.
  uint64_t peak_bytes = 0;
  std::vector<uint64_t> stage_peak_bytes;
  /// What is in RAM as the backward phase's first stage starts (graph.backward_phase_start()):
  /// the outputs the forward pass keeps for it, ScheduleReport::stash_bytes.
  uint64_t stash_bytes = 0;
  /// Each stage's share of makespan_s: max(compute, transfers) + late page-ins.
  std::vector<double> stage_time_s;
  /// kTotal: how long each page-out uses the storage channel in each stage of its span.
  struct Share {
    int stage = 0;
    int node = 0;
    double time_s = 0;
  };
  std::vector<Share> page_out_shares;
};

/// Empty when `plan` obeys the model's rules: each stage computes its own node last; every
/// input of a computed node is computed earlier in the stage or resident; residency comes
/// from the previous stage (carried, computed or paged in); storage only from a page-out;
/// page-outs read RAM and page-ins read storage. Otherwise the first broken rule.
std::string check_stage_plan(const TrainingGraph& graph, const StagePlan& plan);

StagePlanCosts evaluate_stage_plan(const TrainingGraph& graph, const StagePlan& plan,
                                   Objective objective = Objective::kPoet);

/// POET's Free[t,(i,k)]: whether i's output is dropped right after k is computed in stage t
/// (k computed, i not kept for stage t + 1, and no later consumer of i computed in stage t).
/// `users` is graph.users(); the edge (k,k) frees k's own output. Under kTotal an output paged
/// out in stage t is not dropped before the stage ends.
bool frees_after(const StagePlan& plan, const std::vector<std::vector<int>>& users, int t,
                 int i, int k, Objective objective = Objective::kPoet);

/// The ordered steps of a plan: per stage, page-outs, then computes (each followed by the
/// frees it triggers), then drops of what the next stage does not keep, then page-ins.
/// Under kTotal a stage's page-ins and page-outs come first, so that they overlap its
/// computes: page-ins, then the page-outs that end in the stage, then one that goes on.
Schedule to_schedule(const TrainingGraph& graph, const StagePlan& plan,
                     Objective objective = Objective::kPoet);

/// Memory a plan may use: `bytes` in every stage, and `stash_bytes` held as the backward phase
/// starts (StagePlanCosts::stash_bytes). A bare byte count limits the stages alone.
struct MemoryBudget {
  MemoryBudget(uint64_t all_bytes) : bytes(all_bytes) {}  // NOLINT: a byte count is a budget
  MemoryBudget(uint64_t all_bytes, uint64_t stash) : bytes(all_bytes), stash_bytes(stash) {}
  uint64_t bytes;
  uint64_t stash_bytes = std::numeric_limits<uint64_t>::max();
};

/// A fast heuristic for POET's problem: starting from store-all, repeatedly bridges the
/// stretch of some tensor's residency that is cheapest to give up per byte over the budget,
/// either by recomputing it where it is needed (with whatever it needs that is not resident)
/// or by paging it out and back in, until every stage fits `budget` (and the stash its
/// own); then undoes each change that is no longer needed, and searches locally (each change
/// swapped for another, or undone and the excess repaired), then kicks the best plan (a few
/// changes at random, repaired and searched again; iterated local search), for up to
/// `search_time_s` in all, or until the plan's energy is at most `good_enough_j`. Measures
/// plans as `objective` does, deadline included.
/// nullopt when it finds no plan, which does not prove that none exists, and when finding
/// one would take longer than `give_up_s` (each candidate bridge measured re-derives the
/// whole plan; past 160 nodes they are measured lazily, the most promising first).
///
/// `seeds` (other planners' schedules, e.g. the baselines POET contains) are further starts:
/// each is read as which tensors it recomputes, pages or keeps where a stage needs them
/// (seed_choices), repaired where the stage form does not fit, and the cheapest start that
/// fits is the one searched locally. A seed whose first computes are not in node order, or
/// that uses a move `allowed` forbids, is skipped.
///
/// With `threads` >= 2 two searches run at once on two threads: under Objective::kTotal with
/// paging its two ways of placing page-outs, otherwise its two starts (the cheapest seed's
/// and its own).
///
/// `on_better`, where given, hears the energy of each cheaper plan as the search finds it
/// (a start, then each change the local search keeps), for progress: from either thread,
/// one call at a time (a small graph's search finds hundreds a second: the caller decides
/// how often to show them).
std::optional<StagePlan> greedy_stage_plan(const TrainingGraph& graph, MemoryBudget budget,
                                           double deadline_s, AllowedMoves allowed = {},
                                           double search_time_s = 5,
                                           Objective objective = Objective::kPoet,
                                           double good_enough_j = 0,
                                           double give_up_s = std::numeric_limits<double>::infinity(),
                                           const std::vector<Schedule>& seeds = {}, int threads = 1,
                                           std::function<void(double)> on_better = {});

}  // namespace ergon::planner
