// run.js: an ONNX model in ONNX Runtime (onnxruntime-node, the CPU
// library inside the package), for tests/cli/onnx.sh.
//
//   node run.js MODEL.onnx INPUT.npy [--softmax]
//
// INPUT.npy is the graph's input, a batch of samples: float32, or int64
// tokens ('<f4' or '<i8', C order). Prints the output "output" as CSV:
// index, then the values of each sample (its softmax over the last
// dimension with --softmax, as loopkit predict writes a classifier's
// probabilities), 9 significant digits each.
//
//   node run.js MODEL.onnx --greedy PROMPT N T
//
// A language model of bytes (input int64 [batch, T], output [batch, T,
// vocab]): PROMPT, then N tokens each the most likely after the last T at
// most (a model of a fixed T needs a PROMPT at least that long; one whose
// T is given at run time, gpt's, takes a shorter context), printed as
// loopkit generate prints them, which gives the same with --top-k 1.
//
//   node run.js MODEL.onnx --last PROMPT
//
// The same model's logits at the last position of PROMPT's bytes, on one
// line, comma separated, 9 significant digits (tests/onnx/logits prints
// loopkit's).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

function usage() {
  process.stderr.write('usage: node run.js MODEL.onnx INPUT.npy [--softmax]\n' +
    '       node run.js MODEL.onnx --greedy PROMPT N T\n' +
    '       node run.js MODEL.onnx --last PROMPT\n');
  process.exit(2);
}

function softmax(row) {
  const m = Math.max(...row);
  const e = row.map((v) => Math.exp(v - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}

// A .npy file's array: { type, dims, data } (version 1 or 2 headers).
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') {
    throw new Error(`${file}: not a .npy file`);
  }
  const v1 = buf[6] === 1;
  const hlen = v1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (v1 ? 10 : 12) + hlen;
  const header = buf.toString('latin1', v1 ? 10 : 12, start);
  const descr = /'descr': *'([^']*)'/.exec(header);
  const shape = /'shape': *\(([^)]*)\)/.exec(header);
  if (!descr || !shape || /'fortran_order': *True/.test(header)) {
    throw new Error(`${file}: header ${header}`);
  }
  const dims = shape[1].split(',').filter((d) => d.trim()).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const types = { '<f4': ['float32', Float32Array, 4], '<i8': ['int64', BigInt64Array, 8] };
  const t = types[descr[1]];
  if (!t) throw new Error(`${file}: dtype ${descr[1]}, expected <f4 or <i8`);
  if (buf.length - start !== count * t[2]) {
    throw new Error(`${file}: ${buf.length - start} bytes of data for [${dims}]`);
  }
  const bytes = buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length);
  return { type: t[0], dims, data: new t[1](bytes) };
}

// PROMPT and N more bytes, each the argmax of the logits after the last T.
async function greedy(model, prompt, n, T) {
  const session = await ort.InferenceSession.create(model);
  const tokens = Array.from(Buffer.from(prompt, 'latin1'));
  if (!(n >= 0 && T > 0 && tokens.length > 0)) usage();
  for (let k = 0; k < n; k++) {
    const ctx = BigInt64Array.from(tokens.slice(-T), BigInt);
    const t = ctx.length;
    const out = (await session.run({ input: new ort.Tensor('int64', ctx, [1, t]) })).output;
    const V = out.dims[2];
    const last = out.data.slice((t - 1) * V, t * V);
    let best = 0;
    for (let v = 1; v < V; v++) if (last[v] > last[best]) best = v;
    tokens.push(best);
  }
  process.stdout.write(Buffer.from(tokens));
}

// The logits after PROMPT's bytes, in full.
async function last(model, prompt) {
  const session = await ort.InferenceSession.create(model);
  const ctx = BigInt64Array.from(Buffer.from(prompt, 'latin1'), (b) => BigInt(b));
  const t = ctx.length;
  if (t === 0) usage();
  const out = (await session.run({ input: new ort.Tensor('int64', ctx, [1, t]) })).output;
  const V = out.dims[2];
  const row = Array.from(out.data.slice((t - 1) * V, t * V), (v) => v.toPrecision(9));
  process.stdout.write(`${row.join(',')}\n`);
}

async function main(argv) {
  if (argv[1] === '--last' && argv.length === 3) return last(argv[0], argv[2]);
  if (argv[1] === '--greedy' && argv.length === 5) {
    return greedy(argv[0], argv[2], Number(argv[3]), Number(argv[4]));
  }
  if (argv.length < 2 || argv.length > 3 || (argv[2] && argv[2] !== '--softmax')) usage();
  const [model, input] = argv;
  const x = readNpy(input);
  const tensor = new ort.Tensor(x.type, x.data, x.dims);
  const session = await ort.InferenceSession.create(model);
  const result = await session.run({ input: tensor });
  const out = result.output;
  const n = out.dims[0];
  const per = out.data.length / n;
  const lines = [];
  for (let i = 0; i < n; i++) {
    let row = Array.from(out.data.slice(i * per, (i + 1) * per), Number);
    if (argv[2]) row = softmax(row);
    lines.push([i, ...row.map((v) => v.toPrecision(9))].join(','));
  }
  process.stdout.write(`# output [${out.dims}]\n${lines.join('\n')}\n`);
}

main(process.argv.slice(2)).catch((e) => {
  process.stderr.write(`run.js: ${e.message}\n`);
  process.exit(1);
});
