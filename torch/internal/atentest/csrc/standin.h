/* standin.h: a stand-in for another cgo binding of libtorch, for the tests of
 * torch.FromATen and (*torch.Tensor).ToATen. It follows gotorch's convention: a tensor is a
 * heap at::Tensor made with new, passed to C and Go as void *, and freed with delete.
 * Functions that can fail return NULL (pointers) or a negative number. */
#ifndef LDTORCH_ATENTEST_STANDIN_H
#define LDTORCH_ATENTEST_STANDIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define STANDIN_API __attribute__((visibility("default")))
#else
#define STANDIN_API
#endif

/* 0, 1, …, n−1 as float32 on the CPU (cuda = 0) or CUDA device 0 (NULL without one). */
STANDIN_API void *standin_arange(int64_t n, int cuda);
STANDIN_API void *standin_undefined(void); /* a default-constructed (undefined) at::Tensor */
STANDIN_API void *standin_sparse(void);    /* a 2×2 sparse COO tensor */
STANDIN_API void standin_delete(void *t);
STANDIN_API int64_t standin_deleted(void); /* at::Tensors deleted by standin_delete so far */
STANDIN_API int64_t standin_use_count(void *t); /* references to t's TensorImpl */
STANDIN_API int standin_set(void *t, int64_t i, double v); /* element i of the flattened t */
STANDIN_API double standin_get(void *t, int64_t i);
STANDIN_API int standin_same_data(void *a, void *b); /* 1 when both view the same memory */
STANDIN_API int standin_is_cuda(void *t);
STANDIN_API int standin_set_requires_grad(void *t, int on);
STANDIN_API int standin_requires_grad(void *t);
STANDIN_API void *standin_mul(void *t, double s); /* t·s, recorded by autograd */
STANDIN_API int standin_backward_sum(void *t);    /* t.sum().backward() */
STANDIN_API void *standin_grad(void *t);           /* t.grad(), NULL when undefined */
/* Pointers that are not at::Tensor pointers: a zeroed block (its TensorImpl pointer is NULL),
 * and a block whose first word points to a polymorphic object of this library (whose vtable
 * lies in this library, not in libtorch's). Both are static; never delete them. */
STANDIN_API void *standin_zeroed(void);
STANDIN_API void *standin_not_a_tensor(void);
/* dlopen(path, RTLD_NOW | RTLD_LOCAL): 0 on success, -1 on failure. */
STANDIN_API int standin_dlopen(const char *path);

#ifdef __cplusplus
}
#endif
#endif
