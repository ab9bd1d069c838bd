// Barrier insertion at tile level: inside every kernel, `sync_threads()` is placed so that
// every pair of accesses by different threads to a block-visible buffer (shared, shared.dyn,
// and global, see below) is ordered, and no barrier is redundant.
//
// Model. A unit is one statement the whole block executes cooperatively: a tile operator, a
// T.Parallel (or vectorized) loop nest, a serial loop of plain scalar statements, an `if`
// whose condition varies across threads, or a plain store / evaluate at block level. Within
// a unit no barrier is needed (its lowering synchronises itself); between two units that
// touch the same buffer, at least one of them writing, a barrier must lie on every path.
// Sequences, serial / unrolled / pipelined loops, ifs with a block-uniform condition, lets
// and allocations are control flow: barriers go inside them.
//
// Global buffers are treated like shared ones: a tile written to global memory and read
// back by other threads of the same block needs the same ordering (blocks are never
// ordered against each other, so nothing more is promised). Fragment, local and local.var
// buffers are per thread and never need a barrier.
//
// Dataflow. The pass tracks the accesses made since the last barrier (the pending set).
// Before a unit that conflicts with a pending access it inserts a barrier and clears the
// set; then it adds the unit's accesses. Accesses to one buffer whose constant bounds
// (indices bounded over the enclosing loops) are disjoint do not conflict, which keeps
// double-buffered tiles free of barriers. A loop body is planned from an empty set; a second
// trial from the set left at the end of the body reveals loop-carried hazards, which get one
// barrier at the end of the body. Hazards from before the loop into its first iteration get
// one barrier before the loop. After an if, the pending set is the union of both branches;
// a barrier both branches would need on entry is hoisted in front of the if.
// Barriers the user wrote (`T.sync_threads()`) count as barriers.
#pragma once
#include "ir/function.h"

namespace tl {

PrimFunc insert_barriers(const PrimFunc& f);

}  // namespace tl
