// conv5x5_kernels.h: the direct 5×5 convolution kernels, written once over a vector type
// and included by each ISA's file (conv5x5_avx2.cc, conv5x5_avx512.cc) inside an anonymous
// namespace, after it defines its vector traits A:
//   A::T, A::lanes (64 bytes of T), A::V, load, loadn (first n lanes, zeros after; the
//   others are not read), store, storen, bcast, zero, fma(a, b, c) = a·b + c (one rounding),
//   and the register blocking: A::kFwdCo × A::kFwdQ output vectors per forward tile,
//   A::kBwCo × A::kBwKw weight-gradient vectors per weight-gradient tile.
//
// Layout. For one image the kernels first build xs, K copies of the zero-padded input, each
// shifted left by one more column and cut to the output width wo:
//   xs[(ci·K + kw)·hp·wo + r·wo + j] = xpad[ci][r][j + kw],   r < hp, j < wo,
// so that the input under tap (kh, kw) of the output position q = i·wo + j is
// xs[(ci·K + kw)·hp·wo + kh·wo + q]: every tap of a run of consecutive output positions is
// one contiguous load, across output rows too, and no work goes to padding columns.
//
// Order of the sums (the same for every ISA, since lanes and the order of the taps are):
// forward, each output element: zero, then one fused multiply-add per (ci, kh, kw) in that
// order, then the bias. Weight gradient: per lane (output positions ≡ lane mod lanes, images
// in order), one fused multiply-add per position; then the lanes, in order.
//
// Branch-free on the data: every branch depends on the geometry only.

template <class A>
struct Conv5 {
  using T = typename A::T;
  using V = typename A::V;
  static constexpr int64_t L = A::lanes;

  // copy copies n elements from src to dst (n ≥ 1) in whole vectors: it reads and writes up
  // to L − 1 elements past n (the callers' buffers have that slack, and what is written there
  // is overwritten or unused).
  static void copy(T *dst, const T *src, int64_t n) {
    for (int64_t j = 0; j < n; j += L) A::store(dst + j, A::load(src + j));
  }

  // build_xs fills xs (xs_len elements) for one image x (cin, h, w). plane (plane_len
  // elements: one channel's zero-padded input, hp·wp, and L of slack) must be zero on the
  // first call (zero_plane); the calls write only inside the padding, so it stays zero.
  static void build_xs(const Geom &g, const T *x, T *xs, T *plane) {
    const int64_t hpwo = g.hp * g.wo;
    for (int64_t ci = 0; ci < g.cin; ci++) {
      // The padding stays zero: only the input's rectangle is written.
      for (int64_t r = 0; r < g.h; r++) {
        T *dst = plane + (r + g.ph) * g.wp + g.pw;
        const T *src = x + (ci * g.h + r) * g.w;
        int64_t j = 0;
        for (; j + L <= g.w; j += L) A::store(dst + j, A::load(src + j));
        if (j < g.w) A::storen(dst + j, A::loadn(src + j, static_cast<int>(g.w - j)), static_cast<int>(g.w - j));
      }
      // Rows of xs in order, so that each whole-vector copy spills only into rows written
      // after it (or into the slack at the end, zeroed below).
      for (int64_t kw = 0; kw < K; kw++) {
        T *dst = xs + (ci * K + kw) * hpwo;
        for (int64_t r = 0; r < g.hp; r++) copy(dst + r * g.wo, plane + r * g.wp + kw, g.wo);
      }
    }
    for (int64_t j = g.cin * K * hpwo; j < g.xs_len; j++) xs[j] = T(0);
  }

  static void zero_plane(const Geom &g, T *plane) {
    for (int64_t j = 0; j < g.plane_len; j++) plane[j] = T(0);
  }

  // fwd_tile computes output channels co0..co0+CO−1 at positions q0..q0+QV·L−1 (those
  // beyond q are neither kept nor stored).
  template <int CO, int QV>
  static void fwd_tile(const Geom &g, const T *xs, const T *w, const T *bias, T *y, int64_t co0, int64_t q0) {
    const int64_t hpwo = g.hp * g.wo, wo = g.wo;
    V acc[CO][QV];
    for (int c = 0; c < CO; c++)
      for (int v = 0; v < QV; v++) acc[c][v] = A::zero();
    for (int64_t ci = 0; ci < g.cin; ci++) {
      const T *wc = w + (co0 * g.cin + ci) * K * K;
      for (int64_t kh = 0; kh < K; kh++) {
        for (int64_t kw = 0; kw < K; kw++) {
          const T *xp = xs + (ci * K + kw) * hpwo + kh * wo + q0;
          V xv[QV];
          for (int v = 0; v < QV; v++) xv[v] = A::load(xp + v * L);
          for (int c = 0; c < CO; c++) {
            const V wv = A::bcast(wc[c * g.cin * K * K + kh * K + kw]);
            for (int v = 0; v < QV; v++) acc[c][v] = A::fma(wv, xv[v], acc[c][v]);
          }
        }
      }
    }
    for (int c = 0; c < CO; c++) {
      const V b = A::bcast(bias == nullptr ? T(0) : bias[co0 + c]);
      T *yc = y + (co0 + c) * g.q;
      for (int v = 0; v < QV; v++) {
        const int64_t q = q0 + v * L;
        const V out = bias == nullptr ? acc[c][v] : A::add(acc[c][v], b);
        if (q + L <= g.q) {
          A::store(yc + q, out);
        } else if (q < g.q) {
          A::storen(yc + q, out, static_cast<int>(g.q - q));
        }
      }
    }
  }

  // fwd_q runs the tiles of CO channels over the vectors v.. of the output plane: blocks of
  // QV vectors, then the remainder with smaller blocks.
  template <int CO, int QV>
  static void fwd_q(const Geom &g, const T *xs, const T *w, const T *bias, T *y, int64_t co0, int64_t v) {
    for (; v + QV <= g.qv; v += QV) fwd_tile<CO, QV>(g, xs, w, bias, y, co0, v * L);
    if constexpr (QV > 1) fwd_q<CO, QV - 1>(g, xs, w, bias, y, co0, v);
  }

  // fwd_co runs the channels co.. in blocks of CO, then the remainder in smaller blocks.
  template <int CO>
  static void fwd_co(const Geom &g, const T *xs, const T *w, const T *bias, T *y, int64_t co) {
    for (; co + CO <= g.cout; co += CO) fwd_q<CO, A::kFwdQ>(g, xs, w, bias, y, co, 0);
    if constexpr (CO > 1) fwd_co<CO - 1>(g, xs, w, bias, y, co);
  }

  static void fwd(const Geom *gp, int64_t n, const T *x, const T *w, const T *bias, T *y, T *scratch) {
    const Geom &g = *gp;
    T *xs = scratch, *plane = scratch + g.xs_len;
    zero_plane(g, plane);
    for (int64_t b = 0; b < n; b++) {
      build_xs(g, x + b * g.cin * g.h * g.w, xs, plane);
      fwd_co<A::kFwdCo>(g, xs, w, bias, y + b * g.cout * g.q, 0);
    }
  }

  // bw_tile accumulates gw[co0..co0+CO−1][ci][kh][kw0..kw0+KW−1] over the n images.
  template <int CO, int KW>
  static void bw_tile(const Geom &g, int64_t n, const T *xs, const T *gyp, T *gw, int64_t co0, int64_t ci, int64_t kh,
                      int64_t kw0) {
    const int64_t hpwo = g.hp * g.wo, full = g.q / L, tail = g.q - full * L;
    V acc[CO][KW];
    for (int c = 0; c < CO; c++)
      for (int k = 0; k < KW; k++) acc[c][k] = A::zero();
    for (int64_t b = 0; b < n; b++) {
      const T *xb = xs + b * g.xs_len + (ci * K + kw0) * hpwo + kh * g.wo;
      const T *gb = gyp + (b * g.cout + co0) * g.qv * L;
      for (int64_t v = 0; v < full; v++) {
        V gv[CO];
        for (int c = 0; c < CO; c++) gv[c] = A::load(gb + c * g.qv * L + v * L);
        for (int k = 0; k < KW; k++) {
          const V xv = A::load(xb + k * hpwo + v * L);
          for (int c = 0; c < CO; c++) acc[c][k] = A::fma(gv[c], xv, acc[c][k]);
        }
      }
      if (tail != 0) {
        // The padded gradient is zero past q; the input is loaded as zeros there too, so
        // that no product pairs a zero with a value from the next row (0·NaN would be NaN).
        V gv[CO];
        for (int c = 0; c < CO; c++) gv[c] = A::load(gb + c * g.qv * L + full * L);
        for (int k = 0; k < KW; k++) {
          const V xv = A::loadn(xb + k * hpwo + full * L, static_cast<int>(tail));
          for (int c = 0; c < CO; c++) acc[c][k] = A::fma(gv[c], xv, acc[c][k]);
        }
      }
    }
    T lanes[L];
    for (int c = 0; c < CO; c++) {
      for (int k = 0; k < KW; k++) {
        A::store(lanes, acc[c][k]);
        T s = lanes[0];
        for (int64_t l = 1; l < L; l++) s += lanes[l];
        gw[(((co0 + c) * g.cin + ci) * K + kh) * K + kw0 + k] = s;
      }
    }
  }

  // bw_kw runs the tiles of CO channels, input channel ci and row kh over the columns kw..
  // in blocks of KW, then the remainder in smaller blocks.
  template <int CO, int KW>
  static void bw_kw(const Geom &g, int64_t n, const T *xs, const T *gyp, T *gw, int64_t co0, int64_t ci, int64_t kh,
                    int64_t kw) {
    for (; kw + KW <= K; kw += KW) bw_tile<CO, KW>(g, n, xs, gyp, gw, co0, ci, kh, kw);
    if constexpr (KW > 1) bw_kw<CO, KW - 1>(g, n, xs, gyp, gw, co0, ci, kh, kw);
  }

  template <int CO>
  static void bw_co(const Geom &g, int64_t n, const T *xs, const T *gyp, T *gw, int64_t co) {
    for (; co + CO <= g.cout; co += CO)
      for (int64_t ci = 0; ci < g.cin; ci++)
        for (int64_t kh = 0; kh < K; kh++) bw_kw<CO, A::kBwKw>(g, n, xs, gyp, gw, co, ci, kh, 0);
    if constexpr (CO > 1) bw_co<CO - 1>(g, n, xs, gyp, gw, co);
  }

  // bwd_weight: the scratch holds the n images' xs, then (unless the output planes are whole
  // vectors, q = qv·L, when gy is read in place) their output gradients with each plane
  // zero-padded to qv·L, then the plane buffer.
  static void bwd_weight(const Geom *gp, int64_t n, const T *x, const T *gy, T *gw, T *scratch) {
    const Geom &g = *gp;
    T *xs = scratch, *gyp = scratch + n * g.xs_len, *plane = gyp + n * g.gyp_len;
    zero_plane(g, plane);
    for (int64_t b = 0; b < n; b++) build_xs(g, x + b * g.cin * g.h * g.w, xs + b * g.xs_len, plane);
    const T *grad = gy;
    if (g.q != g.qv * L) {
      for (int64_t p = 0; p < n * g.cout; p++) {
        const T *src = gy + p * g.q;
        T *dst = gyp + p * g.qv * L;
        int64_t j = 0;
        for (; j + L <= g.q; j += L) A::store(dst + j, A::load(src + j));
        A::store(dst + j, A::loadn(src + j, static_cast<int>(g.q - j)));  // zeros after q
      }
      grad = gyp;
    }
    // Blocks of three channels where they divide the count and the ISA's block does not
    // (LeNet's 6 output channels: 3 + 3 rather than 4 + 2 on AVX-512).
    if constexpr (A::kBwCo > 3) {
      if (g.cout % A::kBwCo != 0 && g.cout % 3 == 0) {
        bw_co<3>(g, n, xs, grad, gw, 0);
        return;
      }
    }
    bw_co<A::kBwCo>(g, n, xs, grad, gw, 0);
  }

};

// The table of one ISA, initialised statically (no code of the ISA runs at load time).
#define LDT_CONV5_TABLE(name, F, D) \
  constexpr Kernels name = {#name, {&Conv5<F>::fwd, &Conv5<F>::bwd_weight}, {&Conv5<D>::fwd, &Conv5<D>::bwd_weight}}
