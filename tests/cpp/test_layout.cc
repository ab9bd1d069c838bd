// Layout algebra: every operation checked against its stated post-conditions by enumerating
// the tile and comparing with a direct computation.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <vector>

#include "ir/error.h"
#include "ir/op.h"
#include "layout/fragment.h"
#include "enumerate.h"
#include "layout/layout.h"
#include "layout/mma_layouts.h"
#include "layout/swizzle.h"

namespace tl {
namespace {

using testing::for_each_index;
using testing::Index;

template <typename Fn>
void expect_layout_error(Fn&& fn) {
  try {
    fn();
    ADD_FAILURE() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Layout) << e.what();
  }
}

// forward(inverse(y)) == y on every output and inverse(forward(x)) == x on every input.
void expect_inverse_round_trips(const Layout& layout) {
  Layout inv = layout.inverse();
  EXPECT_EQ(inv.input_shape(), layout.output_shape());
  EXPECT_EQ(inv.output_shape(), layout.input_shape());
  for_each_index(layout.input_shape(),
                 [&](const Index& x) { EXPECT_EQ(inv.evaluate(layout.evaluate(x)), x); });
  for_each_index(layout.output_shape(),
                 [&](const Index& y) { EXPECT_EQ(layout.evaluate(inv.evaluate(y)), y); });
}

// ---------------------------------------------------------------- Layout

TEST(Layout, RowMajorPrintsAndEvaluates) {
  Layout layout = Layout::row_major({128, 32});
  EXPECT_EQ(layout.to_string(), "Layout([128, 32] -> [4096]: i * 32 + j)");
  EXPECT_EQ(layout.output_shape(), Index{4096});
  for_each_index({128, 32}, [&](const Index& x) { EXPECT_EQ(layout.evaluate(x), Index{x[0] * 32 + x[1]}); });
  EXPECT_TRUE(layout.is_bijective());
}

TEST(Layout, ColMajorAndStrided) {
  Layout col = Layout::col_major({4, 6, 5});
  for_each_index({4, 6, 5},
                 [&](const Index& x) { EXPECT_EQ(col.evaluate(x), Index{x[0] + 4 * x[1] + 24 * x[2]}); });
  EXPECT_TRUE(col.is_bijective());

  Layout strided = Layout::strided({3, 5}, {7, 1});
  EXPECT_EQ(strided.output_shape(), Index{2 * 7 + 4 + 1});
  for_each_index({3, 5}, [&](const Index& x) { EXPECT_EQ(strided.evaluate(x), Index{7 * x[0] + x[1]}); });
  EXPECT_TRUE(strided.is_injective());
  EXPECT_TRUE(strided.is_in_bounds());
  EXPECT_FALSE(strided.is_bijective());

  // Overlapping rows: not injective.
  Layout overlapping = Layout::strided({3, 5}, {2, 1});
  EXPECT_FALSE(overlapping.is_injective());
  EXPECT_FALSE(overlapping.is_bijective());
}

TEST(Layout, PaddedRowMajor) {
  Layout padded = Layout::padded_row_major({16, 32}, 8);
  EXPECT_EQ(padded.output_shape(), Index{16 * 40});
  for_each_index({16, 32}, [&](const Index& x) { EXPECT_EQ(padded.evaluate(x), Index{x[0] * 40 + x[1]}); });
  EXPECT_TRUE(padded.is_injective());
  EXPECT_TRUE(padded.is_in_bounds());
  EXPECT_FALSE(padded.is_bijective());

  Layout padded3 = Layout::padded_row_major({2, 3, 4}, 1);
  for_each_index({2, 3, 4},
                 [&](const Index& x) { EXPECT_EQ(padded3.evaluate(x), Index{x[0] * 15 + x[1] * 5 + x[2]}); });
  expect_layout_error([] { Layout::padded_row_major({8}, 1); });
}

TEST(Layout, OutputShapeFromBounds) {
  Layout layout({4, 8}, [](const std::vector<Var>& v) {
    return std::vector<Expr>{floordiv(v[1], make_int(2)),
                             add(mul(v[0], make_int(2)), floormod(v[1], make_int(2)))};
  });
  EXPECT_EQ(layout.output_shape(), (Index{4, 8}));
  EXPECT_TRUE(layout.is_bijective());
  EXPECT_EQ(layout.to_string(), "Layout([4, 8] -> [4, 8]: (j // 2, i * 2 + j % 2))");
}

TEST(Layout, IdentityAndRankZero) {
  Layout id = Layout::identity({3, 4});
  for_each_index({3, 4}, [&](const Index& x) { EXPECT_EQ(id.evaluate(x), x); });
  Layout scalar = Layout::row_major({});
  EXPECT_EQ(scalar.input_size(), 1);
  EXPECT_EQ(scalar.evaluate({}), Index{0});
  EXPECT_TRUE(scalar.is_bijective());
}

TEST(Layout, ForwardSubstitutesAndSimplifies) {
  Layout layout = Layout::row_major({8, 16});
  Var a = make_var("a"), b = make_var("b");
  arith::Analyzer analyzer;
  analyzer.bind(a.get(), 0, 2);
  analyzer.bind(b.get(), 0, 4);
  // Element (a * 4 + 1, b * 4) of the tile.
  std::vector<Expr> out =
      layout.forward({add(mul(a, make_int(4)), make_int(1)), mul(b, make_int(4))}, analyzer);
  ASSERT_EQ(out.size(), 1u);
  for (int64_t av = 0; av < 2; ++av)
    for (int64_t bv = 0; bv < 4; ++bv)
      EXPECT_EQ(evaluate_index(out[0], {{a.get(), av}, {b.get(), bv}}), (av * 4 + 1) * 16 + bv * 4);
  // Constants fold completely.
  std::vector<Expr> folded = layout.forward({make_int(3), make_int(5)});
  ASSERT_NE(const_int(folded[0]), nullptr);
  EXPECT_EQ(*const_int(folded[0]), 53);
  expect_layout_error([&] { layout.forward({make_int(1)}); });
}

TEST(Layout, InverseOfAffineLayouts) {
  for (const Layout& layout :
       {Layout::row_major({8, 16}), Layout::col_major({6, 5, 3}), Layout::row_major({7}),
        Layout::strided({4, 3}, {1, 4}), Layout::identity({5, 3})})
    expect_inverse_round_trips(layout);
  // A transpose given as a 2-D output inverts to the transpose back.
  Layout transpose({4, 6}, [](const std::vector<Var>& v) { return std::vector<Expr>{v[1], v[0]}; });
  expect_inverse_round_trips(transpose);
  Layout inv = transpose.inverse();
  EXPECT_TRUE(inv.same_mapping(Layout({6, 4}, [](const std::vector<Var>& v) {
    return std::vector<Expr>{v[1], v[0]};
  })));
  // Row-major inverts to a plain split of the offset.
  EXPECT_EQ(Layout::row_major({128, 32}).inverse().to_string(),
            "Layout([4096] -> [128, 32]: (i // 32, i % 32))");
}

TEST(Layout, InverseOfBitLinearLayouts) {
  // 4x4 blocks of an 8x8 tile, each block row-major: not affine, but a bit permutation.
  Layout blocked({8, 8}, [](const std::vector<Var>& v) {
    Expr block = add(mul(floordiv(v[0], make_int(4)), make_int(2)), floordiv(v[1], make_int(4)));
    Expr inner = add(mul(floormod(v[0], make_int(4)), make_int(4)), floormod(v[1], make_int(4)));
    return std::vector<Expr>{add(mul(block, make_int(16)), inner)};
  });
  EXPECT_TRUE(blocked.is_bijective());
  expect_inverse_round_trips(blocked);
  // An XOR swizzle.
  expect_inverse_round_trips(make_swizzled_layout(16, 64, 16, SwizzleMode::B128));
  expect_inverse_round_trips(make_swizzled_layout(8, 64, 8, SwizzleMode::B64).flatten_output());
}

TEST(Layout, InverseRejectsWhatItCannotInvert) {
  expect_layout_error([] { Layout::padded_row_major({4, 4}, 1).inverse(); });
  expect_layout_error([] { Layout::strided({3, 5}, {2, 1}).inverse(); });
  // Bijective, but blocks of 3 in a 6x6 tile are neither affine nor over powers of two.
  Layout blocked({6, 6}, [](const std::vector<Var>& v) {
    Expr block = add(mul(floordiv(v[0], make_int(3)), make_int(2)), floordiv(v[1], make_int(3)));
    Expr inner = add(mul(floormod(v[0], make_int(3)), make_int(3)), floormod(v[1], make_int(3)));
    return std::vector<Expr>{add(mul(block, make_int(9)), inner)};
  });
  EXPECT_TRUE(blocked.is_bijective());
  expect_layout_error([&] { blocked.inverse(); });
}

TEST(Layout, Compose) {
  Layout swizzle = make_swizzled_layout(8, 64, 16, SwizzleMode::B128);
  Layout flat = Layout::row_major({8, 64});
  Layout composed = flat.compose(swizzle);
  EXPECT_EQ(composed.input_shape(), (Index{8, 64}));
  EXPECT_EQ(composed.output_shape(), Index{512});
  for_each_index(
      {8, 64}, [&](const Index& x) { EXPECT_EQ(composed.evaluate(x), flat.evaluate(swizzle.evaluate(x))); });
  EXPECT_TRUE(composed.is_bijective());

  // Sizes match but shapes differ: the inner output is re-split row-major.
  Layout inner = Layout::col_major({4, 8});  // -> [32]
  Layout outer = Layout::identity({2, 16});
  Layout reshaped = outer.compose(inner);
  for_each_index({4, 8}, [&](const Index& x) {
    int64_t offset = x[0] + 4 * x[1];
    EXPECT_EQ(reshaped.evaluate(x), (Index{offset / 16, offset % 16}));
  });

  // A layout composed with its inverse is the identity.
  Layout round = swizzle.inverse().compose(swizzle);
  EXPECT_TRUE(round.same_mapping(Layout::identity({8, 64})));
  expect_layout_error([&] { flat.compose(Layout::row_major({4, 4})); });
}

TEST(Layout, ReshapeInputAndOutput) {
  Layout base = Layout::col_major({4, 6});
  Layout flat_in = base.reshape_input({24});
  for (int64_t f = 0; f < 24; ++f)
    EXPECT_EQ(flat_in.evaluate({f}), base.evaluate(unflatten_row_major(f, {4, 6})));
  Layout three_d = base.reshape_input({2, 2, 6});
  for_each_index({2, 2, 6}, [&](const Index& x) {
    EXPECT_EQ(three_d.evaluate(x),
              base.evaluate(unflatten_row_major(flatten_row_major(x, {2, 2, 6}), {4, 6})));
  });
  Layout out2 = base.reshape_output({3, 8});
  for_each_index({4, 6}, [&](const Index& x) {
    int64_t offset = base.evaluate(x)[0];
    EXPECT_EQ(out2.evaluate(x), (Index{offset / 8, offset % 8}));
  });
  EXPECT_TRUE(out2.flatten_output().same_mapping(base));
  expect_layout_error([&] { base.reshape_input({5, 5}); });
  expect_layout_error([&] { base.reshape_output({25}); });
}

TEST(Layout, Equality) {
  Layout a = Layout::row_major({4, 8});
  Layout b = Layout::row_major({4, 8});
  EXPECT_TRUE(a.structural_equal(b));
  EXPECT_TRUE(a.same_mapping(b));
  EXPECT_FALSE(a.structural_equal(Layout::col_major({4, 8})));
  EXPECT_FALSE(a.same_mapping(Layout::col_major({4, 8})));
  EXPECT_FALSE(a.structural_equal(Layout::row_major({8, 4})));
  // Same map written differently.
  Layout c({4, 8},
           [](const std::vector<Var>& v) {
             return std::vector<Expr>{
                 select(lt(v[1], make_int(8)), add(mul(v[0], make_int(8)), v[1]), make_int(0))};
           },
           {32});
  EXPECT_TRUE(a.same_mapping(c));
}

TEST(Layout, RejectsBadInput) {
  expect_layout_error([] { Layout::row_major({4, 0}); });
  expect_layout_error([] { Layout::strided({4}, {-1}); });
  expect_layout_error([] { Layout::strided({4}, {1, 2}); });
  expect_layout_error([] {
    Layout({4}, [](const std::vector<Var>& v) { return std::vector<Expr>{v[0]}; }, {4, 4});
  });
  // An output with no constant bound needs an explicit shape.
  Var free = make_var("n");
  expect_layout_error(
      [&] { Layout({4}, [&](const std::vector<Var>& v) { return std::vector<Expr>{add(v[0], free)}; }); });
  Layout uses_free({4}, [&](const std::vector<Var>& v) { return std::vector<Expr>{add(v[0], free)}; }, {8});
  expect_layout_error([&] { uses_free.is_in_bounds(); });
  // By the constant 0 the expression cannot even be built (an integer division by the
  // constant 0 is the program's Type error); by a divisor that evaluates to 0, a Layout error.
  try {
    evaluate_index(floordiv(make_var("x"), make_int(0)), {});
    ADD_FAILURE() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Type) << e.what();
  }
  Var x = make_var("x");
  expect_layout_error([&] { evaluate_index(floordiv(x, sub(x, x)), {{x.get(), 3}}); });
}

TEST(Layout, EvaluateIndexMatchesPythonSemantics) {
  Var x = make_var("x");
  for (int64_t v = -9; v <= 9; ++v) {
    IndexEnv env{{x.get(), v}};
    int64_t fd = v >= 0 ? v / 4 : -((-v + 3) / 4);
    EXPECT_EQ(evaluate_index(floordiv(x, make_int(4)), env), fd);
    EXPECT_EQ(evaluate_index(floormod(x, make_int(4)), env), v - 4 * fd);
    EXPECT_EQ(evaluate_index(min(x, make_int(2)), env), v < 2 ? v : 2);
    EXPECT_EQ(evaluate_index(select(lt(x, make_int(0)), neg(x), x), env), v < 0 ? -v : v);
  }
}

// ---------------------------------------------------------------- swizzles

TEST(Swizzle, PicksTheWidestModeThatFits) {
  EXPECT_EQ(pick_swizzle_mode(64, 16), SwizzleMode::B128);   // 128 bytes
  EXPECT_EQ(pick_swizzle_mode(128, 16), SwizzleMode::B128);  // 256 bytes
  EXPECT_EQ(pick_swizzle_mode(32, 16), SwizzleMode::B64);
  EXPECT_EQ(pick_swizzle_mode(96, 16), SwizzleMode::B64);  // 192 bytes
  EXPECT_EQ(pick_swizzle_mode(16, 16), SwizzleMode::B32);
  EXPECT_EQ(pick_swizzle_mode(8, 16), SwizzleMode::None);
  EXPECT_EQ(pick_swizzle_mode(32, 32), SwizzleMode::B128);
  EXPECT_EQ(pick_swizzle_mode(128, 8), SwizzleMode::B128);
  EXPECT_EQ(pick_swizzle_mode(256, 4), SwizzleMode::B128);
  EXPECT_EQ(pick_swizzle_mode(64, 24), SwizzleMode::None);  // elements straddle 16-byte chunks
  for (int bits : {4, 8, 16, 32, 64})
    for (int64_t cols = 1; cols <= 256; ++cols) {
      SwizzleMode mode = pick_swizzle_mode(cols, bits);
      int64_t row_bytes = cols * bits / 8;
      if (mode != SwizzleMode::None) {
        EXPECT_EQ((cols * bits) % (swizzle_width_bytes(mode) * 8), 0);
      }
      for (SwizzleMode wider : {SwizzleMode::B32, SwizzleMode::B64, SwizzleMode::B128}) {
        if (swizzle_width_bytes(wider) > swizzle_width_bytes(mode)) {
          EXPECT_FALSE((cols * bits) % (swizzle_width_bytes(wider) * 8) == 0)
              << cols << " x " << bits << "b, " << row_bytes << " bytes";
        }
      }
    }
  expect_layout_error([] { make_swizzled_layout(8, 32, 16, SwizzleMode::B128); });
  expect_layout_error([] { make_swizzled_layout(8, 64, 24, SwizzleMode::B32); });
}

TEST(Swizzle, XorLowBits) {
  Var a = make_var("a"), b = make_var("b");
  Expr x = xor_low_bits(a, b, 3);
  for (int64_t av = 0; av < 8; ++av)
    for (int64_t bv = 0; bv < 8; ++bv) EXPECT_EQ(evaluate_index(x, {{a.get(), av}, {b.get(), bv}}), av ^ bv);
}

struct SwizzleCase {
  int64_t rows, cols;
  int bits;
  SwizzleMode mode;
};

const SwizzleCase kSwizzleCases[] = {
    {64, 64, 16, SwizzleMode::B128}, {32, 128, 16, SwizzleMode::B128}, {16, 32, 32, SwizzleMode::B128},
    {16, 128, 8, SwizzleMode::B128}, {8, 256, 4, SwizzleMode::B128},   {12, 64, 16, SwizzleMode::B128},
    {32, 32, 16, SwizzleMode::B64},  {16, 64, 16, SwizzleMode::B64},   {16, 16, 32, SwizzleMode::B64},
    {32, 16, 16, SwizzleMode::B32},  {16, 32, 16, SwizzleMode::B32},   {8, 4, 64, SwizzleMode::B32},
};

TEST(Swizzle, IsABijectionThatKeepsRowsAndChunks) {
  for (const SwizzleCase& s : kSwizzleCases) {
    SCOPED_TRACE(std::string(swizzle_mode_name(s.mode)) + " " + std::to_string(s.rows) + "x" +
                 std::to_string(s.cols) + " " + std::to_string(s.bits) + "b");
    Layout layout = make_swizzled_layout(s.rows, s.cols, s.bits, s.mode);
    EXPECT_EQ(layout.output_shape(), (Index{s.rows, s.cols}));
    EXPECT_TRUE(layout.is_bijective());
    const int64_t vec = 128 / s.bits;
    const int64_t segment = vec * swizzle_width_bytes(s.mode) / 16;
    for (int64_t i = 0; i < s.rows; ++i)
      for (int64_t chunk_start = 0; chunk_start < s.cols; chunk_start += vec) {
        Index first = layout.evaluate({i, chunk_start});
        EXPECT_EQ(first[0], i);                                // rows stay
        EXPECT_EQ(first[1] % vec, 0);                          // chunks stay aligned
        EXPECT_EQ(first[1] / segment, chunk_start / segment);  // and inside their segment
        for (int64_t e = 1; e < vec; ++e)
          EXPECT_EQ(layout.evaluate({i, chunk_start + e}), (Index{i, first[1] + e}));
      }
  }
}

TEST(Swizzle, MatchesTheByteAddressSwizzleOnRowsOfTheSwizzleWidth) {
  // Swizzle<B, 4, 3> on byte offsets: bits [4, 4 + B) ^= bits [7, 7 + B).
  for (SwizzleMode mode : {SwizzleMode::B32, SwizzleMode::B64, SwizzleMode::B128}) {
    int width = swizzle_width_bytes(mode);
    int b = width == 128 ? 3 : width == 64 ? 2 : 1;
    for (int bits : {8, 16, 32}) {
      int64_t cols = width * 8 / bits, rows = 32, bytes = bits / 8;
      Layout layout = make_swizzled_layout(rows, cols, bits, mode);
      for_each_index({rows, cols}, [&](const Index& x) {
        int64_t addr = (x[0] * cols + x[1]) * bytes;
        int64_t mask = ((int64_t(1) << b) - 1) << 7;
        int64_t expected = addr ^ ((addr & mask) >> 3);
        Index y = layout.evaluate(x);
        EXPECT_EQ((y[0] * cols + y[1]) * bytes, expected) << swizzle_mode_name(mode) << " " << bits;
      });
    }
  }
}

TEST(Swizzle, EightRowsAtOneColumnHitEightBankGroups) {
  // A warp reading 16 bytes from each of 8 consecutive rows at the same logical chunk (what
  // ldmatrix does) touches each of the 8 16-byte bank groups of a 128-byte line once.
  auto check = [](int64_t rows, int64_t cols, int bits, SwizzleMode mode) {
    Layout layout = make_swizzled_layout(rows, cols, bits, mode);
    const int64_t vec = 128 / bits, bytes_per_row = cols * bits / 8;
    for (int64_t r0 = 0; r0 + 8 <= rows; ++r0)
      for (int64_t col = 0; col < cols; col += vec) {
        std::set<int64_t> groups;
        for (int64_t r = r0; r < r0 + 8; ++r) {
          Index y = layout.evaluate({r, col});
          int64_t byte = y[0] * bytes_per_row + y[1] * bits / 8;
          groups.insert((byte / 16) % 8);
        }
        EXPECT_EQ(groups.size(), 8u) << swizzle_mode_name(mode) << " rows " << r0 << " col " << col;
      }
  };
  check(64, 64, 16, SwizzleMode::B128);
  check(32, 128, 16, SwizzleMode::B128);
  check(16, 32, 32, SwizzleMode::B128);
  check(16, 128, 8, SwizzleMode::B128);
  check(32, 32, 16, SwizzleMode::B64);  // rows of exactly 64 bytes
  check(32, 16, 16, SwizzleMode::B32);  // rows of exactly 32 bytes
  // Without a swizzle the same access is an 8-way conflict on 128-byte rows.
  Layout plain = make_swizzled_layout(8, 64, 16, SwizzleMode::None);
  std::set<int64_t> groups;
  for (int64_t r = 0; r < 8; ++r) groups.insert((plain.evaluate({r, 0})[1] * 2 / 16) % 8);
  EXPECT_EQ(groups.size(), 1u);
}

// ---------------------------------------------------------------- Fragment

// Every (x, r) lands in a distinct slot and every slot is used: checked directly.
void expect_fragment_bijective(const Fragment& f) {
  std::set<std::pair<int64_t, int64_t>> slots;
  for_each_index(f.input_shape(), [&](const Index& x) {
    for (int64_t r = 0; r < f.replicate_extent(); ++r) {
      int64_t t = f.evaluate_thread(x, r), l = f.evaluate_index(x);
      EXPECT_GE(t, 0);
      EXPECT_LT(t, f.thread_count());
      EXPECT_GE(l, 0);
      EXPECT_LT(l, f.local_size());
      EXPECT_TRUE(slots.insert({t, l}).second) << "slot (" << t << ", " << l << ") used twice";
    }
  });
  EXPECT_EQ(int64_t(slots.size()), f.thread_count() * f.local_size());
  EXPECT_TRUE(f.is_bijective());
  EXPECT_TRUE(f.is_injective());
  EXPECT_TRUE(f.is_complete());
}

TEST(Fragment, ContiguousVectors) {
  Fragment f = Fragment::contiguous_vectors({16, 32}, 64, 4);
  EXPECT_EQ(f.thread_count(), 64);
  EXPECT_EQ(f.local_size(), 8);
  EXPECT_EQ(f.replicate_extent(), 1);
  for_each_index({16, 32}, [&](const Index& x) {
    int64_t flat = x[0] * 32 + x[1];
    EXPECT_EQ(f.evaluate_thread(x, 0), (flat / 4) % 64);
    EXPECT_EQ(f.evaluate_index(x), (flat / 256) * 4 + flat % 4);
  });
  expect_fragment_bijective(f);
  // Each thread's vectors are runs of 4 consecutive row-major elements.
  for_each_index({16, 32}, [&](const Index& x) {
    if (x[1] % 4 != 0) return;
    for (int64_t e = 1; e < 4; ++e) {
      EXPECT_EQ(f.evaluate_thread({x[0], x[1] + e}, 0), f.evaluate_thread(x, 0));
      EXPECT_EQ(f.evaluate_index({x[0], x[1] + e}), f.evaluate_index(x) + e);
    }
  });
  // Fewer vectors than threads: injective, some threads idle.
  Fragment small = Fragment::contiguous_vectors({4, 8}, 16, 4);
  EXPECT_EQ(small.local_size(), 4);
  EXPECT_TRUE(small.is_injective());
  EXPECT_FALSE(small.is_complete());
  EXPECT_FALSE(small.is_bijective());
  expect_layout_error([] { Fragment::contiguous_vectors({3, 5}, 32, 2); });
  expect_layout_error([] { Fragment::contiguous_vectors({4, 4}, 0, 1); });
}

TEST(Fragment, SymbolicThreadAndIndexAgreeWithEvaluation) {
  Fragment f = Fragment::contiguous_vectors({8, 16}, 16, 2);
  Var a = make_var("a"), b = make_var("b"), r = make_var("r");
  Expr t = f.thread({a, b}, r), l = f.index({a, b});
  for_each_index({8, 16}, [&](const Index& x) {
    IndexEnv env{{a.get(), x[0]}, {b.get(), x[1]}, {r.get(), 0}};
    EXPECT_EQ(evaluate_index(t, env), f.evaluate_thread(x, 0));
    EXPECT_EQ(evaluate_index(l, env), f.evaluate_index(x));
  });
  // With the caller's ranges, the thread of a row of 16 elements at 2 per thread is exact.
  arith::Analyzer analyzer;
  analyzer.bind(a.get(), 0, 8);
  analyzer.bind(b.get(), 0, 16);
  Expr bounded = f.thread({a, b}, make_int(0), analyzer);
  arith::ConstIntBound bound = analyzer.const_int_bound(bounded);
  EXPECT_EQ(bound.min, 0);
  EXPECT_EQ(bound.max, 15);
  for_each_index({8, 16}, [&](const Index& x) {
    EXPECT_EQ(evaluate_index(bounded, {{a.get(), x[0]}, {b.get(), x[1]}}), f.evaluate_thread(x, 0));
  });
  expect_layout_error([&] { f.index({a}); });
}

TEST(Fragment, FullyReplicated) {
  Fragment f = Fragment::fully_replicated({4, 4}, 8);
  EXPECT_EQ(f.thread_count(), 8);
  EXPECT_EQ(f.local_size(), 16);
  EXPECT_EQ(f.replicate_extent(), 8);
  expect_fragment_bijective(f);
  // Every thread holds every element, at its row-major position.
  for (int64_t t = 0; t < 8; ++t) {
    std::set<int64_t> held;
    for_each_index({4, 4}, [&](const Index& x) {
      for (int64_t r = 0; r < 8; ++r)
        if (f.evaluate_thread(x, r) == t) {
          EXPECT_EQ(f.evaluate_index(x), x[0] * 4 + x[1]);
          held.insert(x[0] * 4 + x[1]);
        }
    });
    EXPECT_EQ(held.size(), 16u);
  }
}

TEST(Fragment, Replicate) {
  Fragment base = Fragment::contiguous_vectors({8, 8}, 8, 2);
  Fragment twice = base.replicate(2);
  Fragment six = twice.replicate(3);
  EXPECT_EQ(twice.thread_count(), 16);
  EXPECT_EQ(six.thread_count(), 48);
  EXPECT_EQ(six.replicate_extent(), 6);
  EXPECT_EQ(six.local_size(), base.local_size());
  expect_fragment_bijective(twice);
  expect_fragment_bijective(six);
  for_each_index({8, 8}, [&](const Index& x) {
    std::set<int64_t> owners;
    for (int64_t r = 0; r < 6; ++r) owners.insert(six.evaluate_thread(x, r));
    std::set<int64_t> expected;
    for (int64_t k = 0; k < 6; ++k) expected.insert(base.evaluate_thread(x, 0) + 8 * k);
    EXPECT_EQ(owners, expected);
    EXPECT_EQ(six.evaluate_index(x), base.evaluate_index(x));
  });
  expect_layout_error([&] { base.replicate(0); });
}

TEST(Fragment, Repeat) {
  Fragment c = mma::m16n8k16_c_fragment();
  Fragment on_locals = c.repeat({2, 3}, false);
  EXPECT_EQ(on_locals.input_shape(), (Index{32, 24}));
  EXPECT_EQ(on_locals.thread_count(), 32);
  EXPECT_EQ(on_locals.local_size(), 24);
  expect_fragment_bijective(on_locals);
  Fragment on_threads = c.repeat({2, 3}, true);
  EXPECT_EQ(on_threads.thread_count(), 192);
  EXPECT_EQ(on_threads.local_size(), 4);
  expect_fragment_bijective(on_threads);
  for_each_index({32, 24}, [&](const Index& x) {
    Index inner{x[0] % 16, x[1] % 8};
    int64_t copy = (x[0] / 16) * 3 + x[1] / 8;
    EXPECT_EQ(on_locals.evaluate_thread(x, 0), c.evaluate_thread(inner, 0));
    EXPECT_EQ(on_locals.evaluate_index(x), c.evaluate_index(inner) + 4 * copy);
    EXPECT_EQ(on_threads.evaluate_thread(x, 0), c.evaluate_thread(inner, 0) + 32 * copy);
    EXPECT_EQ(on_threads.evaluate_index(x), c.evaluate_index(inner));
  });
  expect_layout_error([&] { c.repeat({2}, true); });
}

TEST(Fragment, InverseNamesTheElementOfEverySlot) {
  for (const Fragment& f :
       {Fragment::contiguous_vectors({16, 16}, 32, 4), Fragment::fully_replicated({2, 4}, 4),
        Fragment::contiguous_vectors({8, 8}, 8, 2).replicate(2), mma::m16n8k16_a_fragment()}) {
    Layout inv = f.inverse();
    EXPECT_EQ(inv.input_shape(), (Index{f.thread_count(), f.local_size()}));
    for_each_index({f.thread_count(), f.local_size()}, [&](const Index& slot) {
      Index xr = inv.evaluate(slot);
      Index x(xr.begin(), xr.end() - 1);
      EXPECT_EQ(f.evaluate_thread(x, xr.back()), slot[0]);
      EXPECT_EQ(f.evaluate_index(x), slot[1]);
    });
  }
  expect_layout_error([] { Fragment::contiguous_vectors({4, 8}, 16, 4).inverse(); });
}

TEST(Fragment, ChecksCatchBrokenFragments) {
  // Two elements in one slot.
  Fragment clash(
      {4, 4}, 4, [](const std::vector<Var>& v, const Var&) -> Expr { return v[0]; },
      [](const std::vector<Var>& v) { return floordiv(v[1], make_int(2)); });
  EXPECT_FALSE(clash.is_injective());
  EXPECT_FALSE(clash.is_bijective());
  // Replicas of an element on the same thread.
  Fragment same_thread(
      {4}, 4, [](const std::vector<Var>& v, const Var&) -> Expr { return v[0]; },
      [](const std::vector<Var>&) { return make_int(0); }, 2);
  EXPECT_FALSE(same_thread.is_injective());
  // A thread index beyond the thread count.
  Fragment too_many(
      {8}, 4, [](const std::vector<Var>& v, const Var&) -> Expr { return v[0]; },
      [](const std::vector<Var>&) { return make_int(0); });
  EXPECT_FALSE(too_many.is_injective());
}

TEST(Fragment, EqualityAndPrinting) {
  EXPECT_TRUE(mma::m16n8k16_c_fragment().structural_equal(mma::m16n8k16_c_fragment()));
  EXPECT_FALSE(mma::m16n8k16_c_fragment().structural_equal(mma::m16n8k16_b_fragment()));
  EXPECT_FALSE(Fragment::fully_replicated({4}, 4).structural_equal(Fragment::fully_replicated({4}, 8)));
  std::string text = mma::m16n8k16_c_fragment().to_string();
  EXPECT_NE(text.find("Fragment([16, 8] -> thread: "), std::string::npos) << text;
  EXPECT_NE(text.find("32 threads, 4 local, replicate 1"), std::string::npos) << text;
}

// ---------------------------------------------------------------- mma / ldmatrix

// The PTX ISA's formulas for m16n8k16 .f16/.bf16, written out directly.
Index doc_a(int64_t lane, int64_t i) {
  int64_t group = lane >> 2, in_group = lane % 4;
  int64_t row = (i < 2 || (i >= 4 && i < 6)) ? group : group + 8;
  int64_t col = in_group * 2 + (i & 1) + (i >= 4 ? 8 : 0);
  return {row, col};
}
Index doc_b(int64_t lane, int64_t i) {
  int64_t group = lane >> 2, in_group = lane % 4;
  return {in_group * 2 + (i & 1) + (i >= 2 ? 8 : 0), group};
}
Index doc_c(int64_t lane, int64_t i) {
  int64_t group = lane >> 2, in_group = lane % 4;
  return {i < 2 ? group : group + 8, in_group * 2 + (i & 1)};
}

void expect_matches_doc(const Fragment& f, int64_t elements_per_lane, Index (*doc)(int64_t, int64_t)) {
  EXPECT_EQ(f.thread_count(), 32);
  EXPECT_EQ(f.local_size(), elements_per_lane);
  expect_fragment_bijective(f);
  for (int64_t lane = 0; lane < 32; ++lane)
    for (int64_t i = 0; i < elements_per_lane; ++i) {
      Index rc = doc(lane, i);
      EXPECT_EQ(f.evaluate_thread(rc, 0), lane) << "lane " << lane << " element " << i;
      EXPECT_EQ(f.evaluate_index(rc), i) << "lane " << lane << " element " << i;
    }
}

TEST(Mma, M16n8k16FragmentsFollowThePtxIsa) {
  expect_matches_doc(mma::m16n8k16_a_fragment(), 8, doc_a);
  expect_matches_doc(mma::m16n8k16_b_fragment(), 4, doc_b);
  expect_matches_doc(mma::m16n8k16_c_fragment(), 4, doc_c);
  // Spot checks against the ISA's figures.
  Fragment c = mma::m16n8k16_c_fragment();
  EXPECT_EQ(c.evaluate_thread({1, 2}, 0), 5);  // lane 5's c0 is at row 1, col 2
  EXPECT_EQ(c.evaluate_index({1, 2}), 0);
  EXPECT_EQ(c.evaluate_thread({9, 3}, 0), 5);  // and its c3 at row 9, col 3
  EXPECT_EQ(c.evaluate_index({9, 3}), 3);
  Fragment a = mma::m16n8k16_a_fragment();
  EXPECT_EQ(a.evaluate_thread({9, 10}, 0), 5);  // lane 5's a6 at row 9, col 10
  EXPECT_EQ(a.evaluate_index({9, 10}), 6);
  Fragment b = mma::m16n8k16_b_fragment();
  EXPECT_EQ(b.evaluate_thread({11, 1}, 0), 5);  // lane 5's b3 at row 11, col 1
  EXPECT_EQ(b.evaluate_index({11, 1}), 3);
}

TEST(Mma, LdmatrixX4) {
  Layout addresses = mma::ldmatrix_x4_address_layout();
  EXPECT_EQ(addresses.output_shape(), (Index{4, 8}));
  EXPECT_TRUE(addresses.is_bijective());
  for (int64_t lane = 0; lane < 32; ++lane)
    EXPECT_EQ(addresses.evaluate({lane}), (Index{lane / 8, lane % 8}));

  Fragment result = mma::ldmatrix_x4_result_fragment();
  EXPECT_EQ(result.local_size(), 8);
  expect_fragment_bijective(result);
  for_each_index({4, 8, 8}, [&](const Index& x) {
    EXPECT_EQ(result.evaluate_thread(x, 0), x[1] * 4 + x[2] / 2);
    EXPECT_EQ(result.evaluate_index(x), x[0] * 2 + x[2] % 2);
  });

  // Loading a 16x16 tile through the A addresses yields exactly the mma A fragment: slot
  // (lane, m * 2 + h) receives row lane / 4, column (lane % 4) * 2 + h of matrix m, whose rows
  // were addressed by lanes m * 8 + r.
  Layout a_addresses = mma::ldmatrix_x4_a_address_layout();
  EXPECT_TRUE(a_addresses.is_bijective());
  Layout a_slots = mma::m16n8k16_a_fragment().inverse();
  for (int64_t lane = 0; lane < 32; ++lane)
    for (int64_t m = 0; m < 4; ++m)
      for (int64_t h = 0; h < 2; ++h) {
        int64_t r = lane / 4, col = (lane % 4) * 2 + h;
        Index row_and_half = a_addresses.evaluate({m * 8 + r});
        Index element{row_and_half[0], row_and_half[1] * 8 + col};
        Index expected = a_slots.evaluate({lane, m * 2 + h});
        EXPECT_EQ(element, Index(expected.begin(), expected.end() - 1)) << "lane " << lane << " m " << m;
      }
}

TEST(Mma, BlockAccumulator) {
  Fragment f = mma::gemm_c_fragment(64, 64, 2, 2);
  EXPECT_EQ(f.input_shape(), (Index{64, 64}));
  EXPECT_EQ(f.thread_count(), 128);
  EXPECT_EQ(f.local_size(), 32);
  expect_fragment_bijective(f);
  Fragment c = mma::m16n8k16_c_fragment();
  for_each_index({64, 64}, [&](const Index& x) {
    int64_t warp = (x[0] / 32) * 2 + x[1] / 32;
    int64_t tile = ((x[0] % 32) / 16) * 4 + (x[1] % 32) / 8;
    Index inner{x[0] % 16, x[1] % 8};
    EXPECT_EQ(f.evaluate_thread(x, 0), warp * 32 + c.evaluate_thread(inner, 0));
    EXPECT_EQ(f.evaluate_index(x), tile * 4 + c.evaluate_index(inner));
  });
  expect_layout_error([] { mma::gemm_c_fragment(64, 64, 3, 2); });
  expect_layout_error([] { mma::gemm_c_fragment(48, 60, 1, 1); });
}

// ---------------------------------------------------------------- AMD MFMA / WMMA

// The register layouts as AMD documents them, written out independently of mma_layouts.cc
// in the form of AMD's Matrix Instruction Calculator (ROCm/amd_matrix_instruction_calculator,
// classes InstCalcGfx9 / InstCalcGfx11, one block, no CBSZ/ABID/BLGP/OPSEL modifiers) and the
// CDNA 2 / CDNA 3 ISA guides' "dependent registers" tables:
//  gfx9 inputs: E = K / (64 / M) elements share a lane's contiguous registers; element
//    (i, k) of A (or (j, k) of B) is item k % E of lane floor(k / E) * M + i.
//  gfx9 32-bit outputs: rows come in 4-row "multi-rows" N lanes wide; 64 / N of them sit
//    side by side in a register, then the next 4 registers continue:
//    register floor(i / (4 * (64 / N))) * 4 + i % 4, lane (floor(i / 4) % (64 / N)) * N + j.
//  gfx11 (wave32) inputs: element (i, k) is item k of lanes i and i + 16.
//  gfx11 32-bit outputs: register floor(i / 2), lane (16 * i + j) % 32.
struct AmdDoc {
  const char* name;
  amd::MatrixCoreShape shape;
};

std::pair<int64_t, int64_t> doc_gfx9_input(const amd::MatrixCoreShape& s, int64_t outer, int64_t k) {
  int64_t per_lane = s.k / (64 / s.m);
  return {(k / per_lane) * s.m + outer, k % per_lane};
}
std::pair<int64_t, int64_t> doc_gfx9_output(const amd::MatrixCoreShape& s, int64_t i, int64_t j) {
  int64_t multirows = 64 / s.n;
  return {((i / 4) % multirows) * s.n + j, (i / (4 * multirows)) * 4 + i % 4};
}
std::pair<int64_t, int64_t> doc_gfx11_output(int64_t i, int64_t j) { return {(16 * i + j) % 32, i / 2}; }

const std::vector<AmdDoc>& mfma_instructions() {
  static const std::vector<AmdDoc> v = {
      {"v_mfma_f32_32x32x8f16 / 32x32x8bf16_1k / i32_32x32x8i8", {32, 32, 8, 64, false}},
      {"v_mfma_f32_16x16x16f16 / 16x16x16bf16_1k / i32_16x16x16i8", {16, 16, 16, 64, false}},
      {"v_mfma_i32_32x32x16_i8 (gfx94x)", {32, 32, 16, 64, false}},
      {"v_mfma_i32_16x16x32_i8 (gfx94x)", {16, 16, 32, 64, false}},
      {"v_mfma_f32_32x32x2f32", {32, 32, 2, 64, false}},
      {"v_mfma_f32_16x16x4f32", {16, 16, 4, 64, false}},
  };
  return v;
}

TEST(Amd, MfmaFragmentsFollowTheIsa) {
  for (const AmdDoc& doc : mfma_instructions()) {
    SCOPED_TRACE(doc.name);
    const amd::MatrixCoreShape& s = doc.shape;
    Fragment a = amd::a_fragment(s), b = amd::b_fragment(s), c = amd::c_fragment(s);
    for (const Fragment* f : {&a, &b, &c}) {
      EXPECT_EQ(f->thread_count(), 64);
      expect_fragment_bijective(*f);
    }
    EXPECT_EQ(a.local_size(), s.m * s.k / 64);
    EXPECT_EQ(c.local_size(), s.m * s.n / 64);
    Layout a_regs = amd::a_registers(s), b_regs = amd::b_registers(s);
    for_each_index({s.m, s.k}, [&](const Index& x) {
      auto [lane, item] = doc_gfx9_input(s, x[0], x[1]);
      EXPECT_EQ(a.evaluate_thread(x, 0), lane) << "A[" << x[0] << "][" << x[1] << "]";
      EXPECT_EQ(a.evaluate_index(x), item) << "A[" << x[0] << "][" << x[1] << "]";
      EXPECT_EQ(a_regs.evaluate({lane, item}), x);
      // B[k][j] is laid out as A[j][k].
      EXPECT_EQ(b.evaluate_thread({x[1], x[0]}, 0), lane);
      EXPECT_EQ(b.evaluate_index({x[1], x[0]}), item);
      EXPECT_EQ(b_regs.evaluate({lane, item}), (Index{x[1], x[0]}));
    });
    for_each_index({s.m, s.n}, [&](const Index& x) {
      auto [lane, reg] = doc_gfx9_output(s, x[0], x[1]);
      EXPECT_EQ(c.evaluate_thread(x, 0), lane) << "D[" << x[0] << "][" << x[1] << "]";
      EXPECT_EQ(c.evaluate_index(x), reg) << "D[" << x[0] << "][" << x[1] << "]";
    });
  }
  // Spot checks against the calculator's tables: v_mfma_f32_16x16x16f16's A[0][4] is
  // v0{16}.[15:0] (item 0 of lane 16) and A[0][2] is v1{0}.[15:0] (item 2 of lane 0);
  // v_mfma_f32_32x32x8f16's D[4][0] is register 0 of lane 32 and D[8][3] register 4 of lane 3.
  amd::MatrixCoreShape s16{16, 16, 16, 64, false}, s32{32, 32, 8, 64, false};
  EXPECT_EQ(amd::a_fragment(s16).evaluate_thread({0, 4}, 0), 16);
  EXPECT_EQ(amd::a_fragment(s16).evaluate_index({0, 4}), 0);
  EXPECT_EQ(amd::a_fragment(s16).evaluate_index({0, 2}), 2);
  EXPECT_EQ(amd::c_fragment(s32).evaluate_thread({4, 0}, 0), 32);
  EXPECT_EQ(amd::c_fragment(s32).evaluate_index({4, 0}), 0);
  EXPECT_EQ(amd::c_fragment(s32).evaluate_thread({8, 3}, 0), 3);
  EXPECT_EQ(amd::c_fragment(s32).evaluate_index({8, 3}), 4);
  EXPECT_EQ(amd::c_fragment(s16).evaluate_thread({5, 7}, 0), 23);  // 16 * (5 / 4) + 7
  EXPECT_EQ(amd::c_fragment(s16).evaluate_index({5, 7}), 1);
  // v_mfma_f32_32x32x2f32: A[i][k] is v0 of lane i + 32 k (one float32 per lane).
  amd::MatrixCoreShape f32{32, 32, 2, 64, false};
  EXPECT_EQ(amd::a_fragment(f32).evaluate_thread({5, 1}, 0), 37);
  EXPECT_EQ(amd::a_fragment(f32).evaluate_index({5, 1}), 0);
}

TEST(Amd, WmmaFragmentsFollowTheIsa) {
  amd::MatrixCoreShape s{16, 16, 16, 32, true};
  Fragment a = amd::a_fragment(s), b = amd::b_fragment(s), c = amd::c_fragment(s);
  for (const Fragment* f : {&a, &b, &c}) {
    EXPECT_EQ(f->thread_count(), 32);
    expect_fragment_bijective(*f);
  }
  EXPECT_EQ(a.replicate_extent(), 2);
  EXPECT_EQ(a.local_size(), 16);
  EXPECT_EQ(c.local_size(), 8);
  Layout a_regs = amd::a_registers(s), b_regs = amd::b_registers(s);
  for_each_index({16, 16}, [&](const Index& x) {
    // A[i][k] / B[k][j]: item k of lanes i and i + 16 (copies 0 and 1).
    for (int64_t r = 0; r < 2; ++r) {
      EXPECT_EQ(a.evaluate_thread(x, r), x[0] + 16 * r);
      EXPECT_EQ(b.evaluate_thread({x[1], x[0]}, r), x[0] + 16 * r);
      EXPECT_EQ(a_regs.evaluate({x[0] + 16 * r, x[1]}), x);
      EXPECT_EQ(b_regs.evaluate({x[0] + 16 * r, x[1]}), (Index{x[1], x[0]}));
    }
    EXPECT_EQ(a.evaluate_index(x), x[1]);
    EXPECT_EQ(b.evaluate_index({x[1], x[0]}), x[1]);
    auto [lane, reg] = doc_gfx11_output(x[0], x[1]);
    EXPECT_EQ(c.evaluate_thread(x, 0), lane) << "D[" << x[0] << "][" << x[1] << "]";
    EXPECT_EQ(c.evaluate_index(x), reg) << "D[" << x[0] << "][" << x[1] << "]";
  });
}

TEST(Amd, BlockAccumulatorAndTheTransposedProduct) {
  for (const AmdDoc& doc : mfma_instructions()) {
    const amd::MatrixCoreShape& s = doc.shape;
    for (bool transposed : {false, true}) {
      SCOPED_TRACE(std::string(doc.name) + (transposed ? " transposed" : ""));
      int64_t bm = 4 * s.m, bn = 2 * s.n;  // 2 x 2 wavefronts of 2 x 1 tiles
      Fragment f = amd::gemm_c_fragment(bm, bn, 2, 2, s, transposed);
      EXPECT_EQ(f.thread_count(), 256);
      expect_fragment_bijective(f);
      for_each_index({bm, bn}, [&](const Index& x) {
        int64_t wave = (x[0] / (bm / 2)) * 2 + x[1] / (bn / 2);
        int64_t tile = (x[0] % (bm / 2)) / s.m;  // one tile along N per wavefront
        int64_t i = x[0] % s.m, j = x[1] % s.n;
        // transposed: the instruction computes D' = B^T A^T, so C[i][j] is D'[j][i].
        auto [lane, reg] = transposed ? doc_gfx9_output(s, j, i) : doc_gfx9_output(s, i, j);
        EXPECT_EQ(f.evaluate_thread(x, 0), wave * 64 + lane);
        EXPECT_EQ(f.evaluate_index(x), tile * s.acc_per_lane() + reg);
      });
    }
  }
  expect_layout_error([] { amd::gemm_c_fragment(64, 64, 3, 1, amd::MatrixCoreShape{}, true); });
  // Transposed, a lane holds 4 consecutive columns of one row (vector stores, and row
  // reductions over few lanes).
  Fragment t = amd::gemm_c_fragment(32, 32, 1, 1, amd::MatrixCoreShape{}, true);
  for (int64_t col = 0; col < 4; ++col) {
    EXPECT_EQ(t.evaluate_thread({5, col}, 0), 5);
    EXPECT_EQ(t.evaluate_index({5, col}), col);
  }
}

TEST(Amd, AccumulatorFeedsTheNextProductsA) {
  // Attention's P V: P (M x K) is the transposed accumulator of the previous product on
  // wavefronts along M; each K step's B input (P enters the transposed product as its B
  // input) must be the kpl consecutive slots chained_a_slot names, in the documented order.
  for (const amd::MatrixCoreShape& s : {amd::MatrixCoreShape{32, 32, 8, 64, false},
                                        amd::MatrixCoreShape{16, 16, 16, 64, false}}) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k));
    int64_t waves = 2, m = 2 * s.m * waves, k = 2 * s.n;
    Fragment p = amd::gemm_c_fragment(m, k, waves, 1, s, true);
    Layout inv = p.inverse();  // (thread, slot) -> (row, col, copy)
    int64_t kpl = s.inputs_per_lane();
    for (int64_t w = 0; w < waves; ++w)
      for (int64_t mi = 0; mi < m / (s.m * waves); ++mi)
        for (int64_t kk = 0; kk < k / s.k; ++kk) {
          int64_t slot = evaluate_index(amd::chained_a_slot(s, make_int(mi), make_int(kk), k), {});
          for (int64_t lane = 0; lane < 64; ++lane)
            for (int64_t e = 0; e < kpl; ++e) {
              // The instruction's B input: item e of lane holds B'[k'][j'] = P[row j'][col k'].
              auto [lane_doc, item_doc] = std::pair<int64_t, int64_t>{lane, e};
              int64_t j = lane % s.m, kin = (lane / s.m) * kpl + e;  // doc_gfx9_input inverted
              EXPECT_EQ(doc_gfx9_input(s, j, kin), std::make_pair(lane_doc, item_doc));
              Index held = inv.evaluate({w * 64 + lane, slot + e});
              EXPECT_EQ(held[0], w * (m / waves) + mi * s.m + j);
              EXPECT_EQ(held[1], kk * s.k + kin);
            }
        }
  }
}

}  // namespace
}  // namespace tl

