"""A kernel's namespace to a file and back, run inside the kernel itself (see snapshots.py).

Imported by a kernel only when it is snapshotted or restored. Plain data goes through C's
pickle, with modules by name: a namespace of arrays, strings and dicts is written in
milliseconds and restored without importing dill. What C's pickle would only name (functions
and classes defined in the kernel, their instances) or cannot write (open files, lambdas)
goes through dill's ``dump_module``, which rebuilds them by value with the namespace as their
globals: slower (its pickler is pure Python), but faithful. The file's first byte says which.
"""

import importlib
import io
import pickle
import sys
import types

FAST, DILL = b"P", b"D"


class _FastPickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, types.ModuleType):
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__":
            raise pickle.PicklingError("defined in the kernel: dill writes it by value")
        return NotImplemented


def dump(path):
    """Write the kernel's ``__main__`` namespace to ``path``."""
    main = sys.modules["__main__"]
    names = {k: v for k, v in vars(main).items() if not (k.startswith("__") and k.endswith("__"))}
    buffer = io.BytesIO()
    try:
        _FastPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(names)
    except Exception:  # anything C's pickle cannot write faithfully
        buffer = None
    with open(path, "wb") as f:
        if buffer is not None:
            f.write(FAST)
            f.write(buffer.getbuffer())
            return
        f.write(DILL)
        dill = importlib.import_module("dill")
        dill.dump_module(f, module=main, refimported=True, fmode=dill.CONTENTS_FMODE)


def load(path):
    """Fill the kernel's ``__main__`` namespace from a file :func:`dump` wrote."""
    with open(path, "rb") as f:
        if f.read(1) == FAST:
            vars(sys.modules["__main__"]).update(pickle.load(f))
        else:
            importlib.import_module("dill").load_module(f)
