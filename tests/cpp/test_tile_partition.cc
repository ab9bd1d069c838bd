// Thread partitions (layout/tile_partition.h): every partition is checked by enumeration.
// Each (element, copy) pair has one (thread, slot) and no two share one; owned_by(t)
// enumerates exactly the elements thread t holds; local_index agrees with the slots; and
// the mma.sync accumulator matches the block fragment of layout/mma_layouts.h.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "ir/op.h"
#include "enumerate.h"
#include "layout/layout.h"
#include "layout/mma_layouts.h"
#include "layout/tile_partition.h"

namespace tl {
namespace {

using testing::for_each_index;
using testing::Index;

int64_t slot_of(const TilePartition& p, const Index& x) {
  std::vector<Expr> idx;
  for (auto v : x) idx.push_back(make_int(v));
  return evaluate_index(p.local_index(idx), {});
}

// The elements (with their slots) that owned_by(t) enumerates.
std::map<Index, int64_t> enumerate_owned(const TilePartition& p, int64_t t) {
  Var tv = make_var("t", DataType::Int(32));
  TilePartition::Owned o = p.owned_by(tv, "x", Span{});
  std::map<Index, int64_t> out;
  Index counts = o.extents;
  if (counts.empty()) counts = {1};
  for_each_index(counts, [&](const Index& values) {
    IndexEnv env{{tv.get(), t}};
    for (size_t k = 0; k < o.vars.size(); ++k) env[o.vars[k].get()] = values[k];
    if (o.exists && !evaluate_index(o.exists, env)) return;
    Index x;
    for (auto& e : o.index) x.push_back(evaluate_index(e, env));
    EXPECT_TRUE(out.emplace(x, slot_of(p, x)).second) << p.str() << ": thread " << t << " visits an element twice";
  });
  return out;
}

void expect_well_formed(const TilePartition& p) {
  SCOPED_TRACE(p.str());
  std::set<std::pair<int64_t, int64_t>> used;
  std::map<int64_t, std::map<Index, int64_t>> held;  // thread -> element -> slot
  for_each_index(p.shape(), [&](const Index& x) {
    int64_t slot = slot_of(p, x);
    EXPECT_GE(slot, 0);
    EXPECT_LT(slot, p.local_size());
    std::set<int64_t> threads;
    for (int64_t r = 0; r < p.replicas(); ++r) {
      int64_t t = p.thread_of(x, r);
      EXPECT_GE(t, 0);
      EXPECT_LT(t, p.threads());
      EXPECT_TRUE(threads.insert(t).second) << "two copies of one element in one thread";
      EXPECT_TRUE(used.insert({t, slot}).second) << "two elements share thread " << t << " slot " << slot;
      held[t][x] = slot;
    }
  });
  for (int64_t t = 0; t < p.threads(); ++t) EXPECT_EQ(enumerate_owned(p, t), held[t]) << "thread " << t;
}

TEST(TilePartition, GridsAreBijectiveWithTails) {
  for (Index shape : {Index{64, 64}, Index{16, 1024}, Index{3, 7}, Index{100}, Index{2, 3, 40}, Index{1, 8}})
    for (int64_t threads : {32, 96, 128})
      for (int bytes : {2, 4}) expect_well_formed(TilePartition::grid(shape, threads, bytes));
}

TEST(TilePartition, MmaAccumulatorMatchesTheBlockFragment) {
  for (auto [m, n, wm, wn] : std::vector<std::array<int64_t, 4>>{{64, 64, 2, 2}, {128, 128, 2, 2}, {128, 64, 4, 1},
                                                                 {64, 128, 1, 4}, {16, 8, 1, 1}}) {
    TilePartition p = TilePartition::mma_accumulator(m, n, wm, wn);
    Fragment f = mma::gemm_c_fragment(m, n, wm, wn);
    expect_well_formed(p);
    EXPECT_EQ(p.local_size(), f.local_size());
    for_each_index({m, n}, [&](const Index& x) {
      EXPECT_EQ(p.thread_of(x, 0), f.evaluate_thread(x, 0));
      EXPECT_EQ(slot_of(p, x), f.evaluate_index(x));
    });
  }
}

TEST(TilePartition, AmdAccumulatorMatchesTheBlockFragment) {
  std::vector<amd::MatrixCoreShape> shapes = {{32, 32, 8, 64, false}, {16, 16, 16, 64, false},
                                              {32, 32, 16, 64, false}, {16, 16, 16, 32, true}};
  for (const amd::MatrixCoreShape& s : shapes)
    for (bool transposed : {false, true})
      for (auto [m, n, wm, wn] : std::vector<std::array<int64_t, 4>>{{64, 64, 2, 2}, {128, 64, 2, 1}, {64, 128, 1, 2},
                                                                     {128, 128, 2, 2}, {32, 32, 1, 1}}) {
        if (m % (s.m * wm) || n % (s.n * wn)) continue;
        TilePartition p = TilePartition::amd_accumulator(m, n, wm, wn, s, transposed);
        Fragment f = amd::gemm_c_fragment(m, n, wm, wn, s, transposed);
        SCOPED_TRACE(p.str());
        expect_well_formed(p);
        EXPECT_EQ(p.threads(), f.thread_count());
        EXPECT_EQ(p.local_size(), f.local_size());
        for_each_index({m, n}, [&](const Index& x) {
          EXPECT_EQ(p.thread_of(x, 0), f.evaluate_thread(x, 0));
          EXPECT_EQ(slot_of(p, x), f.evaluate_index(x));
        });
      }
}

TEST(TilePartition, ReplicatedResultsOfReductions) {
  for (const TilePartition& p : {TilePartition::grid({16, 64}, 128, 4), TilePartition::grid({6, 40}, 64, 4),
                                 TilePartition::mma_accumulator(64, 64, 2, 2),
                                 TilePartition::mma_accumulator(128, 32, 4, 1),
                                 TilePartition::amd_accumulator(64, 64, 2, 2, amd::MatrixCoreShape{}, true),
                                 TilePartition::amd_accumulator(64, 64, 2, 2, amd::MatrixCoreShape{16, 16, 16, 64, false}, true),
                                 TilePartition::amd_accumulator(64, 32, 2, 1, amd::MatrixCoreShape{16, 16, 16, 32, true}, false)}) {
    TilePartition rows = p.row_replicated({p.shape()[0]});
    TilePartition cols = p.col_replicated({p.shape()[1]});
    expect_well_formed(rows);
    expect_well_formed(cols);
    // Every thread that holds an element of a row holds that row's value.
    for_each_index(p.shape(), [&](const Index& x) {
      int64_t t = p.thread_of(x, 0);
      bool has_row = false, has_col = false;
      for (int64_t r = 0; r < rows.replicas(); ++r) has_row = has_row || rows.thread_of({x[0]}, r) == t;
      for (int64_t r = 0; r < cols.replicas(); ++r) has_col = has_col || cols.thread_of({x[1]}, r) == t;
      EXPECT_TRUE(has_row && has_col) << p.str();
    });
  }
  // FullRow accumulators of two products share their row results (attention's rescale).
  EXPECT_EQ(TilePartition::mma_accumulator(128, 64, 4, 1).row_replicated({128}),
            TilePartition::mma_accumulator(128, 128, 4, 1).row_replicated({128}));
  amd::MatrixCoreShape mfma{};
  EXPECT_EQ(TilePartition::amd_accumulator(128, 64, 2, 1, mfma, true).row_replicated({128}),
            TilePartition::amd_accumulator(128, 128, 2, 1, mfma, true).row_replicated({128}));
  expect_well_formed(TilePartition::broadcast({5, 3}, 64));
}

}  // namespace
}  // namespace tl
