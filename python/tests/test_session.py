"""mminfer.InferenceSession: ONNX Runtime's API, input conversion, outputs and errors."""
import os
import pathlib
import tempfile
import unittest

import numpy as np
import onnx

import helpers
import mminfer


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        cls.mlp_model, cls.w, cls.b = helpers.mlp()
        cls.mlp_path = helpers.save(cls.mlp_model, cls.dir, "mlp.onnx")
        cls.typed_path = helpers.save(helpers.typed_io(), cls.dir, "typed.onnx")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def x(self, batch=3, seed=0):
        return np.random.default_rng(seed).standard_normal((batch, 4)).astype(np.float32)


class ApiTest(Base):
    def test_version(self):
        self.assertRegex(mminfer.__version__, r"^\d+\.\d+\.\d+")

    def test_run_matches_numpy(self):
        sess = mminfer.InferenceSession(self.mlp_path)
        x = self.x(5)
        y, total = sess.run(None, {"x": x})
        ry, rtotal = helpers.mlp_reference(x, self.w, self.b)
        np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(total, rtotal, rtol=1e-5, atol=1e-4)
        self.assertEqual(y.dtype, np.float32)
        self.assertTrue(y.flags.c_contiguous and y.flags.writeable)
        self.assertEqual(sess.run([], {"x": x})[0].tolist(), y.tolist())  # [] = all, as in ONNX Runtime

    def test_node_args(self):
        sess = mminfer.InferenceSession(self.typed_path)
        ins = {a.name: (a.shape, a.type) for a in sess.get_inputs()}
        self.assertEqual(ins, {
            "f": ([2, "n"], "tensor(float)"),
            "i": (["n"], "tensor(int64)"),
            "h": ([None, 3], "tensor(float16)"),
            "d": ([], "tensor(double)"),
            "m": ([2], "tensor(bool)"),
        })
        outs = [a.name for a in sess.get_outputs()]
        self.assertEqual(outs, ["f2", "i2", "h2", "d2", "nm", "fi", "ci"])
        self.assertIn("NodeArg(name='f'", repr(sess.get_inputs()[0]))

    def test_types_round_trip(self):
        sess = mminfer.InferenceSession(self.typed_path)
        feed = helpers.typed_feed()
        f2, i2, h2, d2, nm, fi, ci = sess.run(None, feed)
        np.testing.assert_array_equal(f2, feed["f"] * 2)
        np.testing.assert_array_equal(i2, feed["i"] * 2)
        self.assertEqual(i2.dtype, np.int64)
        np.testing.assert_array_equal(h2, feed["h"] + feed["h"])
        self.assertEqual(h2.dtype, np.float16)
        self.assertEqual(d2.shape, ())
        self.assertEqual(d2.dtype, np.float64)
        self.assertEqual(float(d2), 2.25)
        np.testing.assert_array_equal(nm, ~feed["m"])
        self.assertEqual(nm.dtype, np.bool_)
        np.testing.assert_array_equal(ci, [1, 2, 3])

    def test_outputs_own_their_memory(self):
        sess = mminfer.InferenceSession(self.typed_path)
        feed = helpers.typed_feed()
        before = feed["f"].copy()
        outs = sess.run(["fi", "f2", "ci"], feed)
        fi, f2, ci = outs
        np.testing.assert_array_equal(fi, before)
        self.assertFalse(np.shares_memory(fi, feed["f"]), "an output passed through from an input must be a copy")
        fi[...] = 7
        ci[...] = -1  # must not change the model's constant
        np.testing.assert_array_equal(feed["f"], before)
        again = sess.run(["fi", "ci"], feed)
        np.testing.assert_array_equal(again[0], before)
        np.testing.assert_array_equal(again[1], [1, 2, 3])
        for a in outs:
            for b in again:
                self.assertFalse(np.shares_memory(a, b))

    def test_output_selection_and_order(self):
        sess = mminfer.InferenceSession(self.mlp_path)
        x = self.x()
        total, y = sess.run(["total", "y"], {"x": x})
        ry, rtotal = helpers.mlp_reference(x, self.w, self.b)
        np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(total, rtotal, rtol=1e-5, atol=1e-4)
        only = mminfer.InferenceSession(self.mlp_path, outputs=["total"])
        self.assertEqual([o.name for o in only.get_outputs()], ["total"])
        (t2,) = only.run(None, {"x": x})
        np.testing.assert_allclose(t2, rtotal, rtol=1e-5, atol=1e-4)

    def test_path_like_and_bytes(self):
        x = self.x()
        ref = mminfer.InferenceSession(self.mlp_path).run(None, {"x": x})
        for model in (pathlib.Path(self.mlp_path), self.mlp_model.SerializeToString(),
                      bytearray(self.mlp_model.SerializeToString())):
            out = mminfer.InferenceSession(model).run(None, {"x": x})
            for a, b in zip(out, ref):
                np.testing.assert_array_equal(a, b)

    def test_bytes_with_external_data_relative_to_cwd(self):
        model, w, b = helpers.mlp(seed=5)
        with tempfile.TemporaryDirectory() as d:
            onnx.save_model(model, os.path.join(d, "ext.onnx"), save_as_external_data=True,
                            all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
            with open(os.path.join(d, "ext.onnx"), "rb") as f:
                data = f.read()
            self.assertTrue(os.path.exists(os.path.join(d, "weights.bin")))
            cwd = os.getcwd()
            try:
                os.chdir(self.dir)  # the weights are not here
                with self.assertRaisesRegex(mminfer.Error, "weights.bin"):
                    mminfer.InferenceSession(data)
                os.chdir(d)
                sess = mminfer.InferenceSession(data)
            finally:
                os.chdir(cwd)
            x = self.x()
            y, _ = sess.run(None, {"x": x})
            np.testing.assert_allclose(y, helpers.mlp_reference(x, w, b)[0], rtol=1e-5, atol=1e-5)

    def test_session_options(self):
        so = mminfer.SessionOptions()
        so.intra_op_num_threads = 3
        for level, expected in [(mminfer.GraphOptimizationLevel.ORT_DISABLE_ALL, 0),
                                (mminfer.GraphOptimizationLevel.ORT_ENABLE_BASIC, 1),
                                (mminfer.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, 2),
                                (mminfer.GraphOptimizationLevel.ORT_ENABLE_ALL, 2)]:
            so.graph_optimization_level = level
            sess = mminfer.InferenceSession(self.mlp_path, so)
            self.assertEqual(sess.opt_level, expected)
            self.assertEqual(sess.threads, 3)
            x = self.x()
            np.testing.assert_allclose(sess.run(["y"], {"x": x})[0], helpers.mlp_reference(x, self.w, self.b)[0],
                                       rtol=1e-5, atol=1e-5)
        # mminfer's keywords win over the options object.
        sess = mminfer.InferenceSession(self.mlp_path, so, threads=1, opt_level=1)
        self.assertEqual((sess.threads, sess.opt_level), (1, 1))
        self.assertEqual(sess.get_session_options().intra_op_num_threads, 1)
        with self.assertRaises(AttributeError):
            so.no_such_option = 1

    def test_providers(self):
        sess = mminfer.InferenceSession(self.mlp_path, providers=["CPUExecutionProvider"])
        self.assertEqual(sess.get_providers(), ["CPUExecutionProvider"])
        mminfer.InferenceSession(self.mlp_path, providers=[("CPUExecutionProvider", {})])
        with self.assertRaisesRegex(ValueError, "CUDAExecutionProvider.*CPUExecutionProvider"):
            mminfer.InferenceSession(self.mlp_path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])

    def test_precision(self):
        self.assertEqual(mminfer.InferenceSession(self.mlp_path).precision, "fp32")
        sess = mminfer.InferenceSession(self.mlp_path, precision="int8")
        self.assertEqual(sess.precision, "int8")
        with self.assertRaises(ValueError) as cm:
            mminfer.InferenceSession(self.mlp_path, precision="int7")
        self.assertIn("int7", str(cm.exception))

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            mminfer.InferenceSession(self.mlp_path, threads=-1)
        with self.assertRaises(ValueError):
            mminfer.InferenceSession(self.mlp_path, opt_level=3)
        with self.assertRaises(ValueError):
            mminfer.InferenceSession(self.mlp_path, max_concurrent_runs=0)
        with self.assertRaises(TypeError):
            mminfer.InferenceSession(12)
        with self.assertRaises(TypeError):
            mminfer.InferenceSession(self.mlp_path, threads="2")
        with self.assertRaises(TypeError):
            mminfer.InferenceSession(self.mlp_path, precision=8)
        self.assertEqual(mminfer.InferenceSession(self.mlp_path, threads=np.int64(2)).threads, 2)


class InputTest(Base):
    def check_mlp(self, sess, x):
        y, _ = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, helpers.mlp_reference(np.asarray(x, np.float32), self.w, self.b)[0],
                                   rtol=1e-5, atol=1e-5)

    def test_contiguous_input_is_not_copied(self):
        sess = mminfer.InferenceSession(self.mlp_path, _observe=["x"])
        x = self.x(4)
        sess.run(None, {"x": x})
        seen = dict(sess._sess._take_observed())
        self.assertEqual(seen.get("x"), x.ctypes.data, "the session must read the array's own memory")
        # A read-only array is used in place too.
        ro = self.x(4, seed=1)
        ro.flags.writeable = False
        self.check_mlp(sess, ro)
        self.assertEqual(dict(sess._sess._take_observed()).get("x"), ro.ctypes.data)

    def test_non_contiguous_inputs(self):
        sess = mminfer.InferenceSession(self.mlp_path, _observe=["x"])
        big = np.random.default_rng(4).standard_normal((6, 8)).astype(np.float32)
        for x in (big[::2, ::2], big[:4, :4].T, np.asfortranarray(big[:, :4]), big[:, 1:5]):
            self.assertFalse(x.flags.c_contiguous)
            self.check_mlp(sess, x)
            self.assertNotEqual(dict(sess._sess._take_observed()).get("x"), x.ctypes.data)
        self.check_mlp(sess, big[:, :4].astype(">f4"))  # big-endian: converted to native order
        unaligned = np.frombuffer(b"\0" + big[:, :4].tobytes(), np.float32, offset=1).reshape(6, 4)
        self.assertFalse(unaligned.flags.aligned)
        self.check_mlp(sess, unaligned)

    def test_inputs_are_not_modified(self):
        sess = mminfer.InferenceSession(self.mlp_path)
        x = self.x(8) - 1  # Relu would change it if run in place
        before = x.copy()
        sess.run(None, {"x": x})
        np.testing.assert_array_equal(x, before)

    def test_lists_and_scalars(self):
        sess = mminfer.InferenceSession(self.mlp_path)
        self.check_mlp(sess, [[1.0, -2.0, 3.0, 0.5]])  # a list takes the input's dtype (float32)
        typed = mminfer.InferenceSession(self.typed_path)
        feed = helpers.typed_feed(n=3)
        feed["i"] = [1, 2, 3]
        feed["d"] = 3.0
        feed["m"] = [True, True]
        outs = dict(zip([o.name for o in typed.get_outputs()], typed.run(None, feed)))
        np.testing.assert_array_equal(outs["i2"], [2, 4, 6])
        self.assertEqual(float(outs["d2"]), 9.0)
        np.testing.assert_array_equal(outs["nm"], [False, False])

    def test_wrong_dtype_raises(self):
        sess = mminfer.InferenceSession(self.mlp_path)
        with self.assertRaises(mminfer.Error) as cm:
            sess.run(None, {"x": self.x().astype(np.float64)})
        msg = str(cm.exception)
        for part in ("'x'", "tensor(double)", "tensor(float)", "astype"):
            self.assertIn(part, msg)
        typed = mminfer.InferenceSession(self.typed_path)
        feed = helpers.typed_feed()
        feed["i"] = feed["i"].astype(np.int32)
        with self.assertRaisesRegex(mminfer.Error, r"'i'.*tensor\(int32\).*tensor\(int64\)"):
            typed.run(None, feed)
        with self.assertRaisesRegex(mminfer.Error, "complex"):
            sess.run(None, {"x": self.x().astype(np.complex64)})
        with self.assertRaisesRegex(mminfer.Error, "object"):
            sess.run(None, {"x": np.array([[None] * 4], dtype=object)})


class ErrorTest(Base):
    def test_error_is_runtime_error(self):
        self.assertTrue(issubclass(mminfer.Error, RuntimeError))

    def test_run_errors_name_the_problem(self):
        sess = mminfer.InferenceSession(self.mlp_path)
        x = self.x()
        cases = [
            ({"x": x, "nope": x}, None, "unknown input 'nope'"),
            ({}, None, "missing input 'x'"),
            ({"x": x[None]}, None, "'x'.*rank 2"),
            ({"x": np.zeros((3, 5), np.float32)}, None, "'x'.*dimension 1 must be 4"),
            ({"x": x}, ["y", "zz"], "unknown output 'zz'"),
        ]
        for feed, names, pattern in cases:
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(mminfer.Error, pattern):
                    sess.run(names, feed)
        with self.assertRaises(TypeError):
            sess.run(None, {1: x})
        # The session still runs after the errors.
        np.testing.assert_allclose(sess.run(["y"], {"x": x})[0], helpers.mlp_reference(x, self.w, self.b)[0],
                                   rtol=1e-5, atol=1e-5)

    def test_load_errors(self):
        missing = os.path.join(self.dir, "missing.onnx")
        with self.assertRaises(mminfer.Error) as cm:
            mminfer.InferenceSession(missing)
        self.assertIn("missing.onnx", str(cm.exception))
        with self.assertRaises(mminfer.Error) as cm:
            mminfer.InferenceSession(b"this is not an onnx model")
        self.assertTrue(str(cm.exception))
        self.assertNotIn("\n", str(cm.exception))
        with self.assertRaisesRegex(mminfer.Error, "zz"):
            mminfer.InferenceSession(self.mlp_path, outputs=["zz"])


if __name__ == "__main__":
    unittest.main()
