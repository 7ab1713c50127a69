"""Merges an encoder-decoder's two decoder exports into Optimum's decoder_model_merged.onnx: one
graph whose If node on the boolean input `use_cache_branch` runs the with-past graph (true) or
the first-step graph (false). Weights the two share are stored once in the outer graph; every
other name inside a branch gets the branch's prefix so the subgraphs stay in SSA form.

The merged graph's inputs are input_ids, encoder_hidden_states, every past_key_values.* and
use_cache_branch; its outputs are logits and every present.* (the with-past branch passes the
encoder's past keys and values through as the encoder presents, as Optimum's merge does)."""
import hashlib

import onnx
from onnx import TensorProto, helper, numpy_helper


def _rename_branch(graph, prefix, keep):
    """Prefixes every value name the graph defines (node outputs, initializers) except `keep`."""
    defined = {o for n in graph.node for o in n.output if o} | {i.name for i in graph.initializer}
    rename = {name: prefix + name for name in defined if name not in keep}

    def fix(nodes):
        for node in nodes:
            node.input[:] = [rename.get(x, x) for x in node.input]
            node.output[:] = [rename.get(x, x) for x in node.output]
            for attr in node.attribute:  # nested subgraphs read outer names too
                if attr.type == onnx.AttributeProto.GRAPH:
                    fix(attr.g.node)
                    for out in attr.g.output:
                        out.name = rename.get(out.name, out.name)
    fix(graph.node)
    for init in graph.initializer:
        init.name = rename.get(init.name, init.name)
    for out in graph.output:
        out.name = rename.get(out.name, out.name)
    return rename


def _hoist_initializers(graphs):
    """Moves the branches' initializers to the outer graph, identical tensors once."""
    outer, by_content = [], {}
    for graph in graphs:
        rename = {}
        for init in graph.initializer:
            key = (hashlib.sha256(numpy_helper.to_array(init).tobytes()).hexdigest(), init.data_type, tuple(init.dims))
            if key in by_content:
                rename[init.name] = by_content[key]
            else:
                by_content[key] = init.name
                outer.append(init)
        for node in graph.node:
            node.input[:] = [rename.get(x, x) for x in node.input]
        del graph.initializer[:]
    return outer


def merge(first_path, with_past_path, out_path):
    first, with_past = onnx.load(first_path), onnx.load(with_past_path)
    fg, pg = first.graph, with_past.graph
    outer_inputs = {i.name: i for i in list(pg.input) + list(fg.input)}  # the first step's input_ids: any length
    # The with-past graph returns the encoder's past as its encoder presents.
    out_names = [o.name for o in fg.output]
    for o in out_names:
        if ".encoder." in o:
            past = o.replace("present", "past_key_values")
            pg.node.append(helper.make_node("Identity", [past], [o], name=f"pass_{o}"))
            pg.output.append(next(x for x in fg.output if x.name == o))
    keep = set(outer_inputs)
    _rename_branch(fg, "first/", keep)
    _rename_branch(pg, "with_past/", keep)
    # Branch outputs in the first graph's order.
    order = {name: i for i, name in enumerate(out_names)}
    sorted_outputs = sorted(pg.output, key=lambda o: order[o.name.split("/", 1)[1]])
    del pg.output[:]
    pg.output.extend(sorted_outputs)
    initializers = _hoist_initializers([fg, pg])
    for g in (fg, pg):
        del g.input[:]
    fg.name, pg.name = "no_past_branch", "with_past_branch"
    node = helper.make_node("If", ["use_cache_branch"], out_names, name="optimum::if",
                            then_branch=pg, else_branch=fg)
    inputs = [outer_inputs["input_ids"], outer_inputs["encoder_hidden_states"]]
    for name in outer_inputs:
        if name.startswith("past_key_values"):
            vi = onnx.ValueInfoProto()
            vi.CopyFrom(outer_inputs[name])
            # The first step gets zero-length pasts: their lengths are axes of their own.
            vi.type.tensor_type.shape.dim[2].dim_param = ("past_decoder_sequence_length" if ".decoder." in name
                                                          else "encoder_sequence_length_out")
            inputs.append(vi)
    inputs.append(helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1]))
    outputs = []
    for o in first.graph.output:
        vi = onnx.ValueInfoProto()
        vi.CopyFrom(o)
        vi.name = o.name.split("/", 1)[1]
        outputs.append(vi)
    graph = helper.make_graph([node], "decoder_model_merged", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=first.opset_import, producer_name="mminfer-tools")
    model.ir_version = first.ir_version
    onnx.checker.check_model(model)
    onnx.save(model, out_path)
