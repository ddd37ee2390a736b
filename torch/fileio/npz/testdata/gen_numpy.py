# Regenerates the NumPy-written fixtures used by npz_test.go and as FuzzRead seeds.
# Run with a Python that has NumPy: /usr/bin/python3 gen_numpy.py (in this directory).
# Values are simple formulas so the Go test can recompute them.
import numpy as np

def arrays():
    return dict(
        f4=(np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3),
        f8=np.array([np.pi, -np.e, 1e300], dtype=np.float64),
        i8=np.array([[-(2**62), -1], [0, 2**62]], dtype=np.int64),
        i4=np.array([-(2**31), -1, 0, 2**31 - 1], dtype=np.int32),
        u1=np.arange(250, 258, dtype=np.int64).astype(np.uint8).reshape(2, 2, 2),
        b1=np.array([True, False, True]),
        scalar=np.array(2.5),
        empty=np.zeros((0, 3), dtype=np.float32),
    )

np.savez("numpy_savez.npz", **arrays())
np.savez_compressed("numpy_savez_compressed.npz", **arrays())
np.savez("numpy_positional.npz", np.arange(3, dtype=np.int64), np.arange(4, dtype=np.uint8))
np.save("numpy_single.npy", np.arange(5, dtype=np.int64) - 2)
np.savez("numpy_bigendian.npz", x=np.arange(3, dtype=">f4"))
np.savez("numpy_fortran.npz", x=np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
np.savez("numpy_object.npz", x=np.array([1, "a", None], dtype=object))
np.savez("numpy_float16.npz", x=np.arange(3, dtype=np.float16))
np.savez("numpy_structured.npz", x=np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")]))
