#!/usr/bin/env node
// `mminfer serve`'s text generation through the official `openai` npm client, unchanged:
//
//   node openai_generate_client.js --url BASE --model NAME --audio-model NAME --audio WAV --audio-text TEXT
//
// (a running server; tests/serve/generate_e2e.py starts it, and passes --audio-model, --audio and
// the text `mminfer transcribe` makes of it). Checks chat.completions.create and
// completions.create whole and streamed (`for await` over the chunks, usage with
// stream_options), that the streamed text is the whole answer's, n choices, leaving a stream early,
// audio.transcriptions.create with a file upload, a chat with an input_audio part, and errors the
// client turns into err.status and err.param. Prints one line per check and 'N passed, N failed'. The client comes from tools/node_modules (NODE_PATH, or the path below).
'use strict';
const assert = require('node:assert/strict');
const path = require('node:path');

let OpenAI;
try {
  OpenAI = require('openai');
} catch {
  OpenAI = require(path.join(__dirname, '..', '..', 'tools', 'node_modules', 'openai'));
}

function args() {
  const a = process.argv.slice(2);
  const get = (flag) => {
    const i = a.indexOf(flag);
    if (i < 0 || i + 1 >= a.length) {
      console.error('usage: openai_generate_client.js --url BASE --model NAME --audio-model NAME --audio WAV --audio-text TEXT');
      process.exit(2);
    }
    return a[i + 1];
  };
  return { url: get('--url'), model: get('--model'), audioModel: get('--audio-model'), audio: get('--audio'),
    audioText: get('--audio-text') };
}

async function collect(stream) {
  const texts = [];
  const reasons = [];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      const piece = c.delta ? c.delta.content : c.text;
      texts[c.index] = (texts[c.index] || '') + (piece || '');
      if (c.finish_reason) reasons[c.index] = c.finish_reason;
    }
  }
  return { texts, reasons, usage };
}

async function main() {
  const { url, model, audioModel, audio, audioText } = args();
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  const messages = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'what is in the box?' }];
  const checks = [
    ['models.list names the generator', async () => {
      const ids = [];
      for await (const m of client.models.list()) ids.push(m.id);
      assert.ok(ids.includes(model), `listed ${ids}`);
    }],
    ['chat whole and streamed give the same text', async () => {
      const whole = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
      assert.equal(whole.object, 'chat.completion');
      assert.equal(whole.choices[0].message.role, 'assistant');
      assert.equal(typeof whole.choices[0].message.content, 'string');
      assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
      const streamed = await collect(await client.chat.completions.create({
        model, messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true },
      }));
      assert.equal(streamed.texts[0], whole.choices[0].message.content);
      assert.equal(streamed.reasons[0], whole.choices[0].finish_reason);
      // The same prompt again starts from the first one's cached prefix; the counts stay.
      assert.equal(streamed.usage.prompt_tokens, whole.usage.prompt_tokens);
      assert.equal(streamed.usage.completion_tokens, whole.usage.completion_tokens);
      assert.ok(streamed.usage.prompt_tokens_details.cached_tokens > 0, 'the repeated prompt reused nothing');
    }],
    ['completions whole and streamed, n choices, seeds', async () => {
      const body = { model, prompt: 'hello world', max_tokens: 16, temperature: 1.2, seed: 11, n: 2 };
      const whole = await client.completions.create(body);
      assert.equal(whole.choices.length, 2);
      assert.notEqual(whole.choices[0].text, whole.choices[1].text, 'two choices drew the same text');
      const streamed = await collect(await client.completions.create({ ...body, stream: true }));
      assert.deepEqual(streamed.texts, whole.choices.map((c) => c.text));
      const again = await client.completions.create(body);
      assert.deepEqual(again.choices.map((c) => c.text), whole.choices.map((c) => c.text), 'the same seed drew other text');
    }],
    ['leaving a stream early (break) ends it cleanly', async () => {
      const stream = await client.chat.completions.create({ model, messages, max_tokens: 200, temperature: 0.7, seed: 2, stream: true });
      let chunks = 0;
      for await (const chunk of stream) {
        assert.ok(chunk.choices);
        if (++chunks === 3) break;  // the client aborts the request
      }
      assert.equal(chunks, 3);
      assert.ok(stream.controller.signal.aborted, 'the request was not aborted');
      const after = await client.completions.create({ model, prompt: 'still there?', max_tokens: 4 });
      assert.equal(after.choices.length, 1);
    }],
    ['audio.transcriptions.create uploads a file and reads the text', async () => {
      const file = await OpenAI.toFile(require('node:fs').readFileSync(audio), 'clip.wav');
      const json = await client.audio.transcriptions.create({ model: audioModel, file });
      assert.equal(json.text, audioText);
      const verbose = await client.audio.transcriptions.create({
        model: audioModel, file: await OpenAI.toFile(require('node:fs').readFileSync(audio), 'clip.wav'),
        response_format: 'verbose_json', timestamp_granularities: ['segment'],
      });
      assert.ok(Array.isArray(verbose.segments) && verbose.duration > 0, JSON.stringify(verbose).slice(0, 200));
    }],
    ['chat.completions.create with an input_audio part answers with the transcript', async () => {
      const data = require('node:fs').readFileSync(audio).toString('base64');
      const audioMessages = [{ role: 'user', content: [
        { type: 'text', text: 'What is said?' }, { type: 'input_audio', input_audio: { data, format: 'wav' } }] }];
      const whole = await client.chat.completions.create({ model: audioModel, messages: audioMessages });
      assert.equal(whole.choices[0].message.content, audioText);
      const streamed = await collect(await client.chat.completions.create({ model: audioModel, messages: audioMessages, stream: true }));
      assert.equal(streamed.texts[0], audioText);
    }],
    ['errors arrive as the client\'s error classes', async () => {
      await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: 0 }), (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `got ${e.constructor.name}`);
        assert.equal(e.status, 400);
        assert.equal(e.param, 'max_tokens');
        return true;
      });
      await assert.rejects(client.chat.completions.create({ model: 'no-such-model', messages }), (e) => {
        assert.ok(e instanceof OpenAI.NotFoundError, `got ${e.constructor.name}`);
        assert.equal(e.param, 'model');
        return true;
      });
      await assert.rejects(client.completions.create({ model, prompt: Array(400).fill(5), max_tokens: 4 }), (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.code, 'context_length_exceeded');
        return true;
      });
    }],
  ];
  let passed = 0;
  let failed = 0;
  for (const [name, check] of checks) {
    try {
      await check();
      passed++;
      console.log(`PASS ${name}`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}: ${e.message}`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
