#include "model_mutator.h"

#include <limits>
#include <vector>

namespace robust {

const char* mutation_name(Mutation m) {
  switch (m) {
    case Mutation::kFlipBits: return "flip-bits";
    case Mutation::kTruncate: return "truncate";
    case Mutation::kInsertBytes: return "insert-bytes";
    case Mutation::kDuplicateBytes: return "duplicate-bytes";
    case Mutation::kDuplicateTopField: return "duplicate-field";
    case Mutation::kStructural: return "structural";
    default: return "?";
  }
}

namespace {

// --- protobuf wire format ------------------------------------------------------------

struct Field {
  uint32_t number = 0;
  int wire = 0;
  size_t begin = 0, end = 0;                  // the whole field, tag included
  size_t payload_begin = 0, payload_end = 0;  // length-delimited payload (wire type 2)
};

bool read_varint(const std::string& s, size_t& pos, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= s.size()) return false;
    uint8_t b = static_cast<uint8_t>(s[pos++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

void write_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
}

// Splits a message into its fields; false when the bytes are not well-formed wire format.
bool split_fields(const std::string& s, std::vector<Field>& out) {
  out.clear();
  size_t pos = 0;
  while (pos < s.size()) {
    Field f;
    f.begin = pos;
    uint64_t tag;
    if (!read_varint(s, pos, tag)) return false;
    f.number = static_cast<uint32_t>(tag >> 3);
    f.wire = static_cast<int>(tag & 7);
    uint64_t v;
    switch (f.wire) {
      case 0:
        if (!read_varint(s, pos, v)) return false;
        break;
      case 1: pos += 8; break;
      case 5: pos += 4; break;
      case 2:
        if (!read_varint(s, pos, v) || v > s.size() - pos) return false;
        f.payload_begin = pos;
        f.payload_end = pos + v;
        pos += v;
        break;
      default: return false;
    }
    if (pos > s.size()) return false;
    f.end = pos;
    out.push_back(f);
  }
  return true;
}

std::string duplicate_field(const std::string& bytes, Rng& rng) {
  std::vector<Field> top;
  if (!split_fields(bytes, top) || top.empty()) return bytes + bytes.substr(0, rng.below(bytes.size() + 1));
  // Half the time go one level down into the graph (ModelProto field 7) and duplicate one
  // of its nodes, initializers, inputs or outputs, then fix the graph's length prefix.
  for (const Field& g : top) {
    if (g.number != 7 || g.wire != 2 || !rng.coin()) continue;
    std::string payload = bytes.substr(g.payload_begin, g.payload_end - g.payload_begin);
    std::vector<Field> inner;
    if (!split_fields(payload, inner) || inner.empty()) break;
    const Field& f = inner[rng.below(inner.size())];
    size_t at = inner[rng.below(inner.size())].end;
    payload.insert(at, payload.substr(f.begin, f.end - f.begin));
    std::string out = bytes.substr(0, g.begin);
    write_varint(out, (7u << 3) | 2u);
    write_varint(out, payload.size());
    out += payload;
    out += bytes.substr(g.end);
    return out;
  }
  const Field& f = top[rng.below(top.size())];
  size_t at = top[rng.below(top.size())].end;
  std::string out = bytes;
  out.insert(at, bytes.substr(f.begin, f.end - f.begin));
  return out;
}

// --- structural edits through the protobuf API ---------------------------------------

int64_t odd_int(Rng& rng) {
  static const int64_t values[] = {0, 1, -1, 2, 3, 7, -2, 1000, -1000, int64_t(1) << 31, int64_t(1) << 40,
                                   std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                                   std::numeric_limits<int32_t>::max()};
  return values[rng.below(sizeof values / sizeof values[0])];
}

std::string some_name(const onnx::GraphProto& g, Rng& rng) {
  std::vector<std::string> names = {"", "nonexistent", "x"};
  for (auto& n : g.node())
    for (auto& o : n.output()) names.push_back(o);
  for (auto& i : g.initializer()) names.push_back(i.name());
  for (auto& i : g.input()) names.push_back(i.name());
  return names[rng.below(names.size())];
}

void mutate_tensor(onnx::TensorProto* t, Rng& rng) {
  switch (rng.below(7)) {
    case 0:
      if (t->dims_size()) t->set_dims(static_cast<int>(rng.below(t->dims_size())), odd_int(rng));
      break;
    case 1: t->add_dims(odd_int(rng)); break;
    case 2: t->set_data_type(static_cast<int32_t>(rng.below(22))); break;
    case 3: t->clear_raw_data(); break;
    case 4: {
      t->set_data_location(onnx::TensorProto::EXTERNAL);
      static const char* locations[] = {"../x.bin", "/etc/hostname", "missing.bin", "", ".", "a/../../b"};
      auto* e = t->add_external_data();
      e->set_key(rng.coin() ? "location" : rng.coin() ? "offset" : "length");
      e->set_value(e->key() == "location" ? locations[rng.below(6)] : std::to_string(odd_int(rng)));
      break;
    }
    case 5: t->add_int64_data(odd_int(rng)); break;
    default: t->clear_dims(); break;
  }
}

void mutate_attribute(onnx::AttributeProto* a, Rng& rng) {
  switch (rng.below(6)) {
    case 0: a->set_type(static_cast<onnx::AttributeProto::AttributeType>(rng.below(15))); break;
    case 1: a->set_i(odd_int(rng)); break;
    case 2: a->add_ints(odd_int(rng)); break;
    case 3:
      if (a->ints_size()) a->set_ints(static_cast<int>(rng.below(a->ints_size())), odd_int(rng));
      break;
    case 4: a->set_name(rng.coin() ? "" : "axis"); break;
    default:
      if (a->has_t()) mutate_tensor(a->mutable_t(), rng);
      else a->clear_ints();
      break;
  }
}

void mutate_value_info(onnx::ValueInfoProto* vi, Rng& rng) {
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  switch (rng.below(5)) {
    case 0: tt->set_elem_type(static_cast<int32_t>(rng.below(22))); break;
    case 1:
      if (tt->shape().dim_size())
        tt->mutable_shape()->mutable_dim(static_cast<int>(rng.below(tt->shape().dim_size())))->set_dim_value(odd_int(rng));
      break;
    case 2: tt->mutable_shape()->add_dim()->set_dim_value(odd_int(rng)); break;
    case 3: tt->clear_shape(); break;
    default: vi->mutable_type()->mutable_sequence_type(); break;
  }
}

std::string structural(const std::string& bytes, Rng& rng) {
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) return bytes;
  auto* g = m.mutable_graph();
  switch (rng.below(14)) {
    case 0:
      if (g->node_size()) g->add_node()->CopyFrom(g->node(static_cast<int>(rng.below(g->node_size()))));
      break;
    case 1:
      if (g->initializer_size()) g->add_initializer()->CopyFrom(g->initializer(static_cast<int>(rng.below(g->initializer_size()))));
      break;
    case 2:
      if (g->node_size()) g->mutable_node()->DeleteSubrange(static_cast<int>(rng.below(g->node_size())), 1);
      break;
    case 3:
      if (g->node_size()) {
        auto* n = g->mutable_node(static_cast<int>(rng.below(g->node_size())));
        if (n->input_size() && rng.coin()) n->set_input(static_cast<int>(rng.below(n->input_size())), some_name(*g, rng));
        else if (n->output_size()) n->set_output(static_cast<int>(rng.below(n->output_size())), some_name(*g, rng));
      }
      break;
    case 4:
      if (g->node_size()) {
        auto* n = g->mutable_node(static_cast<int>(rng.below(g->node_size())));
        if (rng.coin()) n->add_input(some_name(*g, rng));
        else if (n->input_size()) n->mutable_input()->RemoveLast();
      }
      break;
    case 5:
      if (g->initializer_size()) mutate_tensor(g->mutable_initializer(static_cast<int>(rng.below(g->initializer_size()))), rng);
      break;
    case 6:
      if (g->node_size()) {
        auto* n = g->mutable_node(static_cast<int>(rng.below(g->node_size())));
        if (n->attribute_size()) mutate_attribute(n->mutable_attribute(static_cast<int>(rng.below(n->attribute_size()))), rng);
      }
      break;
    case 7:
      if (m.opset_import_size()) m.mutable_opset_import(0)->set_version(odd_int(rng) % 30);
      break;
    case 8:
      if (g->node_size()) {
        static const char* ops[] = {"Add", "MatMul", "Conv", "Reshape", "Softmax", "Gather", "Concat", "ReduceMean",
                                    "Relu", "Transpose", "Split", "Slice", "Expand", "Tile", "NoSuchOp", ""};
        g->mutable_node(static_cast<int>(rng.below(g->node_size())))->set_op_type(ops[rng.below(16)]);
      }
      break;
    case 9:
      if (g->input_size()) mutate_value_info(g->mutable_input(static_cast<int>(rng.below(g->input_size()))), rng);
      break;
    case 10:
      if (g->output_size()) mutate_value_info(g->mutable_output(static_cast<int>(rng.below(g->output_size()))), rng);
      break;
    case 11:  // a node that reads its own output: a cycle
      if (g->node_size()) {
        auto* n = g->mutable_node(static_cast<int>(rng.below(g->node_size())));
        if (n->output_size()) n->add_input(n->output(0));
      }
      break;
    case 12:
      if (g->node_size()) g->mutable_node(static_cast<int>(rng.below(g->node_size())))->set_domain(rng.coin() ? "com.microsoft" : "ai.onnx.ml");
      break;
    default:
      if (g->output_size()) g->add_output()->CopyFrom(g->output(static_cast<int>(rng.below(g->output_size()))));
      break;
  }
  std::string out;
  m.SerializeToString(&out);
  return out;
}

}  // namespace

std::string mutate(const std::string& bytes, Mutation m, Rng& rng) {
  std::string out = bytes;
  switch (m) {
    case Mutation::kFlipBits: {
      if (out.empty()) return out;
      int flips = 1 + static_cast<int>(rng.below(8));
      for (int i = 0; i < flips; ++i) out[rng.below(out.size())] ^= static_cast<char>(1u << rng.below(8));
      return out;
    }
    case Mutation::kTruncate: return out.substr(0, rng.below(out.size() + 1));
    case Mutation::kInsertBytes: {
      std::string junk(1 + rng.below(16), '\0');
      for (char& c : junk) c = static_cast<char>(rng.coin() ? rng.next() : (rng.coin() ? 0xff : 0x80));
      out.insert(rng.below(out.size() + 1), junk);
      return out;
    }
    case Mutation::kDuplicateBytes: {
      if (out.empty()) return out;
      size_t a = rng.below(out.size()), len = 1 + rng.below(std::min<size_t>(64, out.size() - a));
      out.insert(rng.below(out.size() + 1), out.substr(a, len));
      return out;
    }
    case Mutation::kDuplicateTopField: return duplicate_field(out, rng);
    case Mutation::kStructural: return structural(out, rng);
    default: return out;
  }
}

}  // namespace robust
