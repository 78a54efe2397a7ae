"""test_errors.py - the error model: one exception class per clf_status
(checked against the library's own names), the library's message, and the
refusals the package makes before any C call."""
import ctypes
import os
import shutil

import numpy as np
import pytest

import clformer
from clformer import _errors, _lib


def test_one_class_per_status_of_the_library():
    # every code clf_status_name knows (CLF_STATUS_MAP) has its class, and no more
    lib = _lib.lib
    known = {c: _lib.text(lib.clf_status_name(c)) for c in range(-64, 0)}
    known = {c: n for c, n in known.items() if n != "CLF_UNKNOWN"}
    assert known == {c: cls.status for c, cls in _errors.BY_CODE.items()}
    for code, cls in _errors.BY_CODE.items():
        assert issubclass(cls, clformer.Error) and cls.code == code
        assert getattr(clformer, cls.__name__) is cls


def test_builtin_bases():
    assert issubclass(clformer.NotFoundError, FileNotFoundError)
    assert issubclass(clformer.OutOfMemoryError, MemoryError)
    assert issubclass(clformer.ShapeError, ValueError)
    assert issubclass(clformer.DtypeError, TypeError)
    e = clformer.NotFoundError("no such thing")
    assert str(e) == "no such thing" and e.message == "no such thing" and e.cl_error is None


@pytest.mark.device
def test_missing_dir_is_not_found_naming_the_path(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(clformer.NotFoundError) as ei:
        clformer.Model(missing)
    assert str(missing) in str(ei.value)
    assert ei.value.status == "CLF_E_NOT_FOUND" and ei.value.code == -13
    assert ei.value.cl_error is None and ei.value.build_log is None


@pytest.mark.device
def test_unknown_model_type_is_unsupported(fx, tmp_path):
    shutil.copy(os.path.join(fx, "bert", "model.safetensors"), tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "perceiver-xyz"}')
    with pytest.raises(clformer.UnsupportedError) as ei:
        clformer.Model(tmp_path)
    assert "perceiver-xyz" in str(ei.value)


@pytest.mark.device
def test_truncated_safetensors_is_format_error(fx, tmp_path):
    shutil.copy(os.path.join(fx, "bert", "config.json"), tmp_path)
    data = open(os.path.join(fx, "bert", "model.safetensors"), "rb").read()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(clformer.FormatError) as ei:
        clformer.Model(tmp_path)
    assert "model.safetensors" in str(ei.value)


@pytest.mark.device
def test_bad_device_selector(fx):
    with pytest.raises(clformer.DeviceNotFoundError):
        clformer.Model(os.path.join(fx, "bert"), device="no-such-device-anywhere")
    with pytest.raises(clformer.DeviceNotFoundError):
        clformer.Model(os.path.join(fx, "bert"), device=10 ** 6)


@pytest.mark.parametrize("path", [None, 3, b"/tmp", "", "a\0b", ["x"], "\ud800x"])
def test_bad_path_arguments(path):
    with pytest.raises(clformer.InvalidArgumentError):
        clformer.Model(path)


@pytest.mark.device
@pytest.mark.parametrize("weights", ["f64", "", None, 5])
def test_bad_weight_type(fx, weights):
    with pytest.raises(clformer.InvalidArgumentError) as ei:
        clformer.Model(os.path.join(fx, "bert"), weights=weights)
    assert "f32" in str(ei.value)


@pytest.mark.device
class TestRefusedBeforeC:
    """Wrong names, dtypes and shapes are refused in Python, naming the input."""

    @pytest.fixture
    def m(self, model_of):
        return model_of("bert")

    def test_unknown_input_name(self, m):
        with pytest.raises(clformer.InvalidArgumentError) as ei:
            m(input_idz=np.zeros((1, 3), np.int64))
        assert "input_idz" in str(ei.value) and "input_ids" in str(ei.value)

    def test_no_inputs(self, m):
        with pytest.raises(clformer.InvalidArgumentError):
            m()

    def test_unknown_output(self, m):
        with pytest.raises(clformer.InvalidArgumentError) as ei:
            m.run({"input_ids": [[2, 3]]}, ["logits"])
        assert "last_hidden_state" in str(ei.value)

    @pytest.mark.parametrize("value", [np.zeros((1, 3), np.float32), [[1.5, 2.0]], np.array([["a", "b"]]),
                                       np.array([[None, 1]], dtype=object), [[2 ** 70]]])
    def test_wrong_dtype(self, m, value):
        with pytest.raises((clformer.DtypeError, clformer.InvalidArgumentError)) as ei:
            m(input_ids=value)
        assert "input_ids" in str(ei.value)

    def test_none(self, m):
        with pytest.raises(clformer.InvalidArgumentError):
            m(input_ids=None)

    def test_wrong_rank(self, m):
        with pytest.raises(clformer.ShapeError):
            m(input_ids=np.int64(5))  # 0-d: refused in Python
        with pytest.raises(clformer.ShapeError):
            m(input_ids=np.zeros((1,) * 7, np.int64))  # more dims than CLF_MAX_DIMS
        with pytest.raises(clformer.ShapeError) as ei:  # 3-d: the library's refusal, naming it
            m(input_ids=np.zeros((1, 2, 3), np.int64))
        assert "input_ids" in str(ei.value)

    def test_mismatched_shapes(self, m):
        with pytest.raises(clformer.ShapeError) as ei:
            m(input_ids=np.zeros((1, 4), np.int64), attention_mask=np.ones((1, 3), np.int64))
        assert "attention_mask" in str(ei.value)

    def test_ids_outside_the_vocabulary(self, m):
        with pytest.raises(clformer.InvalidArgumentError) as ei:
            m(input_ids=[[2, 100000]])
        assert "100000" in str(ei.value)
        with pytest.raises(clformer.InvalidArgumentError):
            m(input_ids=[[-1]])

    def test_empty(self, m):
        with pytest.raises(clformer.Error):
            m(input_ids=np.zeros((1, 0), np.int64))
        with pytest.raises(clformer.Error):
            m(input_ids=[])

    def test_pixel_values_dtype(self, model_of):
        v = model_of("vit_cls")
        with pytest.raises(clformer.DtypeError):
            v(pixel_values=np.zeros((1, 3, 8, 8), np.complex64))
        with pytest.raises(clformer.ShapeError):
            v(pixel_values=np.zeros((1, 2, 32, 32), np.float32))

    @pytest.mark.parametrize("kw", [{"max_new_tokens": 0}, {"max_new_tokens": -3}, {"max_new_tokens": 1.5},
                                    {"num_beams": 0}, {"temperature": -1.0}, {"temperature": float("nan")},
                                    {"top_p": 1.5}, {"top_k": -1}, {"min_p": 2.0}, {"repetition_penalty": 0},
                                    {"seed": -1}, {"seed": 2 ** 64 - 1}, {"temperature": 0, "do_sample": True}, {"do_sample": "yes"}, {"beams": 2},
                                    {"eos_token_id": -1}, {"eos_token_id": list(range(9))}])
    def test_generate_settings(self, model_of, kw):
        g = model_of("gpt2")
        with pytest.raises(clformer.InvalidArgumentError):
            g.generate([[1, 2]], **kw)

    def test_sampling_with_beams_is_the_library_refusal(self, model_of):
        with pytest.raises(clformer.UnsupportedError):
            model_of("gpt2").generate([[1, 2]], do_sample=True, num_beams=2, max_new_tokens=2)

    def test_classify_bad_images(self, model_of, fx):
        v = model_of("vit_cls")
        with pytest.raises(clformer.NotFoundError):
            v.classify_files(os.path.join(fx, "images", "nope.png"))
        with pytest.raises(clformer.FormatError):
            v.classify(b"not an image at all")
        with pytest.raises(clformer.FormatError):
            v.classify_files(os.path.join(fx, "images", "truncated.png"))
        with open(os.path.join(fx, "images", "truncated.png"), "rb") as f:
            with pytest.raises(clformer.FormatError) as ei:
                v.classify(f.read())
        assert "<bytes>" in str(ei.value)  # the temporary file's name is not told
        with pytest.raises(clformer.ShapeError):
            v.classify(np.zeros((4, 4), np.uint8))
        with pytest.raises(clformer.DtypeError):
            v.classify(np.zeros((4, 4, 3), np.float32))
        with pytest.raises(clformer.InvalidArgumentError):
            v.classify([])
        with pytest.raises(clformer.InvalidArgumentError):
            v.classify(None)
        with pytest.raises(clformer.InvalidArgumentError):
            v.classify_files(os.path.join(fx, "images", "test.png"), top_k=0)

    def test_no_tokenizer(self, m):
        with pytest.raises(clformer.NotFoundError):
            m.tokenize("hello")
        with pytest.raises(clformer.NotFoundError):
            m.embed(["hello"])


@pytest.mark.device
def test_closed_model_raises_not_crashes(fx):
    m = clformer.Model(os.path.join(fx, "gpt2"))
    m.close()
    m.close()  # idempotent
    assert m.closed
    for call in (lambda: m(input_ids=[[1, 2]]), lambda: m.generate([[1, 2]]), lambda: m.stream("x"),
                 lambda: m.tokenize("x"), lambda: m.decode([1]), lambda: m.embed("x"), lambda: m.classify(b"x")):
        with pytest.raises(clformer.Error) as ei:
            call()
        assert "closed" in str(ei.value)
    assert m.model_type == "gpt2" and "closed" in repr(m)  # what was read at load stays


def test_library_error_detail_fields():
    # a context-free failure through the library: the message it recorded
    wt = ctypes.c_int(0)
    st = _lib.lib.clf_weight_type_from_name(b"f64", ctypes.byref(wt))
    err = _errors.from_status(st)
    assert isinstance(err, clformer.InvalidArgumentError)
    assert "f64" in err.message and err.cl_error is None and err.build_log is None


@pytest.mark.device
def test_unencodable_strings_refused(model_of, fx):
    g = model_of("gpt2")
    with pytest.raises(clformer.InvalidArgumentError):
        clformer.Model(os.path.join(fx, "gpt2"), device="\ud800")
    with pytest.raises(clformer.InvalidArgumentError):
        clformer.Model(os.path.join(fx, "gpt2"), weights="f\ud800")
    with pytest.raises(clformer.InvalidArgumentError):
        g.stream("x", stop="\ud800")
    with pytest.raises(clformer.InvalidArgumentError):
        g.stream("x", stop="")


@pytest.mark.device
class TestClassifyKeepsPathsApartFromBytes:
    """classify() takes an image's bytes or pixels, never a path, so that a
    server handing it what a client sent cannot be made to open a file
    (issue 21, item 1); local files go through classify_files()."""

    @pytest.fixture
    def reads(self, monkeypatch):
        """The paths clf_image_read is called with, and the modes of the
        file and its directory at that moment, the call going through."""
        real = _lib.lib.clf_image_read
        seen = []

        def spy(path, img):
            p = os.fsdecode(path)
            seen.append((p, os.stat(p).st_mode & 0o777, os.stat(os.path.dirname(p)).st_mode & 0o777))
            return real(path, img)
        monkeypatch.setattr(_lib.lib, "clf_image_read", spy)
        return seen

    def test_classify_refuses_paths_without_opening_them(self, model_of, fx, reads):
        import pathlib
        v = model_of("vit_cls")
        png = os.path.join(fx, "images", "test.png")
        with open(png, "rb") as f:
            contents = f.read()
        for bad in ("/etc/passwd", pathlib.Path("/etc/passwd"), png, pathlib.Path(png), [png],
                    [contents, png], "a text is no image"):
            with pytest.raises(clformer.InvalidArgumentError, match="classify_files") as ei:
                v.classify(bad)
            assert "/etc/passwd" not in str(ei.value) and png not in str(ei.value)
        assert reads == []  # nothing was opened, not even the good image before the path

    def test_classify_files_equals_classify_of_the_contents(self, model_of, fx, reads):
        import pathlib
        v = model_of("vit_cls")
        png, jpg = os.path.join(fx, "images", "test.png"), os.path.join(fx, "images", "test.jpg")
        got = v.classify_files([png, pathlib.Path(jpg)], top_k=3)
        assert [r[0] for r in reads] == [png, jpg]
        with open(png, "rb") as f:
            assert v.classify(f.read(), top_k=3) == got[:1]
        with open(jpg, "rb") as f:
            assert v.classify(memoryview(bytearray(f.read())), top_k=3) == got[1:]
        assert v.classify_files(png, top_k=3) == got[:1]
        assert v.classify_files(pathlib.Path(png), top_k=3) == got[:1]

    def test_bytes_go_through_a_private_file_that_is_removed(self, model_of, fx, reads):
        v = model_of("vit_cls")
        with open(os.path.join(fx, "images", "test.png"), "rb") as f:
            v.classify(f.read())
        with pytest.raises(clformer.FormatError):
            v.classify(b"not an image at all")
        assert len(reads) == 2
        for path, file_mode, dir_mode in reads:
            assert (file_mode, dir_mode) == (0o600, 0o700), path
            assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))

    def test_classify_files_refuses_bytes_and_arrays(self, model_of, fx, reads):
        v = model_of("vit_cls")
        png = os.path.join(fx, "images", "test.png")
        for bad in (png.encode(), bytearray(png.encode()), memoryview(png.encode()), [png, png.encode()],
                    np.zeros((4, 4, 3), np.uint8), [], None, 3):
            with pytest.raises(clformer.InvalidArgumentError):
                v.classify_files(bad)
        assert reads == []

    def test_text_classifier_takes_texts_only(self, model_of, fx):
        b = model_of("bert_seqcls")
        with pytest.raises(clformer.UnsupportedError, match="text classifier"):
            b.classify_files(os.path.join(fx, "images", "test.png"))
        with pytest.raises(clformer.InvalidArgumentError):
            b.classify(b"bytes are no text")
        assert len(b.classify(["a text", "another"])) == 2
