import mminfer as onnxruntime
# Written for ONNX Runtime: only the line above differs (test_ort_script.py checks that the rest
# never names the package it imports). Builds a model with onnx.helper, checks it against NumPy.
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_model(path, rng):
    w = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["pre"]),
        helper.make_node("Relu", ["pre"], ["y"]),
        helper.make_node("ReduceSum", ["y", "axes"], ["total"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8]),
         helper.make_tensor_value_info("total", TensorProto.FLOAT, ["batch"])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
                     numpy_helper.from_array(np.array([1], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return w, b


def main():
    rng = np.random.default_rng(2024)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mlp.onnx")
        w, b = make_model(path, rng)

        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = 1
        so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = onnxruntime.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
        assert sess.get_providers() == ["CPUExecutionProvider"], sess.get_providers()
        assert "CPUExecutionProvider" in onnxruntime.get_available_providers()

        inputs = sess.get_inputs()
        assert [i.name for i in inputs] == ["x"], inputs
        assert inputs[0].shape == ["batch", 4], inputs[0].shape
        assert inputs[0].type == "tensor(float)", inputs[0].type
        outputs = sess.get_outputs()
        assert [o.name for o in outputs] == ["y", "total"], outputs
        assert outputs[0].shape == ["batch", 8], outputs[0].shape
        assert outputs[1].type == "tensor(float)", outputs[1].type

        input_name = inputs[0].name
        for batch in (1, 3, 16):
            x = rng.standard_normal((batch, 4)).astype(np.float32)
            y, total = sess.run(None, {input_name: x})
            expected = np.maximum(x @ w + b, 0)
            assert y.dtype == np.float32 and y.shape == (batch, 8), (y.dtype, y.shape)
            np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(total, expected.sum(axis=1), rtol=1e-5, atol=1e-4)

        # Selected outputs, in the order asked for; a model given as bytes.
        x = rng.standard_normal((2, 4)).astype(np.float32)
        total, y = sess.run([o.name for o in reversed(outputs)], {input_name: x})
        np.testing.assert_allclose(y, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-5)
        with open(path, "rb") as f:
            sess2 = onnxruntime.InferenceSession(f.read(), providers=["CPUExecutionProvider"])
        (y2,) = sess2.run(["y"], {"x": x})
        np.testing.assert_allclose(y2, y, rtol=1e-6, atol=1e-6)

        # A wrong dtype raises, as in ONNX Runtime.
        try:
            sess.run(None, {input_name: x.astype(np.float64)})
        except Exception as e:  # noqa: BLE001 - ONNX Runtime raises its own exception types
            assert "tensor(double)" in str(e) and "tensor(float)" in str(e), str(e)
        else:
            raise AssertionError("a float64 input for a float model did not raise")
    print("ort_style_script: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
