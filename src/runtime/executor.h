// Runs a graph: kernels created once, a static memory plan per input-shape signature.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kernels/cpu/common/kernel.h"
#include "mminfer/session.h"
#include "runtime/branches.h"
#include "runtime/mode_tuner.h"
#include "runtime/profiler.h"

namespace mminfer::runtime {

class Executor {
 public:
  // Creates every kernel now, so unsupported ops and dtypes fail at load time.
  explicit Executor(ir::Graph graph, InterOp inter_op = InterOp::kAuto);
  ~Executor();

  const ir::Graph& graph() const { return graph_; }
  // inputs: one tensor per graph input, in graph_.inputs order, already validated.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, Profiler* profiler);

 private:
  struct Step {
    int node = 0;
    std::unique_ptr<kernels::Kernel> kernel;
    std::vector<int> inputs, outputs;
    std::vector<int> release;  // values whose last reader is this step
    bool infers_from_shapes = false;  // Kernel::infers_from_shapes, and no output omitted
    // The step's inputs and outputs as slots of values_, for runs that skip every check.
    kernels::Inputs slot_in;
    kernels::Outputs slot_out;
  };
  // What the first run for a shape signature saw.
  struct Recording {
    std::vector<kernels::TensorDesc> descs;  // per value
    std::vector<bool> shape_only;            // per value: computed from input shapes alone
    std::vector<Tensor> values;              // per value: kept where shape_only
    std::vector<int> view_of;                // per value: the value whose bytes it viewed, or -1
    std::vector<int64_t> view_offset;        // per value: where in them, in bytes
  };
  struct ShapePlan {
    // Values that depend only on input shapes (Shape -> Gather -> Concat chains) are fixed for
    // a signature: they are stored here and their nodes skipped.
    std::vector<std::pair<int, Tensor>> frozen;
    std::vector<bool> skip;                   // per step
    std::vector<int> active;                  // the steps not skipped, in order
    std::vector<bool> is_frozen;              // per value: one of `frozen`, never released
    std::vector<kernels::TensorDesc> descs;  // per value, as seen on the planning run
    std::vector<int64_t> offset;             // per value; -1: not in the arena
    std::vector<bool> viewed;                // per value: a view of an input (Kernel::view_input)
    // Steps whose every output aliases or views one input and whose other inputs are constant or
    // frozen: their outputs follow from that input's shape alone, so while it keeps the planned
    // shape they are made from `descs` without asking the kernel (a decode step's reshapes).
    std::vector<bool> fixed;                  // per step
    std::vector<int> source;                  // per value: the value it aliases or views, or -1
    std::vector<int64_t> source_offset;       // per value: where in it, in bytes
    // Steps a steady run takes without checks (mark_direct_steps): fixed steps over bytes at a
    // fixed address, skipped since their views are still in place, and kernels that infer from
    // shapes writing only to their planned arena buffers, run on their slots.
    std::vector<bool> direct;                 // per step
    size_t arena_bytes = 0;  // what the plan needs of the executor's arena
    ModeTuner branch_tuner;  // sequential or concurrent branches, for this signature
    // Each op forking its own threads, or one spin team held for the whole run
    // (core/spin_team.h): tried only for short runs, decode steps, where the forks add up. Six
    // trials each: a team's first runs are slower (llama-79m INT4 at 2 threads: 1.4-1.5 ms,
    // then 0.88-0.95 against 1.0-1.1 without).
    ModeTuner team_tuner{0.97, 6, 20.0};
  };
  // Per-thread buffers reused from step to step.
  struct StepScratch {
    kernels::Inputs in;
    kernels::Outputs out;
    std::vector<kernels::TensorDesc> descs;
    std::vector<Tensor> omitted;  // one per omitted optional output, so their shapes never collide
  };

  ShapePlan build_plan(Recording& rec) const;
  void mark_fixed_steps(ShapePlan& plan) const;
  void mark_direct_steps(ShapePlan& plan) const;
  // Whether every direct step's outputs are the views the plan places: then the next run of the
  // plan may be a steady one.
  bool left_as_planned(const ShapePlan& plan, const std::vector<Tensor>& values) const;
  void reserve_arena(size_t bytes);
  // Returns false when a planned run left some value off its plan (a shape the data decided).
  bool execute(std::vector<Tensor>& values, const ShapePlan* plan, Recording* record, Profiler* profiler);
  bool execute_steady(std::vector<Tensor>& values, const ShapePlan& plan);
  void release_after(const Step& st, std::vector<Tensor>& values, const ShapePlan* plan) const;
  // Runs each branch on its own thread; the plan keeps their buffers apart.
  void execute_branches(std::vector<Tensor>& values, const ShapePlan& plan);
  bool inputs_as_planned(const Step& st, const ShapePlan& plan, const std::vector<Tensor>& values) const;
  bool in_arena(const Tensor& t) const;
  void run_step(size_t si, std::vector<Tensor>& values, const ShapePlan* plan, Recording* record, Profiler* profiler,
                StepScratch& s);

  ir::Graph graph_;
  std::vector<Step> steps_;
  std::vector<int> last_use_;  // per value: step index of last read; INT_MAX for graph outputs
  std::map<std::vector<int64_t>, std::unique_ptr<ShapePlan>> plans_;
  // Reused between runs. Constants are set once, in the constructor; only the values a run
  // computes are reset, so a decode step does not copy every weight's Tensor (shape and all).
  std::vector<Tensor> values_;
  std::vector<int> computed_;  // indices of the values that are not constants
  // The plan whose frozen values values_ still holds from the last run: a run of the same
  // shapes (every decode step) neither copies nor releases them again.
  const ShapePlan* resident_ = nullptr;
  // The resident plan, when its last run left every direct step's outputs in place: its next
  // run is steady, taking direct steps without a check (a decode step's ~230 steps).
  const ShapePlan* steady_ = nullptr;
  // One arena for every plan, as large as the largest: runs of one executor never overlap and
  // graph outputs never live in it, so plans for many shapes cost offsets, not memory.
  std::shared_ptr<void> arena_;
  size_t arena_bytes_ = 0;
  InterOp inter_op_;
  bool runs_onednn_ = false;  // some kernel hands work to oneDNN: a held spin team would starve it
  Branches branches_;
};

}  // namespace mminfer::runtime
