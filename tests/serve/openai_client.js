#!/usr/bin/env node
// `mminfer serve`'s /v1 through the official `openai` npm client, as its users call it:
//
//   node openai_client.js --mminfer BIN DIR     (DIR: tools/make_serve_repository.py's OUT)
//
// Starts the server on a free port (--port 0, reading its "listening on" line), then checks
// embeddings.create (floats, base64 as the client asks for it by default, base64 asked for,
// `dimensions` honoured and refused), usage counting text tokens, models.list and
// models.retrieve against the repository index, and errors the client turns into err.status,
// err.type, err.code and err.param. Prints one line per check and 'N passed, N failed'.
// The client comes from tools/node_modules (NODE_PATH, or the relative path below).
'use strict';
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

let OpenAI;
try {
  OpenAI = require('openai');
} catch {
  try {
    OpenAI = require(path.join(__dirname, '..', '..', 'tools', 'node_modules', 'openai'));
  } catch (e) {
    console.log(`FAIL: the openai npm client is not in tools/node_modules (scripts/bootstrap installs it): ${e.message}`);
    process.exit(1);
  }
}

function args() {
  const a = process.argv.slice(2);
  if (a.length !== 3 || a[0] !== '--mminfer') {
    console.error('usage: openai_client.js --mminfer BIN DIR');
    process.exit(2);
  }
  return { mminfer: a[1], dir: a[2] };
}

// `mminfer serve --port 0`; resolves with the process and its base URL once it says where it
// listens (it loads every model first), rejects when it exits or stays silent for 180 s.
function startServer(mminfer, repository) {
  const proc = spawn(mminfer, ['serve', '--repository', repository, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  return new Promise((resolve, reject) => {
    let said = '';
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`mminfer serve said nothing about listening in 180 s: ${said} ${stderr}`)); }, 180000);
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`mminfer serve exited with ${code} before listening: ${stderr}`)); });
    proc.stdout.on('data', (d) => {
      said += d;
      const m = /listening on (http:\/\/[^\s/]+:\d+)\//.exec(said);
      if (m) {
        clearTimeout(timer);
        proc.removeAllListeners('exit');
        proc.stdout.resume();
        resolve({ proc, base: m[1], stderr: () => stderr });
      }
    });
  });
}

// POST /v2/repository/index: the KServe view of what is loaded, to hold models.list against.
async function repositoryIndex(base) {
  const r = await fetch(base + '/v2/repository/index', { method: 'POST', body: '{}' });
  assert.equal(r.status, 200, `POST /v2/repository/index: ${r.status}`);
  return r.json();
}

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
function assertClose(got, want, tol, what) {
  assert.equal(got.length, want.length, `${what}: length ${got.length}, expected ${want.length}`);
  for (let i = 0; i < got.length; ++i)
    assert.ok(Math.abs(got[i] - want[i]) <= tol, `${what}: value ${i} is ${got[i]}, expected ${want[i]} (within ${tol})`);
}
function fromBase64(s) {
  const b = Buffer.from(s, 'base64');
  assert.equal(b.length % 4, 0, `base64 embedding of ${b.length} bytes is not float32s`);
  return Array.from(new Float32Array(b.buffer, b.byteOffset, b.length / 4));
}
function dataUrl(file, mime) {
  return `data:${mime};base64,` + fs.readFileSync(file).toString('base64');
}

// Runs `call`, which must fail with the client's APIError of `status`; checks what the client
// read from the envelope and returns the error.
async function expectError(call, status, fields, what) {
  let err;
  try {
    await call();
  } catch (e) {
    err = e;
  }
  assert.ok(err, `${what}: expected an error ${status}, the call succeeded`);
  assert.ok(err instanceof OpenAI.APIError, `${what}: expected an OpenAI.APIError, got ${err && err.constructor.name}: ${err}`);
  assert.equal(err.status, status, `${what}: err.status ${err.status}, expected ${status} (${err.message})`);
  for (const [k, v] of Object.entries(fields))
    assert.equal(err[k], v, `${what}: err.${k} is ${JSON.stringify(err[k])}, expected ${JSON.stringify(v)} (${err.message})`);
  assert.equal(typeof err.error?.message, 'string', `${what}: the envelope has no message: ${JSON.stringify(err.error)}`);
  return err;
}

async function main() {
  const { mminfer, dir } = args();
  const inputs = JSON.parse(fs.readFileSync(path.join(dir, 'inputs', 'inputs.json'), 'utf8'));
  const trained = inputs.clip_v2.matryoshka_dimensions;  // what clip version 2's pipeline.json claims
  const server = await startServer(mminfer, path.join(dir, 'repository'));
  const client = new OpenAI({ apiKey: 'unused', baseURL: server.base + '/v1', maxRetries: 0, timeout: 120000 });
  const texts = ['a photo of a cat', 'hi'];
  const ctx = {};

  const checks = [
    async function embeddings_float() {
      const r = await client.embeddings.create({ model: 'clip', input: texts, encoding_format: 'float' });
      assert.equal(r.object, 'list');
      assert.equal(r.model, 'clip');
      assert.equal(r.data.length, 2, `expected 2 embeddings, got ${r.data.length}`);
      r.data.forEach((e, i) => {
        assert.equal(e.object, 'embedding');
        assert.equal(e.index, i);
        assert.ok(Array.isArray(e.embedding) && e.embedding.length > trained[trained.length - 1],
          `embedding ${i}: expected an array longer than ${trained[trained.length - 1]}, got ${typeof e.embedding}`);
        assert.ok(Math.abs(norm(e.embedding) - 1) < 1e-4, `embedding ${i}: norm ${norm(e.embedding)}, expected 1`);
      });
      ctx.full = r.data.map((e) => e.embedding);
      ctx.usage = r.usage;
    },
    async function embeddings_base64_decoded_by_the_client() {
      // No encoding_format: the client asks for base64 and decodes it to numbers itself.
      const r = await client.embeddings.create({ model: 'clip', input: texts });
      r.data.forEach((e, i) => assertClose(e.embedding, ctx.full[i], 1e-6, `default (base64) embedding ${i}`));
    },
    async function embeddings_base64_as_asked() {
      const r = await client.embeddings.create({ model: 'clip', input: texts, encoding_format: 'base64' });
      r.data.forEach((e, i) => {
        assert.equal(typeof e.embedding, 'string', `embedding ${i}: expected a base64 string`);
        assertClose(fromBase64(e.embedding), ctx.full[i], 1e-6, `base64 embedding ${i}`);
      });
    },
    async function usage_counts_text_tokens() {
      const each = [];
      for (const t of texts) each.push((await client.embeddings.create({ model: 'clip', input: t })).usage);
      each.forEach((u, i) => {
        // At least a start and an end token around the text's own.
        assert.ok(u.prompt_tokens >= 3, `"${texts[i]}": prompt_tokens ${u.prompt_tokens}, expected at least 3`);
        assert.equal(u.total_tokens, u.prompt_tokens, `"${texts[i]}": total_tokens ${u.total_tokens} != prompt_tokens`);
      });
      assert.ok(each[0].prompt_tokens > each[1].prompt_tokens, `"${texts[0]}" should be more tokens than "${texts[1]}": ${JSON.stringify(each)}`);
      const sum = each[0].prompt_tokens + each[1].prompt_tokens;
      assert.equal(ctx.usage.prompt_tokens, sum, `both texts at once: prompt_tokens ${ctx.usage.prompt_tokens}, expected ${sum}`);
      // CLIP reads at most context_length tokens: a long text counts what the model reads.
      const long = await client.embeddings.create({ model: 'clip', input: 'cat '.repeat(500) });
      assert.equal(long.usage.prompt_tokens, 77, `a 500-word text: prompt_tokens ${long.usage.prompt_tokens}, expected 77 (context_length)`);
      const image = await client.embeddings.create({ model: 'clip', input: [dataUrl(inputs.clip_images[0], 'image/png')] });
      assert.equal(image.usage.prompt_tokens, 0, `an image: prompt_tokens ${image.usage.prompt_tokens}, expected 0`);
    },
    async function dimensions_honoured_where_trained() {
      for (const n of trained) {
        for (const format of [undefined, 'float']) {
          const r = await client.embeddings.create({ model: 'clip', input: texts, dimensions: n, encoding_format: format });
          r.data.forEach((e, i) => {
            const want = ctx.full[i].slice(0, n);
            const s = norm(want);
            assertClose(e.embedding, want.map((x) => x / s), 1e-5, `dimensions ${n} (${format || 'base64'}), embedding ${i}`);
          });
        }
      }
      const full = ctx.full[0].length;
      const r = await client.embeddings.create({ model: 'clip', input: texts[0], dimensions: full });
      assertClose(r.data[0].embedding, ctx.full[0], 1e-6, `dimensions ${full} (the full size)`);
    },
    async function dimensions_refused_with_400() {
      const bad = { type: 'invalid_request_error', param: 'dimensions', code: 'invalid_value' };
      const untrained = trained[0] + 1;
      let err = await expectError(() => client.embeddings.create({ model: 'clip', input: 'hi', dimensions: untrained }), 400, bad,
        `dimensions ${untrained} on clip`);
      assert.match(err.message, /trained for dimensions/, `the 400 should say which dimensions clip takes: ${err.message}`);
      const audio = dataUrl(inputs.audio_clips[0], 'audio/wav');
      err = await expectError(() => client.embeddings.create({ model: 'audio', input: [audio], dimensions: 1 }), 400, bad,
        'dimensions on a model not trained for them');
      assert.match(err.message, /not trained for shortened embeddings/, `the 400 should say why: ${err.message}`);
      for (const d of [0, -3, 2.5, '8', ctx.full[0].length + 1])
        await expectError(() => client.embeddings.create({ model: 'clip', input: 'hi', dimensions: d }), 400, bad, `dimensions ${JSON.stringify(d)}`);
    },
    async function models_list_and_retrieve() {
      const index = await repositoryIndex(server.base);
      const ready = index.filter((m) => m.state === 'READY').map((m) => m.name).sort();
      assert.ok(ready.includes('clip'), `the repository index should list clip READY: ${JSON.stringify(index)}`);
      const ids = [];
      for await (const m of client.models.list()) {
        assert.equal(m.object, 'model', `${m.id}: object ${m.object}`);
        assert.ok(Number.isInteger(m.created) && m.created > 1.6e9, `${m.id}: created ${m.created} is not a Unix time`);
        assert.equal(typeof m.owned_by, 'string', `${m.id}: owned_by`);
        ids.push(m.id);
      }
      assert.deepEqual(ids.sort(), ready, 'models.list should list exactly the loaded models');
      const clip = await client.models.retrieve('clip');
      assert.deepEqual([clip.id, clip.object, typeof clip.created, typeof clip.owned_by], ['clip', 'model', 'number', 'string']);
      await expectError(() => client.models.retrieve('no-such-model'), 404,
        { type: 'not_found_error', code: 'model_not_found', param: 'model' }, 'models.retrieve of an unknown model');
      // Only loaded models: once tiny is unloaded it is neither listed nor retrieved.
      const unload = await fetch(server.base + '/v2/repository/models/tiny/unload', { method: 'POST', body: '{}' });
      assert.equal(unload.status, 200, `unloading tiny: ${unload.status} ${await unload.text()}`);
      const after = [];
      for await (const m of client.models.list()) after.push(m.id);
      assert.ok(!after.includes('tiny') && after.includes('clip'), `models.list after unloading tiny: ${JSON.stringify(after)}`);
      await expectError(() => client.models.retrieve('tiny'), 404, { code: 'model_not_found' }, 'models.retrieve of an unloaded model');
    },
    async function errors_in_the_envelope() {
      const err = await expectError(() => client.embeddings.create({ model: 'no-such-model', input: 'hi' }), 404,
        { type: 'not_found_error', code: 'model_not_found', param: 'model' }, 'embeddings of an unknown model');
      assert.ok(err instanceof OpenAI.NotFoundError, `expected a NotFoundError, got ${err.constructor.name}`);
      const missing = await expectError(() => client.embeddings.create({ input: 'hi' }), 400,
        { type: 'invalid_request_error', code: 'missing_required_parameter', param: 'model' }, 'embeddings without a model');
      assert.ok(missing instanceof OpenAI.BadRequestError, `expected a BadRequestError, got ${missing.constructor.name}`);
      await expectError(() => client.embeddings.create({ model: 'clip', input: 'hi', encoding_format: 'int8' }), 400,
        { type: 'invalid_request_error', param: 'encoding_format' }, 'an unknown encoding_format');
      await expectError(() => client.embeddings.create({ model: 'audio', input: 'hi' }), 400,
        { type: 'invalid_request_error', param: 'input' }, 'text to the audio model');
      await expectError(() => client.post('/no-such-route', { body: {} }), 404, { type: 'not_found_error', code: 'unknown_url' },
        'an unknown /v1 path');
      await expectError(() => client.get('/embeddings'), 405, { type: 'invalid_request_error', code: 'method_not_allowed' },
        'GET /v1/embeddings');
    },
  ];

  let passed = 0, failed = 0;
  for (const check of checks) {
    try {
      await check();
      ++passed;
      console.log(`PASS ${check.name}`);
    } catch (e) {
      ++failed;
      console.log(`FAIL ${check.name}: ${e.message}`);
    }
  }
  server.proc.kill('SIGKILL');
  console.log(`${passed} passed, ${failed} failed`);
  if (failed && server.stderr()) console.log(`server stderr (last 2000 characters):\n${server.stderr().slice(-2000)}`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
