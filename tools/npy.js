// Reads and writes NumPy .npy files (format 1.0-3.0, C order, little-endian) as
// {dtype, shape, data} where dtype is an onnxruntime tensor type name.
'use strict';
const fs = require('fs');

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]);  // \x93NUMPY

// numpy descr (without byte-order mark) <-> onnxruntime type and typed array.
const TYPES = [
  {descr: 'f4', ort: 'float32', array: Float32Array},
  {descr: 'f8', ort: 'float64', array: Float64Array},
  {descr: 'f2', ort: 'float16', array: Uint16Array},
  {descr: 'i8', ort: 'int64', array: BigInt64Array},
  {descr: 'u8', ort: 'uint64', array: BigUint64Array},
  {descr: 'i4', ort: 'int32', array: Int32Array},
  {descr: 'u4', ort: 'uint32', array: Uint32Array},
  {descr: 'i2', ort: 'int16', array: Int16Array},
  {descr: 'u2', ort: 'uint16', array: Uint16Array},
  {descr: 'i1', ort: 'int8', array: Int8Array},
  {descr: 'u1', ort: 'uint8', array: Uint8Array},
  {descr: 'b1', ort: 'bool', array: Uint8Array},
];

function parseHeader(text, path) {
  const field = (name) => {
    const m = text.match(new RegExp(`'${name}'\\s*:\\s*('[^']*'|True|False|\\([^)]*\\))`));
    if (!m) throw new Error(`${path}: npy header has no '${name}'`);
    return m[1];
  };
  const descr = field('descr').slice(1, -1);
  if (field('fortran_order') !== 'False') throw new Error(`${path}: Fortran-ordered arrays are not supported`);
  const dims = field('shape').slice(1, -1).split(',').map((s) => s.trim()).filter((s) => s.length);
  const shape = dims.map((d) => {
    const n = Number(d.replace(/L$/, ''));
    if (!Number.isInteger(n) || n < 0) throw new Error(`${path}: bad dimension '${d}' in npy shape`);
    return n;
  });
  return {descr, shape};
}

function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.length < 10 || !buf.subarray(0, 6).equals(MAGIC)) throw new Error(`${path}: not an .npy file`);
  const major = buf[6];
  let headerLen, offset;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    offset = 10;
  } else if (major === 2 || major === 3) {
    headerLen = buf.readUInt32LE(8);
    offset = 12;
  } else {
    throw new Error(`${path}: unsupported npy version ${major}`);
  }
  if (offset + headerLen > buf.length) throw new Error(`${path}: truncated npy header`);
  const {descr, shape} = parseHeader(buf.toString('latin1', offset, offset + headerLen), path);
  const order = descr[0];
  const type = TYPES.find((t) => t.descr === descr.slice(1));
  if (!type || (order === '>' && type.array.BYTES_PER_ELEMENT > 1)) throw new Error(`${path}: unsupported dtype '${descr}'`);
  const count = shape.reduce((a, b) => a * b, 1);
  const start = offset + headerLen;
  const bytes = count * type.array.BYTES_PER_ELEMENT;
  if (start + bytes > buf.length) throw new Error(`${path}: holds ${buf.length - start} data bytes, shape needs ${bytes}`);
  // Copy into a fresh, aligned buffer: typed arrays need element alignment.
  const data = new type.array(count);
  Buffer.from(data.buffer).set(buf.subarray(start, start + bytes));
  return {dtype: type.ort, shape, data};
}

function writeNpy(path, dtype, shape, data) {
  const type = TYPES.find((t) => t.ort === dtype);
  if (!type) throw new Error(`cannot write tensors of type ${dtype} as .npy`);
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  const order = type.array.BYTES_PER_ELEMENT === 1 ? '|' : '<';
  let header = `{'descr': '${order}${type.descr}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  // Pad with spaces so magic + version + length + header + '\n' is a multiple of 64 bytes.
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header.padEnd(total - 10 - 1, ' ') + '\n';
  const head = Buffer.alloc(10);
  MAGIC.copy(head, 0);
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const typed = data instanceof type.array ? data : type.array.from(data);
  const body = Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

module.exports = {readNpy, writeNpy};
