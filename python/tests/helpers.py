"""What the mminfer Python tests share: small ONNX models made with the onnx package (so the
expected outputs come from NumPy), and the environment the tests read.

Environment: PYTHONPATH=<build>/python (the mminfer package); MMINFER_BIN (the mminfer command
line, for the tests comparing with it), MMINFER_CLIP_PIPELINE and MMINFER_PPOCR_DIR (pipeline
folders, for the pipeline tests).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

try:
    import mminfer  # noqa: F401
except ImportError as e:  # a setup problem, said plainly
    raise ImportError(f"cannot import mminfer ({e}): set PYTHONPATH to <build>/python") from e

OPSET = 17


def _model(nodes, inputs, outputs, initializers=(), name="test"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mminfer-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def mlp(seed=0, din=4, dout=8):
    """x float [batch, din] -> y = relu(x @ w + b) [batch, dout], total = sum(y, axis=1) [batch].
    Returns (model, w, b)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((din, dout)).astype(np.float32)
    b = rng.standard_normal(dout).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["pre"]),
        helper.make_node("Relu", ["pre"], ["y"]),
        helper.make_node("ReduceSum", ["y", "axes"], ["total"], keepdims=0),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", din])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", dout]),
         helper.make_tensor_value_info("total", TensorProto.FLOAT, ["batch"])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")],
        name="mlp")
    return model, w, b


def mlp_reference(x, w, b):
    y = np.maximum(x @ w + b, 0)
    return y, y.sum(axis=1)


def heavy(n=512, layers=4, seed=1):
    """x float [batch, n] -> tanh(... tanh(x @ w1) @ w2 ...) [batch, n]: GEMM-bound work."""
    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        out = "y" if i == layers - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [out]))
        prev = out
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", n])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n])], inits, name="heavy")


def typed_io():
    """Inputs of several types and shapes, outputs computed from each:
    f: float [2, 'n'], i: int64 ['n'] , h: float16 [None, 3] (a dimension without name),
    d: double [] (scalar), m: bool [2];
    f2 = f * 2, i2 = i + i, h2 = h + h, d2 = d * d, nm = not m, fi = Identity(f)."""
    def vi(name, t, shape):
        return helper.make_tensor_value_info(name, t, shape)

    inputs = [vi("f", TensorProto.FLOAT, [2, "n"]), vi("i", TensorProto.INT64, ["n"]),
              vi("h", TensorProto.FLOAT16, [None, 3]), vi("d", TensorProto.DOUBLE, []), vi("m", TensorProto.BOOL, [2])]
    nodes = [
        helper.make_node("Mul", ["f", "two"], ["f2"]),
        helper.make_node("Add", ["i", "i"], ["i2"]),
        helper.make_node("Add", ["h", "h"], ["h2"]),
        helper.make_node("Mul", ["d", "d"], ["d2"]),
        helper.make_node("Not", ["m"], ["nm"]),
        helper.make_node("Identity", ["f"], ["fi"]),
        helper.make_node("Identity", ["c"], ["ci"]),
    ]
    outputs = [vi("f2", TensorProto.FLOAT, [2, "n"]), vi("i2", TensorProto.INT64, ["n"]),
               vi("h2", TensorProto.FLOAT16, [None, 3]), vi("d2", TensorProto.DOUBLE, []),
               vi("nm", TensorProto.BOOL, [2]), vi("fi", TensorProto.FLOAT, [2, "n"]),
               vi("ci", TensorProto.FLOAT, [3])]
    inits = [numpy_helper.from_array(np.array(2, np.float32), "two"),
             numpy_helper.from_array(np.array([1, 2, 3], np.float32), "c")]
    return _model(nodes, inputs, outputs, inits, name="typed")


def typed_feed(n=5, seed=3):
    rng = np.random.default_rng(seed)
    return {
        "f": rng.standard_normal((2, n)).astype(np.float32),
        "i": rng.integers(-100, 100, n).astype(np.int64),
        "h": rng.standard_normal((4, 3)).astype(np.float16),
        "d": np.array(1.5),
        "m": np.array([True, False]),
    }


def save(model, directory, name):
    path = os.path.join(directory, name)
    onnx.save(model, path)
    return path


def env_path(name):
    """The folder or file an environment variable names, or None when it is unset."""
    value = os.environ.get(name)
    return value or None
