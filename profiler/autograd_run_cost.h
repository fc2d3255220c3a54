// What one autograd run costs beyond the work of its nodes, on the calling thread.
//
// The profiler times each layer's backward as an autograd run of its own (to time it apart from
// the others), while a stage runs one over all its layers per backward action. Each run pays a
// fixed cost (the engine's graph task, its root, the walk of the graph before it starts), a few
// microseconds: on a model of 151 layers of about 35 µs each, the layers' sum came to 1.116 of a
// step (reports/layer-sum.md at 4b4f160).
// The profiler takes this cost off each layer's timed backward; the engine's calibration
// (engine_overhead.h), whose layer is profiled with the same cost taken off, then charges it back
// with the engine's own per-micro-batch cost, spread over a stage's actions.
//
// Measured on a chain of small linear layers, backward as one run and as one run per layer, in
// alternating rounds: the difference, per run more.
#pragma once

namespace pipebal::profiler {

// The median over `rounds` (at least 3) of ((runs per layer) - (one run)) / (layers - 1), in
// milliseconds, clamped at 0. On the CPU, with the calling thread's intra-op threads.
double measure_autograd_run_ms(int rounds = 100);

}  // namespace pipebal::profiler
