"""mminfer: ONNX models on the CPU, with ONNX Runtime's Python API.

A script written for onnxruntime runs with its import line changed::

    import mminfer as onnxruntime

    sess = onnxruntime.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    (y,) = sess.run(None, {name: x})

Beyond ONNX Runtime's API: keyword options of InferenceSession (threads, precision, opt_level,
outputs, max_concurrent_runs) and the pipelines OCR and Embedder (CLIP), which take encoded
images (bytes or paths) and texts.

NumPy inputs of the model's dtype in C order are used in place (others are copied into C order
first); a dtype other than the model's raises, as in ONNX Runtime. Outputs are NumPy arrays
over the engine's own buffers. Failures raise mminfer.Error (a RuntimeError) with a one-line
message. Loading and running release the GIL, so Python threads can share one session.
"""
import enum
import operator
import os

from . import _mminfer
from ._mminfer import Error, NodeArg

__version__ = _mminfer.version()

__all__ = [
    "CLIP",
    "Embedder",
    "Error",
    "ExecutionMode",
    "GraphOptimizationLevel",
    "InferenceSession",
    "NodeArg",
    "OCR",
    "RunOptions",
    "SessionOptions",
    "get_all_providers",
    "get_available_providers",
    "get_device",
    "__version__",
]

_CPU = "CPUExecutionProvider"


def get_available_providers():
    """['CPUExecutionProvider']: mminfer runs on the CPU only."""
    return [_CPU]


def get_all_providers():
    return [_CPU]


def get_device():
    return "CPU"


class GraphOptimizationLevel(enum.IntEnum):
    """ONNX Runtime's levels; mminfer's opt_level is 0, 1 and 2 for them (2 for both of the last)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


_OPT_LEVELS = {0: 0, 1: 1, 2: 2, 99: 2}


class ExecutionMode(enum.IntEnum):
    """Accepted for ONNX Runtime scripts; mminfer picks how to run independent branches itself."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """onnxruntime.SessionOptions' commonly set attributes.

    intra_op_num_threads (0: all cores) and graph_optimization_level are used; the others are
    accepted and have no effect. Attributes ONNX Runtime lacks raise AttributeError, as there.
    """

    __slots__ = ("intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level", "execution_mode",
                 "log_severity_level", "log_verbosity_level", "logid", "enable_cpu_mem_arena", "enable_mem_pattern",
                 "enable_mem_reuse", "use_deterministic_compute", "_config")

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self._config = {}

    def add_session_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key):
        if key not in self._config:
            raise RuntimeError(f"SessionOptions has no config entry '{key}'")
        return self._config[key]


class RunOptions:
    """Accepted by InferenceSession.run for ONNX Runtime scripts; it has no effect."""

    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.terminate = False


def _check_providers(providers, provider_options=None):
    """ONNX Runtime's providers argument: CPUExecutionProvider only (names or (name, options))."""
    if providers is None:
        return
    if isinstance(providers, str):
        providers = [providers]
    names = [p[0] if isinstance(p, (tuple, list)) else p for p in providers]
    unsupported = [n for n in names if n != _CPU]
    if unsupported:
        raise ValueError(f"mminfer runs on the CPU only: providers {unsupported} are not supported "
                         f"(available providers: {get_available_providers()})")
    if provider_options is not None and len(provider_options) != len(names):
        raise ValueError("provider_options must have one entry per provider")


def _check_count(name, value, minimum):
    try:
        if isinstance(value, bool):
            raise TypeError
        count = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None
    if count < minimum:
        raise ValueError(f"{name} must be {minimum} or more, got {count}")
    return count


def _check_precision(precision):
    if precision is not None and not isinstance(precision, str):
        raise TypeError(f"precision must be None or a str such as 'int8', got {type(precision).__name__}")
    return precision


class InferenceSession:
    """onnxruntime.InferenceSession on mminfer.

    path_or_bytes: a path (str or os.PathLike) or the model's bytes (external data files are then
    found relative to the current directory). sess_options: a mminfer.SessionOptions (its
    intra_op_num_threads and graph_optimization_level are used). providers: None or
    CPUExecutionProvider only (others raise ValueError).

    mminfer's own options (keywords): threads (default 0: all cores; overrides
    sess_options.intra_op_num_threads), precision ("fp32", "int8", "bf16",
    "vision=int8,text=fp32"...: see mminfer's precision specs), opt_level 0, 1 or 2 (default 2;
    overrides sess_options.graph_optimization_level), outputs (compute only these outputs, in this
    order), max_concurrent_runs (runs of this session that may execute at once when several
    threads call run; each needs its own copy of the kernels).
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, *, threads=None,
                 precision=None, opt_level=None, outputs=None, max_concurrent_runs=1, _observe=None):
        _check_providers(providers, provider_options)
        if sess_options is not None and not isinstance(sess_options, SessionOptions):
            raise TypeError(f"sess_options must be a mminfer.SessionOptions, got {type(sess_options).__name__}")
        options = sess_options if sess_options is not None else SessionOptions()
        if threads is None:
            threads = options.intra_op_num_threads
        threads = _check_count("threads", threads, 0)
        if opt_level is None:
            level = options.graph_optimization_level
            if int(level) not in _OPT_LEVELS:
                raise ValueError(f"graph_optimization_level must be a GraphOptimizationLevel, got {level!r}")
            opt_level = _OPT_LEVELS[int(level)]
        opt_level = _check_count("opt_level", opt_level, 0)
        max_concurrent_runs = _check_count("max_concurrent_runs", max_concurrent_runs, 1)
        _check_precision(precision)
        if isinstance(outputs, str):
            outputs = [outputs]
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            model = bytes(path_or_bytes)
            base_dir = os.getcwd()
            self._model_path = None
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            model = os.fsdecode(os.fspath(path_or_bytes))
            base_dir = ""
            self._model_path = model
        else:
            raise TypeError("path_or_bytes must be a path (str or os.PathLike) or the model's bytes, got "
                            f"{type(path_or_bytes).__name__}")
        self._sess = _mminfer._Session(model, base_dir, threads, precision, opt_level, list(outputs or []),
                                       max_concurrent_runs, list(_observe or []))
        self._sess_options = SessionOptions()
        self._sess_options.intra_op_num_threads = threads
        self._sess_options.graph_optimization_level = {0: GraphOptimizationLevel.ORT_DISABLE_ALL,
                                                       1: GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                                       2: GraphOptimizationLevel.ORT_ENABLE_ALL}[opt_level]
        self._inputs = self._sess.inputs
        self._outputs = self._sess.outputs

    # ONNX Runtime's API.
    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return []

    def get_providers(self):
        return [_CPU]

    def get_provider_options(self):
        return {_CPU: {}}

    def set_providers(self, providers=None, provider_options=None):
        _check_providers(providers, provider_options)

    def get_session_options(self):
        return self._sess_options

    def get_modelmeta(self):
        raise NotImplementedError("mminfer does not read model metadata (producer, custom metadata map)")

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: output_names (None or [] for all, in the model's order), input_feed
        {input name: numpy array (or list/scalar)}. Returns a list of numpy arrays."""
        if isinstance(output_names, str):
            raise TypeError("output_names must be a list of names or None")
        if not isinstance(input_feed, dict):
            input_feed = dict(input_feed)
        return self._sess.run(None if output_names is None else list(output_names), input_feed)

    # mminfer's additions.
    @property
    def threads(self):
        """The thread count this session's runs use (0: all cores)."""
        return self._sess.threads

    @property
    def precision(self):
        """The precision spec in force ("fp32", "int8", "vision=int8,text=fp32,...")."""
        return self._sess.precision

    @property
    def opt_level(self):
        return self._sess.opt_level

    @property
    def max_concurrent_runs(self):
        return self._sess.max_concurrent_runs


# Pipelines: encoded inputs (bytes, or paths read here) in.

def _encoded(item, what):
    if isinstance(item, bytes):
        return item
    if isinstance(item, (bytearray, memoryview)):
        return bytes(item)
    if isinstance(item, (str, os.PathLike)):
        with open(item, "rb") as f:
            return f.read()
    raise TypeError(f"{what} must be encoded file bytes or a path (str or os.PathLike), got {type(item).__name__}")


def _encoded_list(items, what):
    if isinstance(items, (bytes, bytearray, memoryview, str, os.PathLike)):
        items = [items]  # one input
    return [_encoded(item, f"{what} {i}") for i, item in enumerate(items)]


class OCR:
    """Text lines in images: a folder with a pipeline.json of type "ocr", or the PP-OCRv4 files
    under their published names."""

    def __init__(self, dir, threads=0, precision=None, opt_level=2):
        self._impl = _mminfer._Ocr(os.fspath(dir), _check_count("threads", threads, 0),
                                   _check_precision(precision), _check_count("opt_level", opt_level, 0))

    def read(self, image):
        """Lines of one image (bytes or a path), in reading order: dicts {"text", "score",
        "box": [[x, y] * 4]} (corners clockwise from the top left, in pixels)."""
        return self._impl.read(_encoded(image, "image"))

    def read_many(self, images):
        """read() of several images at once (their lines share recognizer batches)."""
        return self._impl.read_many(_encoded_list(images, "image"))


class Embedder:
    """Embedding pipelines: "clip" (images and texts), "audio-encoder" (audio). Each embed_*
    takes a list of inputs (or one) and returns float32 unit embeddings, one row each: [N, D]."""

    def __init__(self, dir, threads=0, precision=None, opt_level=2):
        self._impl = _mminfer._Embedder(os.fspath(dir), _check_count("threads", threads, 0),
                                        _check_precision(precision), _check_count("opt_level", opt_level, 0))

    @property
    def type(self):
        return self._impl.type

    @property
    def has_images(self):
        return self._impl.has_images

    @property
    def has_texts(self):
        return self._impl.has_texts

    @property
    def has_audio(self):
        return self._impl.has_audio

    def embed_images(self, images):
        """Encoded images (bytes or paths) -> np.ndarray [N, D]."""
        return self._impl.embed_images(_encoded_list(images, "image"))

    def embed_texts(self, texts):
        """UTF-8 texts (str) -> np.ndarray [N, D]."""
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"text {i} must be a str, got {type(t).__name__}")
        return self._impl.embed_texts(texts)

    def embed_audio(self, clips):
        """Encoded audio files (bytes or paths) -> np.ndarray [N, D]."""
        return self._impl.embed_audio(_encoded_list(clips, "audio clip"))

    def classify(self, image, labels, templates=None):
        """Zero-shot classification of one image (clip): [(label, probability)], highest first.
        templates: prompts such as "a photo of a {}." (default: the folder's, else the label)."""
        return self.classify_many([image], labels, templates)[0]

    def classify_many(self, images, labels, templates=None):
        return self._impl.classify(_encoded_list(images, "image"), list(labels), list(templates or []))


class CLIP(Embedder):
    """An Embedder whose folder must be a "clip" pipeline (image and text towers)."""

    def __init__(self, dir, threads=0, precision=None, opt_level=2):
        super().__init__(dir, threads, precision, opt_level)
        if self.type != "clip":
            raise ValueError(f"{os.fspath(dir)} is a '{self.type}' pipeline, not 'clip'")
