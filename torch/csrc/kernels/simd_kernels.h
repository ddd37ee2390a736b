// simd_kernels.h: the LRN's per-image loops, the max-pool's per-plane loop and the ConvNet-3
// block's loops (simd.h),
// written once and included by each
// ISA's file inside an anonymous namespace; the compiler vectorises them for that ISA.
// Builtins only (no <cmath>, no std::), for the reason simd.h gives.
//
// The window sums of an image's squares are formed channel by channel in the composite's
// order (nn.cc: the squares summed in channel order, then divided by size), and
// y = x / (k + α·sum/size)^β, with β = 0.75 as √s·√√s (vectorised square roots instead of a
// pow per element). The backward is the closed form
//   dx_i = g_i / d_i − (2αβ/size) · x_i · Σ_{j : i ∈ window(j)} g_j·x_j / (d_j·s_j),
// d = s^β: channel i takes the terms of the channels [i − (size−1)/2, i + size/2].

template <typename T>
inline T lrn_sqrt(T v);
template <>
inline float lrn_sqrt<float>(float v) {
  return __builtin_sqrtf(v);
}
template <>
inline double lrn_sqrt<double>(double v) {
  return __builtin_sqrt(v);
}
template <typename T>
inline T lrn_pow(T v, T e);
template <>
inline float lrn_pow<float>(float v, float e) {
  return __builtin_powf(v, e);
}
template <>
inline double lrn_pow<double>(double v, double e) {
  return __builtin_pow(v, e);
}

inline int64_t simd_min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t simd_max(int64_t a, int64_t b) { return a > b ? a : b; }
inline int64_t lrn_lo(int64_t c, int64_t before) { return c - before < 0 ? 0 : c - before; }
inline int64_t lrn_hi(int64_t c, int64_t after, int64_t C) { return c + after > C - 1 ? C - 1 : c + after; }

// lrn_scale fills s with k + α·(Σ_{window(c)} x²)/size and d with s^β for one image x.
template <typename T>
void lrn_scale(const T *x, int64_t C, int64_t P, const ldt::simd::LRNArgs *a, T *s, T *d) {
  const T alpha = static_cast<T>(a->alpha), k = static_cast<T>(a->k), size = static_cast<T>(a->size);
  const T beta = static_cast<T>(a->beta);
  const bool b075 = a->beta == 0.75;
  for (int64_t c = 0; c < C; c++) {
    const int64_t lo = lrn_lo(c, a->size / 2), hi = lrn_hi(c, (a->size - 1) / 2, C);
    T *sc = s + c * P;
    T *dc = d + c * P;
    for (int64_t p = 0; p < P; p++) sc[p] = 0;
    for (int64_t j = lo; j <= hi; j++) {
      const T *xj = x + j * P;
      for (int64_t p = 0; p < P; p++) sc[p] += xj[p] * xj[p];
    }
    for (int64_t p = 0; p < P; p++) sc[p] = sc[p] / size * alpha + k;
    if (b075) {
      for (int64_t p = 0; p < P; p++) {
        const T r = lrn_sqrt<T>(sc[p]);
        dc[p] = r * lrn_sqrt<T>(r);
      }
    } else {
      for (int64_t p = 0; p < P; p++) dc[p] = lrn_pow<T>(sc[p], beta);
    }
  }
}

template <typename T>
void lrn_forward(const T *x, T *y, int64_t C, int64_t P, const ldt::simd::LRNArgs *a, int relu, T *s, T *d, T *r) {
  if (relu) {
    for (int64_t i = 0; i < C * P; i++) r[i] = x[i] < 0 ? T(0) : x[i];  // NaN stays NaN
    x = r;
  }
  lrn_scale<T>(x, C, P, a, s, d);
  for (int64_t i = 0; i < C * P; i++) y[i] = x[i] / d[i];
}

template <typename T>
void lrn_backward(const T *x, const T *g, T *gx, int64_t C, int64_t P, const ldt::simd::LRNArgs *a, T *s, T *d,
                  T *acc) {
  const T coef = static_cast<T>(2 * a->alpha * a->beta / static_cast<double>(a->size));
  lrn_scale<T>(x, C, P, a, s, d);
  // t_j = g_j·x_j/(d_j·s_j), kept in s; d becomes 1/d.
  for (int64_t i = 0; i < C * P; i++) {
    const T inv = 1 / d[i];
    s[i] = g[i] * x[i] * inv / s[i];
    d[i] = inv;
  }
  for (int64_t c = 0; c < C; c++) {
    const int64_t lo = lrn_lo(c, (a->size - 1) / 2), hi = lrn_hi(c, a->size / 2, C);
    for (int64_t p = 0; p < P; p++) acc[p] = 0;
    for (int64_t j = lo; j <= hi; j++) {
      const T *tj = s + j * P;
      for (int64_t p = 0; p < P; p++) acc[p] += tj[p];
    }
    const T *xc = x + c * P, *gc = g + c * P, *ic = d + c * P;
    T *oc = gx + c * P;
    for (int64_t p = 0; p < P; p++) oc[p] = gc[p] * ic[p] - coef * xc[p] * acc[p];
  }
}

// PoolVec<T>: 32 bytes of T as a GCC vector (two SSE registers on the baseline ISA, one AVX
// register with -mavx2), for the running maxima kept in registers across a window's taps.
template <typename T>
struct PoolVec;
// M is the integer vector of the same lanes, for __builtin_shuffle's masks.
template <>
struct PoolVec<float> {
  typedef float V __attribute__((vector_size(32)));
  typedef int32_t M __attribute__((vector_size(32)));
  static constexpr int64_t lanes = 8;
};
template <>
struct PoolVec<double> {
  typedef double V __attribute__((vector_size(32)));
  typedef int64_t M __attribute__((vector_size(32)));
  static constexpr int64_t lanes = 4;
};

// split2 copies src[2c] to d0[c] and src[2c + 1] to d1[c] for c in [c0, c1): whole vectors
// through two shuffles, then the rest one by one.
template <typename T>
void split2(const T *src, T *d0, T *d1, int64_t c0, int64_t c1) {
  using V = typename PoolVec<T>::V;
  using M = typename PoolVec<T>::M;
  constexpr int64_t L = PoolVec<T>::lanes;
  M even, odd;
  for (int64_t l = 0; l < L; l++) even[l] = 2 * l, odd[l] = 2 * l + 1;
  int64_t c = c0;
  for (; c + L <= c1; c += L) {
    V a, b;
    __builtin_memcpy(&a, src + 2 * c, sizeof(V));
    __builtin_memcpy(&b, src + 2 * c + L, sizeof(V));
    const V e = __builtin_shuffle(a, b, even), o = __builtin_shuffle(a, b, odd);
    __builtin_memcpy(d0 + c, &e, sizeof(V));
    __builtin_memcpy(d1 + c, &o, sizeof(V));
  }
  for (; c < c1; c++) {
    d0[c] = src[2 * c];
    d1[c] = src[2 * c + 1];
  }
}

// plane_has_nan says whether any of the n elements of x is NaN.
template <typename T>
bool plane_has_nan(const T *x, int64_t n) {
  int any = 0;
  for (int64_t i = 0; i < n; i++) any |= x[i] != x[i];
  return any != 0;
}

// pool_rows_no_nan: one plane's windows from its phases (as pool_planes builds them) when
// the plane holds no NaN: values into out (Ho·Wo) and, when ind is not null, the winners'
// indices (Ho·Wo), with tap (Wo) as scratch. Libtorch's rule then reduces to take = v > b
// per tap, the first maximum in scan order, which the running maxima (and winning taps) of
// a run of output columns follow in registers (a compare and a select or two per tap, where
// the general loop also loads and stores them, and tests for NaN). KW and SW, when not 0,
// are the kernel's width and the stride along the row, known at compile time (AlexCifarNet's
// 3 and 2): the taps' loop then unrolls.
template <typename T, typename Tap, int64_t KW, int64_t SW>
void pool_rows_no_nan(const T *phases, T *out, int64_t *ind, Tap *tap, const ldt::simd::PoolGeom *g) {
  using V = typename PoolVec<T>::V;
  using M = typename PoolVec<T>::M;
  static_assert(sizeof(Tap) == sizeof(T), "taps as wide as the values");
  constexpr int64_t L = PoolVec<T>::lanes;
  const int64_t H = g->H, W = g->W, Ho = g->Ho, Wo = g->Wo, pc = g->pc;
  const int64_t kwidth = KW > 0 ? KW : g->kw, sw = SW > 0 ? SW : g->sw;
  const T ninf = -static_cast<T>(__builtin_inf());
  for (int64_t oh = 0; oh < Ho; oh++) {
    int64_t ih0 = oh * g->sh - g->ph;
    const int64_t ih1 = simd_min(ih0 + g->kh, H);
    ih0 = simd_max(ih0, 0);
    T *o = out + oh * Wo;
    int64_t ow = 0;
    for (; ow + L <= Wo; ow += L) {
      V b;
      M tp;
      for (int64_t l = 0; l < L; l++) b[l] = ninf, tp[l] = -1;
      Tap t = 0;
      for (int64_t ih = ih0; ih < ih1; ih++) {
        // Tap kw is element kw / sw of phase kw % sw, counted rather than divided.
        const T *row = phases + ih * sw * pc + ow;
        for (int64_t kw = 0, ph = 0, c = 0; kw < kwidth; kw++, t++) {
          V v;
          __builtin_memcpy(&v, row + ph * pc + c, sizeof(V));
          const M take = v > b;
          b = take ? v : b;
          if (ind != nullptr) tp = take ? t : tp;
          if (++ph == sw) ph = 0, c++;
        }
      }
      __builtin_memcpy(o + ow, &b, sizeof(V));
      if (ind != nullptr) __builtin_memcpy(tap + ow, &tp, sizeof(M));
    }
    for (; ow < Wo; ow++) {
      T b = ninf;
      Tap tp = -1, t = 0;
      for (int64_t ih = ih0; ih < ih1; ih++) {
        for (int64_t kw = 0; kw < kwidth; kw++, t++) {
          const T v = phases[(ih * sw + kw % sw) * pc + kw / sw + ow];
          const bool take = v > b;
          b = take ? v : b;
          tp = take ? t : tp;
        }
      }
      o[ow] = b;
      tap[ow] = tp;
    }
    if (ind != nullptr) {
      // As pool_planes: the first in-bounds index where nothing beat −∞.
      int64_t *io = ind + oh * Wo;
      for (int64_t ow = 0; ow < Wo; ow++) {
        const int64_t tw = tap[ow], c0 = ow * sw - g->pw;
        io[ow] = tw < 0 ? ih0 * W + simd_max(c0, 0) : (ih0 + tw / kwidth) * W + c0 + tw % kwidth;
      }
    }
  }
}

// pool_planes: max_pool2d of planes [begin, end) (maxpool.cc gives the method): each
// window's candidates in libtorch's order, the taps outside and the output columns inside
// (a row of windows is independent chains of selects that vectorise), the padded row split
// into sw phases (column sw·c + r at phase r, position c) so that tap kw of output column ow
// is the contiguous element ow + kw/sw of phase kw%sw. Out-of-bounds columns hold −∞ (phases
// is filled with it by the caller and only in-bounds columns are written), which never wins
// while best starts at −∞ with the first in-bounds index, as in libtorch. The winner is kept
// as its tap number (Tap: as wide as T), and only when ind is wanted.
template <typename T, typename Tap>
void pool_planes(const T *in, T *out, int64_t *ind, int64_t begin, int64_t end, const ldt::simd::PoolGeom *g,
                 T *phases, T *best, Tap *tap) {
  const int64_t H = g->H, W = g->W, Ho = g->Ho, Wo = g->Wo, pc = g->pc;
  const T ninf = -static_cast<T>(__builtin_inf());
  for (int64_t p = begin; p < end; p++) {
    const T *plane = in + p * H * W;
    for (int64_t r = 0; r < H; r++) {
      int64_t ph = 0;
      if (g->sw == 2) {
        // Both phases from one contiguous read of the row (the strided copies below
        // stalled on every load of a plane that is not in cache yet): the columns whose
        // two padded positions 2c and 2c + 1 are both in the row, then the rest.
        T *d0 = phases + (r * 2) * pc, *d1 = d0 + pc;
        const T *src = plane + r * W - g->pw;
        const int64_t c0 = (g->pw + 1) / 2, c1 = simd_min(pc, (W + g->pw - 1) / 2);
        split2(src, d0, d1, c0, c1);
        const int64_t edge_from[2] = {0, 2 * c1}, edge_to[2] = {2 * c0, 2 * pc};
        for (int e = 0; e < 2; e++) {
          for (int64_t q = edge_from[e]; q < edge_to[e]; q++) {
            if (q - g->pw >= 0 && q - g->pw < W) (q % 2 == 0 ? d0 : d1)[q / 2] = src[q];
          }
        }
        ph = 2;
      }
      for (; ph < g->sw; ph++) {
        // Phase ph holds padded columns sw·c + ph, i.e. input columns sw·c + ph − pw.
        T *dst = phases + (r * g->sw + ph) * pc;
        const T *src = plane + r * W + ph - g->pw;
        const int64_t c0 = g->pw > ph ? (g->pw - ph + g->sw - 1) / g->sw : 0;
        const int64_t c1 = simd_min(pc, (W + g->pw - ph + g->sw - 1) / g->sw);
        for (int64_t c = c0; c < c1; c++) dst[c] = src[c * g->sw];
      }
    }
    if (!plane_has_nan(plane, H * W)) {
      int64_t *pi = ind == nullptr ? nullptr : ind + p * Ho * Wo;
      if (g->kw == 3 && g->sw == 2) {
        pool_rows_no_nan<T, Tap, 3, 2>(phases, out + p * Ho * Wo, pi, tap, g);
      } else {
        pool_rows_no_nan<T, Tap, 0, 0>(phases, out + p * Ho * Wo, pi, tap, g);
      }
      continue;
    }
    for (int64_t oh = 0; oh < Ho; oh++) {
      int64_t ih0 = oh * g->sh - g->ph;
      const int64_t ih1 = simd_min(ih0 + g->kh, H);
      ih0 = simd_max(ih0, 0);
      T *bp = best;
      Tap *tp = tap;
      for (int64_t ow = 0; ow < Wo; ow++) {
        bp[ow] = ninf;
        tp[ow] = -1;
      }
      for (int64_t ih = ih0; ih < ih1; ih++) {
        for (int64_t kw = 0; kw < g->kw; kw++) {
          const T *src = phases + (ih * g->sw + kw % g->sw) * pc + kw / g->sw;
          const Tap t = static_cast<Tap>((ih - ih0) * g->kw + kw);
          if (ind == nullptr) {  // values only: the same winners, no taps to keep
            for (int64_t ow = 0; ow < Wo; ow++) {
              const T v = src[ow], b = bp[ow];
              bp[ow] = (v > b) | (v != v) ? v : b;
            }
            continue;
          }
          for (int64_t ow = 0; ow < Wo; ow++) {
            const T v = src[ow], b = bp[ow];
            const bool take = (v > b) | (v != v);
            bp[ow] = take ? v : b;
            tp[ow] = take ? t : tp[ow];
          }
        }
      }
      T *o = out + (p * Ho + oh) * Wo;
      for (int64_t ow = 0; ow < Wo; ow++) o[ow] = bp[ow];
      if (ind != nullptr) {
        int64_t *io = ind + (p * Ho + oh) * Wo;
        for (int64_t ow = 0; ow < Wo; ow++) {
          const int64_t t = tp[ow], c0 = ow * g->sw - g->pw;
          io[ow] = t < 0 ? ih0 * W + simd_max(c0, 0) : (ih0 + t / g->kw) * W + c0 + t % g->kw;
        }
      }
    }
  }
}

// The ConvNet-3 block (convblock.cc): instance normalisation, ReLU and 2×2 average pooling
// of one convolution output plane, and the convolution itself for images of few channels.
// The plane's mean and biased variance are summed in double over eight fixed lanes (two
// passes; vertical adds, so every ISA sums in the same order), and the plane becomes
// x·scale + shift with scale = γ·rstd, shift = β − mean·scale, as group_norm forms them.
// ReLU keeps NaN (as torch.relu does: v < 0 is false for NaN), and each window is
// ((a + b) + c) + d times ¼, avg_pool2d's sum and division.

// block_relu is torch.relu of one value: NaN passes.
template <typename T>
inline T block_relu(T v) {
  return v < T(0) ? T(0) : v;
}

// block_moments gives the mean and the biased variance of the n values of p.
template <typename T>
inline void block_moments(const T *p, int64_t n, double *mean, double *var) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) lane[j] += static_cast<double>(p[i + j]);
  double sum = 0;
  for (int j = 0; j < 8; j++) sum += lane[j];
  for (; i < n; i++) sum += static_cast<double>(p[i]);
  const double m = sum / static_cast<double>(n);
  for (int j = 0; j < 8; j++) lane[j] = 0;
  for (i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) {
      const double d = static_cast<double>(p[i + j]) - m;
      lane[j] += d * d;
    }
  double ss = 0;
  for (int j = 0; j < 8; j++) ss += lane[j];
  for (; i < n; i++) {
    const double d = static_cast<double>(p[i]) - m;
    ss += d * d;
  }
  *mean = m;
  *var = ss / static_cast<double>(n);
}

// block_affine is the normalisation's y = x·scale + shift of a plane whose mean and
// 1/√(var + eps) are mean and rstd.
template <typename T>
inline void block_affine(double mean, double rstd, T gamma, T beta, T *scale, T *shift) {
  *scale = static_cast<T>(rstd * static_cast<double>(gamma));
  *shift = static_cast<T>(static_cast<double>(beta) - mean * rstd * static_cast<double>(gamma));
}

// block_norm_pool normalises plane p (Ho×Wo) with γ, β, rectifies it and pools it into out
// (Hp×Wp), and keeps the plane's mean and 1/√(var + eps) in stats when not null (for the
// backward); row (4·Wp) is scratch for the two normalised input rows of a row of windows.
template <typename T>
void block_norm_pool(const T *p, T gamma, T beta, const ldt::simd::BlockGeom *g, T *out, T *row, double *stats) {
  double mean, var;
  block_moments(p, g->Ho * g->Wo, &mean, &var);
  const double rstd = 1.0 / __builtin_sqrt(var + g->eps);
  if (stats != nullptr) {
    stats[0] = mean;
    stats[1] = rstd;
  }
  T scale, shift;
  block_affine(mean, rstd, gamma, beta, &scale, &shift);
  const int64_t Wo = g->Wo, Wp = g->Wp, n = 2 * Wp;
  T *r1 = row + n;
  for (int64_t oh = 0; oh < g->Hp; oh++) {
    const T *s0 = p + 2 * oh * Wo, *s1 = s0 + Wo;
    for (int64_t j = 0; j < n; j++) row[j] = block_relu(s0[j] * scale + shift);
    for (int64_t j = 0; j < n; j++) r1[j] = block_relu(s1[j] * scale + shift);
    T *o = out + oh * Wp;
    for (int64_t ow = 0; ow < Wp; ow++) o[ow] = (((row[2 * ow] + row[2 * ow + 1]) + r1[2 * ow]) + r1[2 * ow + 1]) * T(0.25);
  }
}

// block_planes runs block_norm_pool over the planes [begin, end) of in (stats, when not
// null, two per plane of in); row (4·Wp) is scratch.
template <typename T>
void block_planes(const T *in, const T *gamma, const T *beta, int64_t begin, int64_t end,
                  const ldt::simd::BlockGeom *g, T *out, T *row, double *stats) {
  const int64_t P = g->Ho * g->Wo, Q = g->Hp * g->Wp;
  for (int64_t i = begin; i < end; i++) {
    const int64_t c = i % g->Cout;
    block_norm_pool(in + i * P, gamma[c], beta[c], g, out + i * Q, row, stats != nullptr ? stats + 2 * i : nullptr);
  }
}

// block_row is the convolution's output row oh, o (Wo values), from the zero-padded input
// (block_image): bias, then the taps in weight order (input channel, kernel row, kernel
// column). Columns are taken four vectors at a time, then one,
// then one by one, each column's sum in registers across all taps, so the sums are the same
// whichever way a column is reached (and on every ISA: 32-byte vectors of GCC's vector
// extension, lowered to the ISA's registers).
template <typename T>
inline void block_row(const T *padded, const T *wc, T bias, const ldt::simd::BlockGeom *g, int64_t oh, T *o) {
  typedef T vec __attribute__((vector_size(32)));
  constexpr int64_t L = sizeof(vec) / sizeof(T);
  const int64_t Hd = g->H + 2 * g->ph, Wd = g->W + 2 * g->pw, Wo = g->Wo;
  // load reads L values from p, aligned or not (a function that returned the vector would
  // change the ABI between ISAs).
  auto load = [](vec &v, const T *p) { __builtin_memcpy(&v, p, sizeof v); };
  const vec vb = vec{} + bias;
  int64_t ow = 0;
  for (; ow + 4 * L <= Wo; ow += 4 * L) {
    vec a0 = vb, a1 = vb, a2 = vb, a3 = vb;
    for (int64_t ci = 0; ci < g->Cin; ci++)
      for (int64_t kh = 0; kh < g->kh; kh++) {
        const T *src = padded + (ci * Hd + oh + kh) * Wd + ow;
        const T *wk = wc + (ci * g->kh + kh) * g->kw;
        for (int64_t kw = 0; kw < g->kw; kw++) {
          const vec wv = vec{} + wk[kw];
          const T *s = src + kw;
          vec x0, x1, x2, x3;
          load(x0, s);
          load(x1, s + L);
          load(x2, s + 2 * L);
          load(x3, s + 3 * L);
          a0 = a0 + wv * x0;
          a1 = a1 + wv * x1;
          a2 = a2 + wv * x2;
          a3 = a3 + wv * x3;
        }
      }
    __builtin_memcpy(o + ow, &a0, sizeof a0);
    __builtin_memcpy(o + ow + L, &a1, sizeof a1);
    __builtin_memcpy(o + ow + 2 * L, &a2, sizeof a2);
    __builtin_memcpy(o + ow + 3 * L, &a3, sizeof a3);
  }
  for (; ow + L <= Wo; ow += L) {
    vec a = vb;
    for (int64_t ci = 0; ci < g->Cin; ci++)
      for (int64_t kh = 0; kh < g->kh; kh++) {
        const T *src = padded + (ci * Hd + oh + kh) * Wd + ow;
        const T *wk = wc + (ci * g->kh + kh) * g->kw;
        for (int64_t kw = 0; kw < g->kw; kw++) {
          vec v;
          load(v, src + kw);
          a = a + (vec{} + wk[kw]) * v;
        }
      }
    __builtin_memcpy(o + ow, &a, sizeof a);
  }
  for (; ow < Wo; ow++) {
    T a = bias;
    for (int64_t ci = 0; ci < g->Cin; ci++)
      for (int64_t kh = 0; kh < g->kh; kh++) {
        const T *src = padded + (ci * Hd + oh + kh) * Wd + ow;
        const T *wk = wc + (ci * g->kh + kh) * g->kw;
        for (int64_t kw = 0; kw < g->kw; kw++) a = a + wk[kw] * src[kw];
      }
    o[ow] = a;
  }
}

// block_pad copies image x (Cin×H×W) into padded, zeros around it.
template <typename T>
void block_pad(const T *x, const ldt::simd::BlockGeom *g, T *padded) {
  const int64_t Hd = g->H + 2 * g->ph, Wd = g->W + 2 * g->pw;
  for (int64_t ci = 0; ci < g->Cin; ci++)
    for (int64_t r = 0; r < Hd; r++) {
      T *d = padded + (ci * Hd + r) * Wd;
      const int64_t sr = r - g->ph;
      for (int64_t c = 0; c < Wd; c++) {
        const int64_t sc = c - g->pw;
        d[c] = (sr >= 0 && sr < g->H && sc >= 0 && sc < g->W) ? x[(ci * g->H + sr) * g->W + sc] : T(0);
      }
    }
}

// block_conv_plane is output channel co's convolution plane (Ho×Wo) of the padded image.
template <typename T>
inline void block_conv_plane(const T *padded, const T *w, const T *b, int64_t co, const ldt::simd::BlockGeom *g,
                             T *plane) {
  const T bias = b != nullptr ? b[co] : T(0);
  const T *wc = w + co * g->Cin * g->kh * g->kw;
  for (int64_t oh = 0; oh < g->Ho; oh++) block_row(padded, wc, bias, g, oh, plane + oh * g->Wo);
}

// block_image is the whole block for one image: the input copied once into a zero-padded
// buffer, then per output channel its plane (block_conv_plane), normalised and pooled while
// in cache (stats, when not null, two per output channel).
template <typename T>
void block_image(const T *x, const T *w, const T *b, const T *gamma, const T *beta, const ldt::simd::BlockGeom *g,
                 T *out, T *padded, T *plane, T *row, double *stats) {
  block_pad(x, g, padded);
  for (int64_t co = 0; co < g->Cout; co++) {
    block_conv_plane(padded, w, b, co, g, plane);
    block_norm_pool(plane, gamma[co], beta[co], g, out + co * g->Hp * g->Wp, row,
                    stats != nullptr ? stats + 2 * co : nullptr);
  }
}

// The backward. Given the pooled output's gradient gout, a plane's gradient through the
// pooling and the ReLU is gr = ¼·gout of its window unless the normalised value y (computed
// as the forward did) is ≤ 0 (NaN passes, as in relu's threshold_backward), 0 on a last odd
// row or column, which no window takes; with x̂ = (x − mean)·rstd, γ's gradient is Σ gr·x̂, β's Σ gr, and the
// plane's dx = rstd·(γ·gr − γ·Σgr/P − x̂·γ·Σ(gr·x̂)/P), group_norm's backward for one group.
// The sums are in double over eight lanes, as the moments.

// block_plane_backward turns plane z (the convolution's output) and the gradient gout of its
// pooled output into dz (Ho×Wo), the gradient with respect to z, and adds γ's and β's
// gradients into dg and dbe; st is the plane's (mean, rstd); g2 (Wo) is scratch.
template <typename T>
void block_plane_backward(const T *z, T gamma, T beta, const double *st, const T *gout, const ldt::simd::BlockGeom *g,
                          T *dz, double *dg, double *dbe, T *g2) {
  const int64_t Ho = g->Ho, Wo = g->Wo, Hp = g->Hp, Wp = g->Wp, P = Ho * Wo;
  const double mean = st[0], rstd = st[1];
  T scale, shift;
  block_affine(mean, rstd, gamma, beta, &scale, &shift);
  for (int64_t ow = 0; ow < Wo; ow++) g2[ow] = T(0);
  for (int64_t oh = 0; oh < Ho; oh++) {
    T *d = dz + oh * Wo;
    const T *x = z + oh * Wo;
    if (oh >= 2 * Hp) {
      for (int64_t ow = 0; ow < Wo; ow++) d[ow] = T(0);
      continue;
    }
    if (oh % 2 == 0) {  // the window row's gradients, each spread over two columns
      const T *go = gout + (oh / 2) * Wp;
      for (int64_t ow = 0; ow < 2 * Wp; ow++) g2[ow] = go[ow / 2] * T(0.25);
    }
    for (int64_t ow = 0; ow < Wo; ow++) {
      const T y = x[ow] * scale + shift;
      d[ow] = y <= T(0) ? T(0) : g2[ow];
    }
  }
  double ls[8] = {0, 0, 0, 0, 0, 0, 0, 0}, lx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= P; i += 8)
    for (int j = 0; j < 8; j++) {
      const double gr = static_cast<double>(dz[i + j]);
      ls[j] += gr;
      lx[j] += gr * ((static_cast<double>(z[i + j]) - mean) * rstd);
    }
  double sg = 0, sgx = 0;
  for (int j = 0; j < 8; j++) {
    sg += ls[j];
    sgx += lx[j];
  }
  for (; i < P; i++) {
    const double gr = static_cast<double>(dz[i]);
    sg += gr;
    sgx += gr * ((static_cast<double>(z[i]) - mean) * rstd);
  }
  *dg += sgx;
  *dbe += sg;
  const double ga = static_cast<double>(gamma), a = ga * sg / static_cast<double>(P), c = ga * sgx / static_cast<double>(P);
  for (i = 0; i < P; i++) {
    const double xh = (static_cast<double>(z[i]) - mean) * rstd;
    dz[i] = static_cast<T>(rstd * (ga * static_cast<double>(dz[i]) - a - xh * c));
  }
}

// block_sum is Σ of the n values of p, over 16 lanes of T.
template <typename T>
inline T block_sum(const T *p, int64_t n) {
  constexpr int64_t V = 16;
  T lane[V];
  for (int64_t j = 0; j < V; j++) lane[j] = T(0);
  int64_t i = 0;
  for (; i + V <= n; i += V)
    for (int64_t j = 0; j < V; j++) lane[j] += p[i + j];
  T sum = T(0);
  for (int64_t j = 0; j < V; j++) sum += lane[j];
  for (; i < n; i++) sum += p[i];
  return sum;
}

// block_planes_backward runs block_plane_backward over the planes [begin, end) of in (the
// convolution's output), writing their dz and adding the bias's, γ's and β's gradients into
// db, dg and dbe (Cout each); g2 (Wo) is scratch.
template <typename T>
void block_planes_backward(const T *in, const T *gamma, const T *beta, const double *stats, const T *gout,
                           int64_t begin, int64_t end, const ldt::simd::BlockGeom *g, T *dz, double *db, double *dg,
                           double *dbe, T *g2) {
  const int64_t P = g->Ho * g->Wo, Q = g->Hp * g->Wp;
  for (int64_t i = begin; i < end; i++) {
    const int64_t c = i % g->Cout;
    block_plane_backward(in + i * P, gamma[c], beta[c], stats + 2 * i, gout + i * Q, g, dz + i * P, dg + c, dbe + c,
                         g2);
    db[c] += static_cast<double>(block_sum(dz + i * P, P));
  }
}

// block_image_backward is one image's backward through the whole block: per output channel
// the convolution plane recomputed (block_conv_plane: the same values as the forward's), its
// dz (block_plane_backward), then the weight's gradient Σ dz·(the tap's shifted input),
// summed over 16 lanes of T per tap and added into dw (double), the bias's Σ dz into db, and,
// when dx is not null, dz spread back through the taps into dpadded, whose inside is dx.
// padded, dpadded (Cin·Hd·Wd), plane, dz (Ho·Wo) and g2 (Wo) are scratch.
template <typename T>
void block_image_backward(const T *x, const T *w, const T *b, const T *gamma, const T *beta, const double *stats,
                          const T *gout, const ldt::simd::BlockGeom *g, double *dw, double *db, double *dg,
                          double *dbe, T *dx, T *padded, T *plane, T *dz, T *dpadded, T *g2) {
  const int64_t Hd = g->H + 2 * g->ph, Wd = g->W + 2 * g->pw, Ho = g->Ho, Wo = g->Wo, Q = g->Hp * g->Wp;
  const int64_t taps = g->kh * g->kw;
  block_pad(x, g, padded);
  if (dx != nullptr)
    for (int64_t i = 0; i < g->Cin * Hd * Wd; i++) dpadded[i] = T(0);
  constexpr int64_t V = 16;
  for (int64_t co = 0; co < g->Cout; co++) {
    block_conv_plane(padded, w, b, co, g, plane);
    block_plane_backward(plane, gamma[co], beta[co], stats + 2 * co, gout + co * Q, g, dz, dg + co, dbe + co, g2);
    db[co] += static_cast<double>(block_sum(dz, Ho * Wo));
    const T *wc = w + co * g->Cin * taps;
    double *dwc = dw + co * g->Cin * taps;
    for (int64_t ci = 0; ci < g->Cin; ci++)
      for (int64_t kh = 0; kh < g->kh; kh++)
        for (int64_t kw = 0; kw < g->kw; kw++) {
          T acc[V];
          for (int64_t j = 0; j < V; j++) acc[j] = T(0);
          T tail = T(0);
          for (int64_t oh = 0; oh < Ho; oh++) {
            const T *src = padded + (ci * Hd + oh + kh) * Wd + kw;
            const T *d = dz + oh * Wo;
            int64_t ow = 0;
            for (; ow + V <= Wo; ow += V)
              for (int64_t j = 0; j < V; j++) acc[j] += d[ow + j] * src[ow + j];
            for (; ow < Wo; ow++) tail += d[ow] * src[ow];
          }
          T sum = tail;
          for (int64_t j = 0; j < V; j++) sum += acc[j];
          dwc[(ci * g->kh + kh) * g->kw + kw] += static_cast<double>(sum);
          if (dx != nullptr) {
            const T wv = wc[(ci * g->kh + kh) * g->kw + kw];
            for (int64_t oh = 0; oh < Ho; oh++) {
              T *__restrict__ dst = dpadded + (ci * Hd + oh + kh) * Wd + kw;
              const T *__restrict__ d = dz + oh * Wo;
              for (int64_t ow = 0; ow < Wo; ow++) dst[ow] += wv * d[ow];
            }
          }
        }
  }
  if (dx != nullptr)
    for (int64_t ci = 0; ci < g->Cin; ci++)
      for (int64_t h = 0; h < g->H; h++)
        for (int64_t c = 0; c < g->W; c++) dx[(ci * g->H + h) * g->W + c] = dpadded[(ci * Hd + h + g->ph) * Wd + c + g->pw];
}

#define LDT_SIMD_TABLE(name)                                                                      \
  const ldt::simd::Kernels name = {{lrn_forward<float>, lrn_backward<float>},                     \
                                   {lrn_forward<double>, lrn_backward<double>},                   \
                                   {pool_planes<float, int32_t>}, {pool_planes<double, int64_t>},   \
                                   {block_image<float>, block_planes<float>,                      \
                                    block_image_backward<float>, block_planes_backward<float>},   \
                                   {block_image<double>, block_planes<double>,                    \
                                    block_image_backward<double>, block_planes_backward<double>}}
