/* shim.h: the only header Go sees. A plain C API over LibTorch tensors, ops, autograd and
 * optimizer updates. Conventions (see docs/ARCHITECTURE.md):
 *   - Handles are opaque. ldt_tensor owns one at::Tensor (a refcounted pointer);
 *     ldt_tensor_free releases it and never fails.
 *   - Every fallible function returns ldt_error: NULL on success, otherwise a malloc'd
 *     UTF-8 message (libtorch's text without its C++ backtrace) that the caller frees
 *     with ldt_free_error (or free). No C++ exception ever leaves this library.
 *   - Results come back through out-parameters. Lists are (pointer, count) pairs.
 *   - Optional tensors are NULL handles. Undefined gradients come back as NULL.
 *   - Devices are (type, index) with type 0 = CPU, 1 = CUDA.
 * Bump LDT_ABI_VERSION on any change to this file. */
#ifndef LDTORCH_SHIM_H
#define LDTORCH_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LDT_ABI_VERSION 21

#if defined(__GNUC__)
#define LDT_API __attribute__((visibility("default")))
#else
#define LDT_API
#endif

typedef struct ldt_tensor_s *ldt_tensor;
typedef struct ldt_generator_s *ldt_generator;
typedef char *ldt_error;
typedef struct ldt_process_group_s *ldt_process_group;
typedef struct ldt_work_s *ldt_work;
typedef struct ldt_graph_s *ldt_graph;
typedef struct ldt_script_s *ldt_script;

/* ---- runtime (core.cc) ---------------------------------------------------------------- */
LDT_API int ldt_abi_version(void);
LDT_API const char *ldt_torch_version(void); /* e.g. "1.13.0" */
LDT_API const char *ldt_build_info(void);    /* compiler, CUDA support, build type */
LDT_API void ldt_free_error(ldt_error e);
LDT_API ldt_error ldt_set_num_threads(int n);
/* The least severe of libtorch's own C++ log messages (c10's LOG, which c10d writes its
 * warnings with) that reach stderr: 0 INFO, 1 WARNING (libtorch's default), 2 ERROR,
 * 3 FATAL; -1 takes it from TORCH_CPP_LOG_LEVEL as libtorch itself does. Process-wide. */
LDT_API ldt_error ldt_set_log_level(int level);
LDT_API int ldt_get_num_threads(void);
/* libtorch's C++ backtraces, captured whenever it constructs a c10::Error (milliseconds each;
 * the shim's errors never include them): off from the moment the shim is loaded; 1 gives
 * libtorch's fetcher back, 0 turns it off again. Process-wide, for programs to call.
 * ldt_cpp_backtraces returns 1 while they are on. */
LDT_API ldt_error ldt_set_cpp_backtraces(int on);
LDT_API int ldt_cpp_backtraces(void);
/* libtorch's oneDNN (mkldnn) convolutions for float32 CPU tensors, process-wide, as
 * torch.backends.mkldnn.enabled: ldt_mkldnn_state returns 0 when libtorch was built without
 * oneDNN, 1 when it has oneDNN switched off, 2 when on (libtorch's default). Switching it on
 * in a build without oneDNN is an error. */
LDT_API int ldt_mkldnn_state(void);
LDT_API ldt_error ldt_set_mkldnn(int enabled);
/* The kernel set OpenBLAS chose for this CPU (openblas_get_corename, e.g. "SkylakeX"), or ""
 * when the BLAS in use is not OpenBLAS. */
LDT_API const char *ldt_blas_core(void);
LDT_API int ldt_cuda_is_available(void);
LDT_API int ldt_cuda_device_count(void);
LDT_API ldt_error ldt_cuda_synchronize(int index);
LDT_API ldt_error ldt_cuda_empty_cache(void);
/* GPU index's name (malloc'd: free it), memory in bytes and compute capability. */
LDT_API ldt_error ldt_cuda_device_properties(int index, char **name, int64_t *total_memory, int *major,
                                             int *minor);
/* TF32 for float32 matrix products (cuBLAS) and convolutions (cuDNN) on Ampere and later
 * GPUs: process-wide; a flag only (no effect) on the CPU. */
LDT_API ldt_error ldt_set_allow_tf32(int allow);
LDT_API int ldt_get_allow_tf32(void); /* 1 when either backend may use TF32 */
LDT_API ldt_error ldt_manual_seed(uint64_t seed);
/* A CPU generator: random tensors are drawn on the CPU, then moved, so a seed gives the
 * same numbers on every device. */
LDT_API ldt_error ldt_generator_new(ldt_generator *out, uint64_t seed);
LDT_API void ldt_generator_free(ldt_generator g);
LDT_API ldt_error ldt_generator_get_state(ldt_generator g, ldt_tensor *out);
LDT_API ldt_error ldt_generator_set_state(ldt_generator g, ldt_tensor state);
/* Grad mode is thread-local in libtorch: callers pin their goroutine to one OS thread. */
LDT_API int ldt_set_grad_enabled(int enabled); /* returns the previous mode */
/* CPU blocks of 32 MiB and more from then on: mapped 2 MiB-aligned with transparent huge
 * pages requested, and up to max_bytes of freed ones kept for reuse (alloc.cc). Process-wide,
 * for programs to call (the library never does); 0 stops keeping blocks. */
LDT_API ldt_error ldt_set_cpu_block_cache(int64_t max_bytes);
/* Bytes kept now, blocks mapped and requests served from kept blocks so far (zeros when the
 * cache was never set). */
LDT_API void ldt_cpu_block_cache_stats(int64_t *cached_bytes, int64_t *maps, int64_t *hits);
LDT_API int ldt_is_grad_enabled(void);
/* Operator census (census.cc): from start on, every libtorch operator call and autograd node
 * run, on any thread, is counted by name; stop ends it and returns one line per name,
 * "name\tcalls\ttop\tleaf\n" (malloc'd: free it), most called first. top: calls no other
 * counted call enclosed on their thread; leaf: calls that enclosed none. One census at a time;
 * every call costs a little more while one runs. */
LDT_API ldt_error ldt_op_census_start(void);
LDT_API ldt_error ldt_op_census_stop(char **out);

/* ---- tensor lifetime, queries, creation, copies (tensor.cc) ----------------------------- */
LDT_API void ldt_tensor_free(ldt_tensor t);
LDT_API int ldt_tensor_defined(ldt_tensor t);
LDT_API int ldt_tensor_dim(ldt_tensor t);
LDT_API void ldt_tensor_shape(ldt_tensor t, int64_t *out); /* out sized by dim */
LDT_API int64_t ldt_tensor_numel(ldt_tensor t);
LDT_API int ldt_tensor_dtype(ldt_tensor t); /* c10::ScalarType numbering */
LDT_API void ldt_tensor_device(ldt_tensor t, int *type, int *index);
LDT_API int ldt_tensor_requires_grad(ldt_tensor t);
LDT_API int ldt_tensor_is_leaf(ldt_tensor t);
LDT_API ldt_error ldt_tensor_alias(ldt_tensor *out, ldt_tensor t); /* a new handle, same tensor */

LDT_API ldt_error ldt_from_data(ldt_tensor *out, const void *data, int dtype, const int64_t *shape,
                                int ndim, int dev_type, int dev_index);
/* Converts to dtype on the CPU, contiguous, and copies numel elements into dst. */
LDT_API ldt_error ldt_copy_to(ldt_tensor t, void *dst, int dtype, int64_t numel);
LDT_API ldt_error ldt_item(ldt_tensor t, double *out);
LDT_API ldt_error ldt_full(ldt_tensor *out, const int64_t *shape, int ndim, double value, int dtype,
                           int dev_type, int dev_index);
LDT_API ldt_error ldt_eye(ldt_tensor *out, int64_t n, int dtype, int dev_type, int dev_index);
LDT_API ldt_error ldt_arange(ldt_tensor *out, double start, double end, double step, int dtype,
                             int dev_type, int dev_index);
/* kind: 0 uniform [0,1), 1 standard normal. g may be NULL (the default generator). */
LDT_API ldt_error ldt_rand(ldt_tensor *out, int kind, const int64_t *shape, int ndim, ldt_generator g,
                           int dtype, int dev_type, int dev_index);
LDT_API ldt_error ldt_randperm(ldt_tensor *out, int64_t n, ldt_generator g, int dev_type, int dev_index);
/* dtype < 0 keeps the dtype; dev_type < 0 keeps the device. */
LDT_API ldt_error ldt_to(ldt_tensor *out, ldt_tensor t, int dtype, int dev_type, int dev_index);
LDT_API ldt_error ldt_clone(ldt_tensor *out, ldt_tensor t);
LDT_API ldt_error ldt_detach(ldt_tensor *out, ldt_tensor t);

/* ---- shapes and indexing (shape.cc) ------------------------------------------------------ */
LDT_API ldt_error ldt_reshape(ldt_tensor *out, ldt_tensor t, const int64_t *shape, int ndim);
LDT_API ldt_error ldt_view(ldt_tensor *out, ldt_tensor t, const int64_t *shape, int ndim);
LDT_API ldt_error ldt_expand(ldt_tensor *out, ldt_tensor t, const int64_t *shape, int ndim);
LDT_API ldt_error ldt_transpose(ldt_tensor *out, ldt_tensor t, int64_t d0, int64_t d1);
LDT_API ldt_error ldt_permute(ldt_tensor *out, ldt_tensor t, const int64_t *dims, int ndim);
LDT_API ldt_error ldt_unsqueeze(ldt_tensor *out, ldt_tensor t, int64_t dim);
LDT_API ldt_error ldt_squeeze(ldt_tensor *out, ldt_tensor t, int64_t dim);
LDT_API ldt_error ldt_flatten(ldt_tensor *out, ldt_tensor t, int64_t start, int64_t end);
LDT_API ldt_error ldt_contiguous(ldt_tensor *out, ldt_tensor t);
LDT_API ldt_error ldt_cat(ldt_tensor *out, const ldt_tensor *ts, int n, int64_t dim);
LDT_API ldt_error ldt_stack(ldt_tensor *out, const ldt_tensor *ts, int n, int64_t dim);
LDT_API ldt_error ldt_index_select(ldt_tensor *out, ldt_tensor t, int64_t dim, ldt_tensor index);
LDT_API ldt_error ldt_gather(ldt_tensor *out, ldt_tensor t, int64_t dim, ldt_tensor index);
LDT_API ldt_error ldt_narrow(ldt_tensor *out, ldt_tensor t, int64_t dim, int64_t start, int64_t length);
LDT_API ldt_error ldt_select(ldt_tensor *out, ldt_tensor t, int64_t dim, int64_t index);
LDT_API ldt_error ldt_one_hot(ldt_tensor *out, ldt_tensor labels, int64_t classes);
LDT_API ldt_error ldt_where(ldt_tensor *out, ldt_tensor cond, ldt_tensor a, ldt_tensor b);

/* ---- arithmetic, comparisons, reductions, linear algebra (math.cc) ----------------------- */
enum ldt_unary_op {
  LDT_NEG = 0, LDT_EXP, LDT_LOG, LDT_SQRT, LDT_ABS, LDT_RELU, LDT_SIGMOID, LDT_TANH, LDT_SQUARE,
  LDT_RECIPROCAL, LDT_SIGN, LDT_ISFINITE, LDT_ISNAN, LDT_LOGICAL_NOT, LDT_UNARY_OP_COUNT
};
enum ldt_binary_op {
  LDT_ADD = 0, LDT_SUB, LDT_MUL, LDT_DIV, LDT_POW, LDT_MAXIMUM, LDT_MINIMUM, LDT_EQ, LDT_NE, LDT_LT,
  LDT_LE, LDT_GT, LDT_GE, LDT_MM, LDT_MATMUL, LDT_BMM, LDT_LOGICAL_AND, LDT_LOGICAL_OR,
  LDT_BINARY_OP_COUNT
};
/* Scalar forms: t (op) s; LDT_SUB with reversed = 1 gives s - t, LDT_DIV reversed gives s / t. */
LDT_API ldt_error ldt_unary(ldt_tensor *out, int op, ldt_tensor t);
LDT_API ldt_error ldt_binary(ldt_tensor *out, int op, ldt_tensor a, ldt_tensor b);
LDT_API ldt_error ldt_binary_scalar(ldt_tensor *out, int op, ldt_tensor a, double s, int reversed);
enum ldt_reduce_op {
  LDT_SUM = 0, LDT_MEAN, LDT_AMAX, LDT_AMIN, LDT_PROD, LDT_ALL, LDT_ANY, LDT_LOGSUMEXP,
  LDT_REDUCE_OP_COUNT
};
/* ndims == 0 reduces over all dimensions (LDT_LOGSUMEXP needs dimensions). */
LDT_API ldt_error ldt_reduce(ldt_tensor *out, int op, ldt_tensor t, const int64_t *dims, int ndims,
                             int keepdim);
LDT_API ldt_error ldt_argmax(ldt_tensor *out, ldt_tensor t, int64_t dim, int keepdim);
LDT_API ldt_error ldt_clamp(ldt_tensor *out, ldt_tensor t, double lo, double hi, int has_lo, int has_hi);
/* A 0-dim float64 tensor on the tensors' device (one device for all): 0 when every element of
 * every floating-point tensor is finite, NaN otherwise; nothing is read back to the host. On
 * the CPU one pass over the values; on a GPU a few kernels for the whole list, not a few per
 * tensor. No gradient. */
LDT_API ldt_error ldt_nonfinite_probe(ldt_tensor *out, const ldt_tensor *ts, int n);
LDT_API ldt_error ldt_linalg_solve(ldt_tensor *out, ldt_tensor a, ldt_tensor b);
LDT_API ldt_error ldt_linalg_solve_ex(ldt_tensor *out, ldt_tensor *info, ldt_tensor a, ldt_tensor b); /* no error check; info: 0 = solved */
LDT_API ldt_error ldt_linalg_inv(ldt_tensor *out, ldt_tensor a);

/* In-place updates (they bump the version counter; autograd rejects unsafe ones). */
enum ldt_inplace_op {
  LDT_COPY_ = 0, /* t.copy_(other) */
  LDT_ADD_,      /* t.add_(other, alpha=s) */
  LDT_MUL_,      /* t.mul_(other) */
  LDT_INPLACE_OP_COUNT
};
LDT_API ldt_error ldt_inplace(int op, ldt_tensor t, ldt_tensor other, double s);
enum ldt_inplace_scalar_op { LDT_FILL_ = 0, LDT_MUL_SCALAR_, LDT_ADD_SCALAR_, LDT_INPLACE_SCALAR_OP_COUNT };
LDT_API ldt_error ldt_inplace_scalar(int op, ldt_tensor t, double s);
LDT_API ldt_error ldt_clamp_(ldt_tensor t, double lo, double hi, int has_lo, int has_hi);

/* ---- neural-network ops (nn.cc) ------------------------------------------------------------ */
/* Pairs (h, w) for stride, padding, dilation, kernel sizes. bias may be NULL. */
LDT_API ldt_error ldt_conv2d(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias,
                             const int64_t *stride, const int64_t *padding, const int64_t *dilation,
                             int64_t groups);
LDT_API ldt_error ldt_max_pool2d(ldt_tensor *out, ldt_tensor x, const int64_t *kernel,
                                 const int64_t *stride, const int64_t *padding, int ceil_mode);
/* max_pool2d with kernel 2, stride 2, no padding, floor mode: the same values, tie rule and
 * gradients (double backward included), from a fused CPU kernel for float and double;
 * other devices and types use max_pool2d. */
LDT_API ldt_error ldt_max_pool2x2(ldt_tensor *out, ldt_tensor x);
/* conv2d (same arguments) from the shim's direct kernels where they apply: CPU, float or
 * double, 5×5 weights, stride 1, dilation 1, one group, padding 0..4, at most 16 input and
 * 64 output channels, a CPU with AVX2 and FMA; derivatives of every order. Otherwise, and
 * while they are off, conv2d. */
LDT_API ldt_error ldt_conv2d_direct(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias,
                                    const int64_t *stride, const int64_t *padding,
                                    const int64_t *dilation, int64_t groups);
/* max_pool2x2(conv2d_direct(...)): where the direct kernels apply, one fused kernel that
 * pools each chunk of convolution outputs while they are in the cache (the same values and
 * winners as the two calls), with a backward that never writes the convolution's gradient. */
LDT_API ldt_error ldt_conv2d_max_pool2x2(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias,
                                         const int64_t *stride, const int64_t *padding,
                                         const int64_t *dilation, int64_t groups);
/* max_pool2d_direct(conv2d_direct(...)) with the pool's kernel, stride, padding and ceil mode:
 * where the direct kernels apply, one fused pass that pools each image's convolution outputs
 * while they are in the cache (the same values and indices as the two calls), with a
 * backward that never writes the convolution's gradient (derivatives of every order);
 * otherwise the two calls. */
LDT_API ldt_error ldt_conv2d_max_pool2d(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias,
                                        const int64_t *stride, const int64_t *padding,
                                        const int64_t *dilation, int64_t groups,
                                        const int64_t *pool_kernel, const int64_t *pool_stride,
                                        const int64_t *pool_padding, int ceil_mode);
/* The direct kernels in use: "avx512", "avx2", or "" (off, or none for this CPU). */
LDT_API const char *ldt_direct_conv_isa(void);
/* mode: "best" (the default), "off", "avx2", "avx512". Process-wide, for programs to call
 * (the shim reads no environment); graphs already recorded keep their kernels. */
LDT_API ldt_error ldt_set_direct_conv(const char *mode);
/* The loops of the LRN, the max-pool and ConvNet-3's block (simd_kernels.h): "avx2" where
 * the CPU has AVX2 and FMA, else "baseline"; ldt_set_simd_isa("baseline" or "best") chooses
 * (both give the same bits). */
LDT_API const char *ldt_simd_isa(void);
LDT_API ldt_error ldt_set_simd_isa(const char *mode);
/* max_pool2d (same arguments, dilation 1): on the CPU for contiguous float and double input,
 * libtorch's loop without its overheads, recording the indices only for a graph; backward
 * by max_pool2d_with_indices_backward. The same bits and derivatives as ldt_max_pool2d. */
LDT_API ldt_error ldt_max_pool2d_direct(ldt_tensor *out, ldt_tensor x, const int64_t *kernel,
                                        const int64_t *stride, const int64_t *padding, int ceil_mode);
LDT_API ldt_error ldt_avg_pool2d(ldt_tensor *out, ldt_tensor x, const int64_t *kernel,
                                 const int64_t *stride, const int64_t *padding, int ceil_mode,
                                 int count_include_pad);
LDT_API ldt_error ldt_adaptive_avg_pool2d(ldt_tensor *out, ldt_tensor x, const int64_t *size);
/* weight, bias, running_mean, running_var may be NULL. In training mode with running stats
 * given, the stats are updated in place (momentum as in torch.nn.functional.batch_norm). */
LDT_API ldt_error ldt_batch_norm(ldt_tensor *out, ldt_tensor x, ldt_tensor weight, ldt_tensor bias,
                                 ldt_tensor running_mean, ldt_tensor running_var, int training,
                                 double momentum, double eps);
LDT_API ldt_error ldt_local_response_norm(ldt_tensor *out, ldt_tensor x, int64_t size, double alpha,
                                          double beta, double k);
/* local_response_norm (same arguments) of x, or of relu(x) when relu is non-zero: on the CPU
 * for contiguous 4-d float and double input, one pass per image forward and backward
 * (lrn.cc; the ReLU fused without a graph); values and first derivatives within float
 * rounding of ldt_local_response_norm, higher ones from its differentiable form. */
LDT_API ldt_error ldt_local_response_norm_direct(ldt_tensor *out, ldt_tensor x, int64_t size,
                                                 double alpha, double beta, double k, int relu);
LDT_API ldt_error ldt_linear(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias);
LDT_API ldt_error ldt_softmax(ldt_tensor *out, ldt_tensor x, int64_t dim);
LDT_API ldt_error ldt_log_softmax(ldt_tensor *out, ldt_tensor x, int64_t dim);
/* Mean cross-entropy of logits (B,C) against int64 class indices (B). */
/* check_range: on a GPU, check the class indices first (one read back to the host; CUDA
 * kernels would otherwise assert on the device and leave the context unusable). 0 only for
 * indices already known to be in range. On the CPU libtorch checks them in any case. */
LDT_API ldt_error ldt_cross_entropy(ldt_tensor *out, ldt_tensor logits, ldt_tensor target, int check_range);
/* Mean over rows of sum_c -p_c log softmax(logits)_c, for a probability table p (B,C). */
LDT_API ldt_error ldt_soft_cross_entropy(ldt_tensor *out, ldt_tensor logits, ldt_tensor probs);

/* ConvNet-3's block: avg_pool2d(relu(group_norm(conv2d(x, w, bias, stride 1, padding), C,
 * gamma, beta, eps)), 2×2), C = w's output channels; bias may be NULL. On contiguous CPU
 * float32/float64 tensors, fused loops in cache forward and first-order backward
 * (convblock.cc), equal within rounding; a differentiable backward and other devices and
 * types are the four ops'. */
LDT_API ldt_error ldt_conv_norm_relu_pool(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias,
                                          const int64_t *padding, ldt_tensor gamma, ldt_tensor beta, double eps);
/* ---- image ops (image.cc) ---------------------------------------------------------------- */
/* torch.nn.functional.group_norm; weight and bias (C) may be NULL. groups = C is instance
 * normalisation with a per-channel affine (no running statistics). */
LDT_API ldt_error ldt_group_norm(ldt_tensor *out, ldt_tensor x, int64_t groups, ldt_tensor weight,
                                 ldt_tensor bias, double eps);
/* torch.nn.functional.affine_grid: theta (N, 2, 3), size (N, C, H, W) → grid (N, H, W, 2). */
LDT_API ldt_error ldt_affine_grid(ldt_tensor *out, ldt_tensor theta, const int64_t *size, int ndim,
                                  int align_corners);
/* torch.nn.functional.grid_sample on 4-D input. mode: 0 bilinear, 1 nearest, 2 bicubic;
 * padding_mode: 0 zeros, 1 border, 2 reflection. */
LDT_API ldt_error ldt_grid_sample(ldt_tensor *out, ldt_tensor x, ldt_tensor grid, int mode, int padding_mode,
                                  int align_corners);

/* ---- autograd (autograd.cc) ------------------------------------------------------------------ */
LDT_API ldt_error ldt_set_requires_grad(ldt_tensor t, int requires_grad);
/* grad may be NULL (scalar outputs). */
LDT_API ldt_error ldt_backward(ldt_tensor t, ldt_tensor grad, int retain_graph, int create_graph);
/* *out is NULL when the gradient is undefined. */
LDT_API ldt_error ldt_grad_get(ldt_tensor *out, ldt_tensor t);
LDT_API ldt_error ldt_grad_clear(ldt_tensor t);
/* torch.autograd.grad: out has n_in slots; unused inputs give NULL when allow_unused.
 * grad_outputs may be NULL, or hold NULL entries. */
LDT_API ldt_error ldt_autograd_grad(ldt_tensor *out, const ldt_tensor *outputs, int n_out,
                                    const ldt_tensor *grad_outputs, const ldt_tensor *inputs, int n_in,
                                    int retain_graph, int create_graph, int allow_unused);

/* ---- optimizer updates (optim.cc) -------------------------------------------------------------
 * State lives in caller-owned tensors; each call updates every parameter in place without
 * recording autograd history, exactly as torch.optim's single-tensor (foreach=False) code.
 * Entries of grads may be NULL (that parameter is skipped). step is the 1-based step count. */
LDT_API ldt_error ldt_adam_step(const ldt_tensor *params, const ldt_tensor *grads, const ldt_tensor *exp_avg,
                                const ldt_tensor *exp_avg_sq, int n, int64_t step, double lr, double beta1,
                                double beta2, double eps, double weight_decay);
/* Adam with its step count in step, a 1-element float64 tensor on the parameters' device that
 * the call advances there (torch.optim.Adam's capturable=True): nothing in the update depends
 * on a host value that changes between steps, so it can be recorded in a CUDA graph. The
 * same update as ldt_adam_step up to rounding. No entry of grads may be NULL. */
LDT_API ldt_error ldt_adam_step_capturable(const ldt_tensor *params, const ldt_tensor *grads,
                                           const ldt_tensor *exp_avg, const ldt_tensor *exp_avg_sq, int n,
                                           ldt_tensor step, double lr, double beta1, double beta2, double eps,
                                           double weight_decay);
/* bufs may be NULL when momentum == 0. On the first step the buffer is set to the gradient. */
LDT_API ldt_error ldt_sgd_step(const ldt_tensor *params, const ldt_tensor *grads, const ldt_tensor *bufs,
                               int n, int first_step, double lr, double momentum, double dampening,
                               double weight_decay, int nesterov);

/* ---- CUDA graphs (graph.cc) ---------------------------------------------------------------------
 * A graph with its own side stream on CUDA device device_index. enter makes the side stream
 * current (after the work queued on the current one); leave makes the previous stream wait
 * for it and current again. Warm-up work and capture happen between enter and leave, on one
 * OS thread; capture records the kernels launched (running none); replay launches them on the
 * current stream. Without CUDA every call but free fails. */
LDT_API ldt_error ldt_graph_new(ldt_graph *out, int device_index);
LDT_API void ldt_graph_free(ldt_graph g);
LDT_API ldt_error ldt_graph_enter(ldt_graph g);
LDT_API ldt_error ldt_graph_leave(ldt_graph g);
LDT_API ldt_error ldt_graph_capture_begin(ldt_graph g);
LDT_API ldt_error ldt_graph_capture_end(ldt_graph g);
LDT_API ldt_error ldt_graph_replay(ldt_graph g);

/* ---- collectives over c10d (dist.cc) -----------------------------------------------------------
 * A Gloo process group whose ranks meet through a c10d TCPStore at addr:port. Rank 0 hosts
 * the store unless client_only != 0, when every rank connects to an existing store (torchrun's
 * agent store). prefix (may be NULL) namespaces the keys. Gloo binds to the network
 * interface iface if given, else to the address bind_host if given (e.g. 127.0.0.1), else
 * to the address this host's name resolves to (or loopback). timeout_ms bounds the rendezvous and every later collective: a dead peer
 * fails a collective within about a second, a hung one after the timeout. A collective's
 * caller polls for its end for up to spin_us microseconds (yielding its core between polls)
 * before it sleeps; 0 sleeps at once. Tensors are reduced in place, one collective per
 * tensor, in list order. */
LDT_API int ldt_dist_available(void); /* 1 when the shim was built with c10d/Gloo */
LDT_API ldt_error ldt_dist_init(ldt_process_group *out, const char *addr, int port, int rank, int world_size,
                                int client_only, const char *prefix, const char *iface, const char *bind_host,
                                int64_t timeout_ms, int64_t spin_us);
LDT_API ldt_error ldt_dist_all_reduce_sum(ldt_process_group pg, const ldt_tensor *ts, int n);
LDT_API ldt_error ldt_dist_broadcast(ldt_process_group pg, const ldt_tensor *ts, int n, int root);
/* An all-reduce (sum) of one tensor that runs while the caller goes on: start returns at once
 * with *out, and wait returns when the sum is in t (polling as the group's collectives do),
 * or with the collective's error; either way it frees w (NULL: a no-op). Until then t must
 * not be read or written. Collectives of the group still run in the order they are started. */
LDT_API ldt_error ldt_dist_all_reduce_sum_start(ldt_process_group pg, ldt_tensor t, ldt_work *out);
LDT_API ldt_error ldt_dist_work_wait(ldt_process_group pg, ldt_work w);
LDT_API ldt_error ldt_dist_barrier(ldt_process_group pg);
/* The store, for small notes between ranks (e.g. which rank failed). get blocks until the
 * key exists or the timeout passes; it copies at most cap bytes and sets *n to the length. */
LDT_API ldt_error ldt_dist_store_set(ldt_process_group pg, const char *key, const uint8_t *value, int64_t n);
LDT_API ldt_error ldt_dist_store_check(ldt_process_group pg, const char *key, int *found);
LDT_API ldt_error ldt_dist_store_get(ldt_process_group pg, const char *key, uint8_t *buf, int64_t cap, int64_t *n);
/* Closes the Gloo group but keeps the store (peers' collectives then fail at once while
 * notes can still be read). Never fails. */
LDT_API void ldt_dist_close_collectives(ldt_process_group pg);
/* Never fails; safe after any error (NULL is a no-op). */
LDT_API void ldt_dist_destroy(ldt_process_group pg);

/* ---- tensors shared with other bindings of the same libtorch (aten.cc) ---------------------
 * p is an at::Tensor * to a heap at::Tensor (the `Tensor` of gotorch's cgotorch and of
 * similar cgo bindings: a pointer from `new at::Tensor(...)`, freed with delete).
 * ldt_aten_from makes a new handle of ours on the same tensor: one more reference to its
 * TensorImpl (same storage, same autograd identity), no copy; *p stays the caller's. It
 * checks what can be checked without trusting p: p non-NULL and aligned; one libc10 loaded
 * in the process; a non-NULL TensorImpl whose vtable lies in one of libtorch's libraries
 * (libc10*, libtorch*) in the folder of this shim's libtorch (anything else is not a tensor
 * of this libtorch); defined; strided; on the CPU or a CUDA device. p and the TensorImpl it points to must be readable memory:
 * a wild pointer cannot be detected and crashes, as in C.
 * ldt_aten_to returns, in *out, a new heap at::Tensor on t's tensor (same storage and
 * autograd identity) that the caller owns and frees with delete (its binding's free); it
 * refuses an undefined tensor and a process with two libc10s loaded. */
LDT_API ldt_error ldt_aten_from(ldt_tensor *out, const void *p);
LDT_API ldt_error ldt_aten_to(void **out, ldt_tensor t);
/* The folder (realpath) of the libtorch libraries in use (where libc10 was loaded from);
 * "" if unknown. Never fails. */
LDT_API const char *ldt_libtorch_dir(void);

/* ---- libtorch's pickle format (pickle.cc) ----------------------------------------------------
 * ldt_pickle_save: the container torch::pickle_save writes (torch.save's zip archive) for a
 * dict {str: Tensor} in list order, pickled without TorchScript's type tags so that Python's
 * torch.load, with weights_only=True too, reads it as a plain dict of tensors. names holds
 * the n names back to back, name_lens their byte lengths (non-empty, unique, no NUL). Each
 * tensor is saved detached, on the CPU, holding only its own elements. *buf (malloc'd, *len
 * bytes) is freed with ldt_free_buffer.
 * ldt_pickle_load: what torch::pickle_load reads (also torch.save's files), onto the CPU;
 * the value must be a dict with string keys and tensor values, each storage no longer than
 * its record and each tensor within its storage. The zip's CRCs are not checked here (the
 * caller checks them). *ts: n new handles (malloc'd array), *names: the n names, each
 * NUL-terminated, back to back (malloc'd); free both arrays with ldt_free_buffer, each
 * handle with ldt_tensor_free. */
LDT_API ldt_error ldt_pickle_save(const char *names, const int64_t *name_lens, const ldt_tensor *ts, int n,
                                  void **buf, int64_t *len);
LDT_API ldt_error ldt_pickle_load(const void *data, int64_t len, int *n, ldt_tensor **ts, char **names);
LDT_API void ldt_free_buffer(void *p);

/* ---- TorchScript modules (script.cc) ---------------------------------------------------------
 * ldt_script_load: a module from the bytes of a torch.jit.save file (len bytes at data, read
 * during the call only), every tensor onto the CPU. Free it with ldt_script_free.
 * ldt_script_named: the module's parameters (buffers = 0) or buffers (1), in the order and
 * with the names of Python's named_parameters / named_buffers ("layer1.0.conv1.weight"):
 * *n entries; *names and *owners (malloc'd; ldt_free_buffer) hold the n names and the
 * qualified type names of the submodules holding them (as TorchScript spells them, e.g.
 * "__torch__.torch.nn.modules.conv.Conv2d"), each NUL-terminated, back to back; *ts (malloc'd
 * array; ldt_free_buffer) n new handles on the module's own tensors. Two parameters that are
 * one tensor (tied weights) are an error.
 * ldt_script_module_type: the qualified type name of the submodule at path ("" the module,
 * "a.b" nested; malloc'd, ldt_free_buffer); no such submodule is an error.
 * ldt_script_train: the training flag of the module and every submodule.
 * ldt_script_to: every floating-point parameter and buffer to dtype, every one to the device
 * (in place: the module keeps the same tensors).
 * ldt_script_call: runs method on x with the n tensors ts in place of the parameters or
 * buffers named in names (n names back to back, byte lengths in name_lens) for the call,
 * then puts the module's own back; the given tensors may carry a graph, which the result
 * extends. The method must return one tensor. One thread at a time per module.
 * ldt_script_use_own_kernels: inlines method's graph (the methods it calls, its submodules')
 * and runs its 2-d convolutions and max-pools, fused where a max-pool takes a convolution's
 * output (or its ReLU's) alone, through the shim's own kernels (ldt_conv2d_direct,
 * ldt_max_pool2d_direct, ldt_conv2d_max_pool2d and the 2×2 forms), which fall back to ATen's
 * ops where they do not apply; *replaced is the number of operators replaced. Call it before
 * the method first runs. */
LDT_API ldt_error ldt_script_load(ldt_script *out, const void *data, int64_t len);
LDT_API void ldt_script_free(ldt_script m);
LDT_API ldt_error ldt_script_named(ldt_script m, int buffers, int *n, char **names, char **owners, ldt_tensor **ts);
LDT_API ldt_error ldt_script_module_type(ldt_script m, const char *path, char **type);
LDT_API ldt_error ldt_script_has_method(ldt_script m, const char *name, int *found);
LDT_API ldt_error ldt_script_train(ldt_script m, int on);
LDT_API ldt_error ldt_script_to(ldt_script m, int dtype, int dev_type, int dev_index);
LDT_API ldt_error ldt_script_use_own_kernels(ldt_script m, const char *method, int *replaced);
LDT_API ldt_error ldt_script_call(ldt_tensor *out, ldt_script m, const char *method, const char *names,
                                  const int64_t *name_lens, const ldt_tensor *ts, int n, ldt_tensor x);

#ifdef __cplusplus
}
#endif
#endif /* LDTORCH_SHIM_H */
