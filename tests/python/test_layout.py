"""test_layout.py - the package's ctypes copies of the C structs
(python/clformer/_lib.py) are checked against the layouts the library
tells (clf_struct_size, clf_field_offset, clf_field_size) when it loads:
the real ones agree, and a copy with a field moved, a field of another
type, a field the library lacks or another size is refused by name."""
import ctypes
import ctypes.util
import os
import subprocess
import sys
from ctypes import Structure, c_double, c_int, c_int64, c_void_p

import pytest

import clformer
from clformer import _lib


def test_the_package_structs_agree_with_the_library():
    assert _lib.layout_problems(_lib.lib, _lib.STRUCTS) == []
    _lib.check_layouts(_lib.lib, _lib.STRUCTS, _lib.path)


def test_every_mirrored_struct_is_checked():
    mirrored = {v for v in vars(_lib).values()
                if isinstance(v, type) and issubclass(v, Structure) and v is not Structure}
    assert mirrored == set(_lib.STRUCTS)


def test_the_library_answers_unknown_names():
    assert _lib.lib.clf_struct_size(b"clf_no_such_struct") == _lib._LAYOUT_UNKNOWN
    assert _lib.lib.clf_field_offset(b"clf_model_options", b"no_such_field") == _lib._LAYOUT_UNKNOWN
    assert _lib.lib.clf_struct_size(b"clf_model_options") == ctypes.sizeof(_lib.ModelOptions)


def refusal(*structs):
    with pytest.raises(_lib.LayoutError) as e:
        _lib.check_layouts(_lib.lib, structs, "/x/libclformer.so")
    assert isinstance(e.value, ImportError)  # `import clformer` fails with it
    assert str(e.value).startswith("clformer: the library's ")
    assert str(e.value).endswith(": the package and /x/libclformer.so are from different versions")
    return str(e.value)


def test_a_moved_field_is_refused():
    class ModelOptions(Structure):  # simulate before weights
        _clf_name_ = "clf_model_options"
        _fields_ = [("simulate", c_int), ("weights", c_int), ("progress", _lib.PROGRESS_FN),
                    ("progress_user", c_void_p)]
    msg = refusal(ModelOptions)
    assert "the library's clf_model_options.simulate is at offset 4, this package expects 0" in msg
    assert "the library's clf_model_options.weights is at offset 0, this package expects 4" in msg


def test_a_field_of_another_type_is_refused():
    # do_sample as int64: the offsets after it do not move (temperature is
    # aligned to 8 either way), only its size tells
    fields = [(n, c_int64 if n == "do_sample" else t) for n, t in _lib.GenerateOptions._fields_]
    changed = type("GenerateOptions", (Structure,), {"_clf_name_": "clf_generate_options", "_fields_": fields})
    assert changed.temperature.offset == _lib.GenerateOptions.temperature.offset
    assert refusal(changed) == ("clformer: the library's clf_generate_options.do_sample is 4 bytes, this package "
                                "expects 8: the package and /x/libclformer.so are from different versions")


def test_a_field_added_at_the_end_is_refused():
    fields = list(_lib.ImageProcessor._fields_) + [("gamma", c_double)]
    changed = type("ImageProcessor", (Structure,), {"_clf_name_": "clf_image_processor", "_fields_": fields})
    msg = refusal(changed)
    assert "the library's clf_image_processor has no field gamma, this package expects one at offset" in msg
    assert (f"the library's clf_image_processor is {ctypes.sizeof(_lib.ImageProcessor)} bytes, this package "
            f"expects {ctypes.sizeof(changed)}") in msg


def test_a_struct_the_library_lacks_is_refused():
    class Gone(Structure):
        _clf_name_ = "clf_gone"
        _fields_ = [("x", c_int)]
    with pytest.raises(_lib.LayoutError, match="the library has no struct clf_gone"):
        _lib.check_layouts(_lib.lib, [_lib.Image, Gone], "/x/libclformer.so")


def test_import_refuses_a_library_without_the_functions():
    """`import clformer` against a library that is not the package's (here
    libm) fails with LayoutError naming the first missing function."""
    libm = ctypes.util.find_library("m")
    if not libm:
        pytest.skip("no libm to stand in")
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(clformer.__file__)))
    env = dict(os.environ, CLFORMER_LIBRARY=libm, PYTHONPATH=pkg_parent)
    p = subprocess.run([sys.executable, "-c", "import clformer"], capture_output=True, text=True, env=env)
    assert p.returncode != 0
    assert (f"clformer._lib.LayoutError: clformer: the library has no function clf_strerror: the package and {libm} "
            "are from different versions") in p.stderr, p.stderr
